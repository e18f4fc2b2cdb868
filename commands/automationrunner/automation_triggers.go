package automationrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"lathe/commands/automations"
	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
)

// The automatic triggers: schedule{every} (durable: the next run is one
// interval after the last firing the journal records, so a restart fires at
// most one catch-up run), on_event{event} (typed events: Skill fires,
// Lattice events, Automation completions) and on_skill{skill_id}. An
// automatic firing while a run of the Automation is active starts nothing
// and is recorded as automation-trigger-skipped.

// AutomationTriggers fires the Automations' automatic triggers and edits
// their schedules.
type AutomationTriggers struct {
	*core.Core
	read core.AutomationReader
	// runs starts a run; records saves a patched schedule.
	runs interface {
		startRun(ctx context.Context, id string, req RunRequest, trig events.RunTrigger) (string, error)
	}
	records interface {
		PutAutomation(ctx context.Context, id string, a events.Automation) (projections.AutomationRecord, error)
	}

	fire  sync.Mutex // one firing decision at a time
	qmu   sync.Mutex
	queue []projections.Change
	wake  chan struct{}
	// sched wakes the scheduler after a record changed.
	sched chan struct{}

	// cancel ends the scheduler and the follower; wg waits for them.
	lmu    sync.Mutex
	cancel context.CancelFunc
	halted bool
	wg     sync.WaitGroup
}

// Rescheduled wakes the scheduler after a record changed.
func (s *AutomationTriggers) Rescheduled() {
	select {
	case s.sched <- struct{}{}:
	default:
	}
}

// stop ends the scheduler and the follower and waits for them.
func (s *AutomationTriggers) stop() {
	s.lmu.Lock()
	s.halted = true
	if s.cancel != nil {
		s.cancel()
	}
	s.lmu.Unlock()
	s.wg.Wait()
}

// SchedulePatch is PATCH /api/schedules/{id}'s body: it changes the
// canonical record.
type SchedulePatch struct {
	Enabled *bool   `json:"enabled,omitempty"`
	Every   *string `json:"every,omitempty"`
	Input   *string `json:"input,omitempty"`
}

// PatchSchedule changes a schedule-triggered Automation's enabled flag,
// interval or input (a validated full save of the record).
func (s *AutomationTriggers) PatchSchedule(ctx context.Context, id string, p SchedulePatch) (projections.AutomationRecord, error) {
	rec, ok := s.read.Automation(id)
	if !ok || rec.Trigger.Kind != events.TriggerSchedule {
		return projections.AutomationRecord{}, fmt.Errorf("%w: schedule %q", core.ErrNotFound, id)
	}
	a := rec.Automation
	if p.Enabled != nil {
		a.Enabled = *p.Enabled
	}
	if p.Every != nil {
		a.Trigger.Every = *p.Every
	}
	if p.Input != nil {
		a.Trigger.Input = *p.Input
	}
	return s.records.PutAutomation(ctx, id, a)
}

// nextRun is when a schedule fires next: one interval after its last
// firing, or after its last save when it never fired.
func nextRun(a projections.AutomationRecord) (time.Time, bool) {
	if !a.Enabled || a.Trigger.Kind != events.TriggerSchedule {
		return time.Time{}, false
	}
	every, err := automations.ParseEvery(a.Trigger.Every)
	if err != nil {
		return time.Time{}, false
	}
	base := a.UpdatedAt
	if a.LastTriggeredAt != nil && a.LastTriggeredAt.After(base) {
		base = *a.LastTriggeredAt
	}
	return base.Add(every), true
}

// NextRun is the next firing of a schedule, RFC 3339, or nil.
func (s *AutomationTriggers) NextRun(id string) *string {
	a, ok := s.read.Automation(id)
	if !ok {
		return nil
	}
	t, ok := nextRun(a)
	if !ok {
		return nil
	}
	v := t.UTC().Format(time.RFC3339Nano)
	return &v
}

// StartTriggers runs the schedules and the event triggers until ctx ends.
// The daemon calls it once, after ResumeRuns.
func (s *AutomationTriggers) StartTriggers(ctx context.Context) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.halted {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.schedule(ctx)
	}()
	go func() {
		defer s.wg.Done()
		s.follow(ctx)
	}()
}

func (s *AutomationTriggers) schedule(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		wait := time.Hour
		for _, a := range s.read.Automations() {
			next, ok := nextRun(a)
			if !ok {
				continue
			}
			if !next.After(now) {
				// Missed firings collapse into this one: the firing is
				// recorded now, so the next is one interval from now.
				s.fireAutomatic(ctx, a.ID, events.RunTrigger{Kind: events.TriggerSchedule}, a.Trigger.Input)
				every, _ := automations.ParseEvery(a.Trigger.Every)
				wait = min(wait, every)
				continue
			}
			wait = min(wait, next.Sub(now))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.sched:
		case <-timer.C:
		}
	}
}

// fireAutomatic starts a run for an automatic trigger, or records the
// firing as skipped while a run is active.
func (s *AutomationTriggers) fireAutomatic(ctx context.Context, id string, trig events.RunTrigger, input string) {
	s.fire.Lock()
	defer s.fire.Unlock()
	a, ok := s.read.Automation(id)
	if !ok || !a.Enabled {
		return
	}
	if trig.Seq != 0 && trig.Seq <= a.HandledSeq() {
		return // handled already (the catch-up at start and the live feed overlap), or older than the record
	}
	if active := s.read.ActiveAutomationRuns(id); len(active) > 0 {
		err := s.Retry(ctx, func() error {
			a, ok := s.read.Automation(id)
			if !ok {
				return nil
			}
			return s.AppendExpecting(ctx, id, a.Version, events.AutomationTriggerSkipped{Trigger: trig.Kind, Event: trig.Event, Seq: trig.Seq, Run: active[0].RunID})
		})
		if err != nil {
			s.Log.Error("automation trigger: record the skip", "automation", id, "err", err)
		}
		return
	}
	if _, err := s.runs.startRun(ctx, id, RunRequest{Input: &input}, trig); err != nil {
		s.Log.Error("automation trigger: start a run", "automation", id, "trigger", trig.Kind, "err", err)
	}
}

// Observe hands the trigger follower the committed changes (the daemon's
// commit feed calls it); it never blocks the feed.
func (s *AutomationTriggers) Observe(changes []projections.Change) {
	var mine []projections.Change
	for _, c := range changes {
		if len(c.Typed) > 0 || c.Type == (events.SkillFired{}).EventType() {
			mine = append(mine, c)
		}
	}
	if len(mine) == 0 {
		return
	}
	s.qmu.Lock()
	s.queue = append(s.queue, mine...)
	s.qmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *AutomationTriggers) follow(ctx context.Context) {
	s.catchUp(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.qmu.Lock()
		batch := s.queue
		s.queue = nil
		s.qmu.Unlock()
		for _, c := range batch {
			s.react(ctx, c)
		}
	}
}

// catchUpWindow bounds how far back the start looks for events that
// committed while no trigger follower ran (a crash between an event's
// commit and its firing).
const catchUpWindow = 10_000

// catchUp fires, before any live event, what the journal holds after each
// event-triggered Automation's handled seq: the firings a stop cut off
// between an event's commit and its run (or skip) being recorded. Each
// firing records its event's seq, so none fires twice.
func (s *AutomationTriggers) catchUp(ctx context.Context) {
	from := s.Journal.Last()
	for _, a := range s.read.Automations() {
		if a.Enabled && (a.Trigger.Kind == events.TriggerOnEvent || a.Trigger.Kind == events.TriggerOnSkill) {
			from = min(from, a.HandledSeq())
		}
	}
	last := s.Journal.Last()
	if last > catchUpWindow {
		from = max(from, last-catchUpWindow)
	}
	if from >= last {
		return
	}
	err := s.Journal.Scan(ctx, from, int(last-from), func(seq uint64, raw []byte) error {
		if seq > last {
			return core.ErrStopScan
		}
		env, p, err := events.DecodeStored(raw)
		if err != nil {
			return err
		}
		s.react(ctx, projections.Change{Envelope: env, Typed: projections.TypedEventsOf(env, p)})
		return nil
	})
	if err != nil && !errors.Is(err, core.ErrStopScan) && ctx.Err() == nil {
		s.Log.Error("automation triggers: catch up", "err", err)
	}
}

// react fires the on_skill Automations of a Skill fire and the on_event
// Automations of each typed event (never an Automation's own events).
func (s *AutomationTriggers) react(ctx context.Context, c projections.Change) {
	autos := s.read.Automations()
	if c.Type == (events.SkillFired{}).EventType() {
		for _, a := range autos {
			if a.Trigger.Kind == events.TriggerOnSkill && a.Trigger.SkillID == c.AggregateID {
				s.fireAutomatic(ctx, a.ID, events.RunTrigger{Kind: events.TriggerOnSkill, Event: c.AggregateID, Seq: c.Seq}, a.Trigger.Input)
			}
		}
	}
	for _, te := range c.Typed {
		for _, a := range autos {
			if a.Trigger.Kind != events.TriggerOnEvent || a.Trigger.Event != te.Type || te.Automation == a.ID {
				continue
			}
			input := a.Trigger.Input
			if input == "" {
				b, _ := json.Marshal(te)
				input = string(b)
			}
			s.fireAutomatic(ctx, a.ID, events.RunTrigger{Kind: events.TriggerOnEvent, Event: te.Type, Seq: te.Seq}, input)
		}
	}
}
