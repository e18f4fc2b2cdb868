package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"lathe/commands/agentrun"
	"lathe/commands/chats"
	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
)

// A2A runs inbound agent-to-agent tasks: a2a-task-received when one is
// dispatched to a receiver, the receiver's Agent runs the message (the one
// inference path, no tools), a2a-task-ended with its answer or failure.
// Lathe never calls out.
type A2A struct {
	*core.Core
	receivers []core.A2AReceiver
}

// Receivers lists the configured receivers, in configuration order.
func (s *A2A) Receivers() []core.A2AReceiver { return s.receivers }

// A2A task states as the protocol names them.
const (
	A2AWorking   = "working"
	A2ACompleted = "completed"
	A2AFailed    = "failed"
)

// A2ATask is one inbound task to dispatch.
type A2ATask struct {
	ReceiverID string
	ContextID  string
	// Message is the A2A message as sent (JSON), Text its text parts.
	Message json.RawMessage
	Text    string
}

func (s *A2A) receiver(id string) (core.A2AReceiver, error) {
	for _, r := range s.receivers {
		if r.ID == id {
			return r, nil
		}
	}
	return core.A2AReceiver{}, fmt.Errorf("%w: no A2A receiver %q", core.ErrNotFound, id)
}

// Dispatch journals an inbound task, runs it on the receiver's Agent and
// journals its end, answering the task as it ended. An unknown receiver is
// ErrNotFound and nothing is journaled.
func (s *A2A) Dispatch(ctx context.Context, t A2ATask) (projections.A2ATask, error) {
	r, err := s.receiver(t.ReceiverID)
	if err != nil {
		return projections.A2ATask{}, err
	}
	if err := chats.CheckChatContent("the message text", t.Text); err != nil {
		return projections.A2ATask{}, err
	}
	if err := core.CheckFreeJSON("the message", t.Message); err != nil {
		return projections.A2ATask{}, err
	}
	if s.Opts.Runtime == nil {
		return projections.A2ATask{}, fmt.Errorf("%w: no Agent runtime is configured", core.ErrUnavailable)
	}
	id := ulid.Make().String()
	if t.ContextID == "" {
		t.ContextID = id
	}
	run, err := s.Turns.Reserve(a2aRunKey, id)
	if err != nil {
		return projections.A2ATask{}, err
	}
	defer s.Turns.Release(a2aRunKey, id, run)
	err = s.AppendExpecting(ctx, id, 0, events.A2ATaskReceived{ReceiverID: r.ID, AgentID: r.AgentID, ContextID: t.ContextID,
		Message: events.NewJSON(t.Message), Text: events.NewText(t.Text)})
	if err != nil {
		return projections.A2ATask{}, err
	}
	// The task runs under the daemon's turn context: a client that goes
	// away does not cut it short, a shutdown ends it.
	obs := &taskObserver{clock: agentrun.InferenceClock{Agent: r.AgentID}}
	res := s.Opts.Runtime.RunTurn(s.Turns.Ctx, agent.TurnRequest{AgentID: r.AgentID, Input: t.Text, Stop: run.Stop,
		MaxSteps: s.Opts.Turns.MaxSteps, StallTimeout: s.Opts.Turns.StallTimeout}, obs)
	end := events.A2ATaskEnded{State: A2ACompleted, Output: events.NewText(res.Output),
		Inferences: obs.clock.Done, Tokens: res.Usage}
	if res.Outcome != agent.OutcomeDone {
		end.State, end.Error = A2AFailed, "the task was stopped"
		if res.Err != nil {
			end.Error = res.Err.Error()
		}
	}
	if err := s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(id, end)}); err != nil {
		return projections.A2ATask{}, err
	}
	task, _ := s.Store.A2ATask(id)
	return task, nil
}

// taskObserver keeps a task's inferences for its end (telemetry); a task
// streams nothing live and has no tools.
type taskObserver struct {
	agentrun.QuietTurn
	clock agentrun.InferenceClock
}

func (o *taskObserver) Started(string) error           { o.clock.Ask(); return nil }
func (o *taskObserver) Delta(string, string)           { o.clock.Delta() }
func (o *taskObserver) Step(st agent.StepOutput) error { o.clock.Step(st); return nil }

// a2aRunKey keys the A2A tasks among the turns (for a shutdown's Stop).
const a2aRunKey = "a2a"

// Task reads an inbound task back.
func (s *A2A) Task(id string) (projections.A2ATask, error) {
	t, ok := s.Store.A2ATask(id)
	if !ok {
		return t, fmt.Errorf("%w: A2A task %q", core.ErrNotFound, id)
	}
	return t, nil
}

// ReconcileA2A ends, at start, every A2A task the journal shows received
// but not ended: the daemon stopped under it.
func (s *A2A) ReconcileA2A(ctx context.Context) error {
	for _, t := range s.Store.LiveA2ATasks() {
		err := s.Append(ctx, []journal.Event{events.New(t.ID, events.A2ATaskEnded{State: A2AFailed,
			Error: "interrupted: the daemon stopped during this task"})}, journal.Expectation{AggregateID: t.ID, Version: t.Version})
		if err != nil && !errors.Is(err, core.ErrConflict) {
			return fmt.Errorf("end interrupted A2A task %s: %w", t.ID, err)
		}
	}
	return nil
}

// NewA2A returns the A2A capability for the configured receivers.
func NewA2A(c *core.Core, receivers []core.A2AReceiver) *A2A {
	return &A2A{Core: c, receivers: receivers}
}
