package projections

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// The audit trail of a Session is read from the journal on demand: its own
// aggregate's events (turns, attachments, files, git, environment, tasks)
// and those of the aggregates that name it (approvals raised in its turns,
// and whatever later aggregates register through relate), merged in seq
// order. The store keeps only which aggregates belong to which Session
// (related), so a deleted Session's trail stays readable for as long as
// the journal holds it.

// AuditJournal is what the audit and time travel read: the journal.
type AuditJournal interface {
	ScanAggregate(ctx context.Context, aggregateID string, after uint64, limit int, fn func(seq uint64, raw []byte) error) error
	Last() uint64
}

// AuditEntry is one event of a Session's trail. Action is what was done, in
// words; the reader prefixes who did it (Summary).
type AuditEntry struct {
	Seq   uint64        `json:"seq"`
	At    time.Time     `json:"at"`
	Type  string        `json:"type"`
	Kind  string        `json:"kind"`
	Actor journal.Actor `json:"actor"`
	// ActorName is the configured name of an operator's credential.
	ActorName string          `json:"actor_name,omitempty"`
	Summary   string          `json:"summary"`
	TurnID    string          `json:"turn_id,omitempty"`
	Data      json.RawMessage `json:"data"`
	// Action is Summary without its actor, for a view that shows the actor
	// apart.
	Action string `json:"action"`
}

// AuditKinds are the kinds an entry may have, for filtering.
var AuditKinds = []string{"session", "environment", "task", "turn", "approval", "attachment", "file", "git", "attempt"}

// auditKind files an event type under one of AuditKinds (or its aggregate's
// name for an aggregate added later).
func auditKind(env journal.Envelope) string {
	t := env.Type
	switch {
	case strings.HasPrefix(t, "turn-"), strings.HasPrefix(t, "tool-call-"), strings.HasPrefix(t, "lattice-"), t == "session-rewound", t == "session-turn-restored":
		return "turn"
	case strings.HasPrefix(t, "approval-"):
		return "approval"
	case strings.HasPrefix(t, "attempt-"):
		return "attempt"
	case strings.HasPrefix(t, "session-environment-"):
		return "environment"
	case strings.HasPrefix(t, "session-task-"):
		return "task"
	case strings.HasPrefix(t, "session-attachment"):
		return "attachment"
	case strings.HasPrefix(t, "session-file-"), strings.HasPrefix(t, "session-folder-"):
		return "file"
	case strings.HasPrefix(t, "session-git-"), strings.HasPrefix(t, "session-check-"):
		return "git"
	case env.Aggregate == events.Session:
		return "session"
	}
	return env.Aggregate
}

// AuditModel is the read model of the Sessions' audit trails: which
// aggregates belong to which Session. It reads the trails, and the
// Sessions' pasts (history.go), from the journal.
type AuditModel struct {
	sh *shared
	// related: session id → the other aggregates of its audit trail, kept
	// after the Session is deleted.
	related map[string][]string
	// pasts: images of Sessions' pasts for SessionAt (history.go), a
	// cache the checkpoint does not hold.
	pasts pastCache
}

// relate files aggregate id (an approval, say) under session; the write
// lock is held.
func (s *AuditModel) relate(session, id string) {
	if session == "" || slices.Contains(s.related[session], id) {
		return
	}
	s.related[session] = append(s.related[session], id)
}

// AuditAggregates returns the aggregates of a Session's trail: the Session
// and those that name it.
func (s *AuditModel) AuditAggregates(session string) []string {
	s.sh.mu.RLock()
	defer s.sh.mu.RUnlock()
	return append([]string{session}, s.related[session]...)
}

// ErrNoHistory: the journal holds no event of that Session.
var ErrNoHistory = errors.New("no such Session in the journal")

// AuditQuery selects a page of a trail: the entries after seq After, at most
// Limit (all with 0), of the Kinds given (all with none).
type AuditQuery struct {
	After uint64
	Limit int
	Kinds map[string]bool
}

// SessionAudit returns a page of the Session's trail and whether more
// entries follow it.
func (s *AuditModel) SessionAudit(ctx context.Context, j AuditJournal, session string, q AuditQuery) ([]AuditEntry, bool, error) {
	defer s.pasts.want(session) // a time travel may follow (history.go)
	ids := s.AuditAggregates(session)
	var hits []journal.Envelope
	found := false
	for i, id := range ids {
		n := 0
		stop := errors.New("page full")
		err := j.ScanAggregate(ctx, id, q.After, 0, func(seq uint64, raw []byte) error {
			env, ok := parseEnvelope(raw)
			if !ok {
				var err error
				if env, err = journal.DecodeEnvelope(raw); err != nil {
					return fmt.Errorf("seq %d: %w", seq, err)
				}
			}
			if i == 0 && env.Aggregate != events.Session {
				return ErrNoHistory
			}
			found = true
			if len(q.Kinds) > 0 && !q.Kinds[auditKind(env)] {
				return nil
			}
			env.Data = append(json.RawMessage(nil), env.Data...) // raw is the transaction's
			hits = append(hits, env)
			if n++; q.Limit > 0 && n > q.Limit {
				return stop
			}
			return nil
		})
		if err != nil && !errors.Is(err, stop) {
			return nil, false, err
		}
	}
	if !found && (q.After == 0 || !isSession(ctx, j, session)) {
		// A page past the end of a Session's trail is empty; a Session the
		// journal never held has no trail.
		return nil, false, ErrNoHistory
	}
	slices.SortFunc(hits, func(a, b journal.Envelope) int { return cmp.Compare(a.Seq, b.Seq) })
	more := q.Limit > 0 && len(hits) > q.Limit
	if more {
		hits = hits[:q.Limit]
	}
	out := make([]AuditEntry, len(hits))
	requests := map[string]events.ApprovalRequested{}
	for i, env := range hits {
		p, err := events.Decode(env.Type, env.Data)
		e := AuditEntry{Seq: env.Seq, At: env.At, Type: env.Type, Kind: auditKind(env), Actor: env.Actor, Data: env.Data}
		if err != nil {
			e.Action = "recorded " + env.Type
		} else {
			e.TurnID = turnOf(p)
			if r, ok := p.(events.ApprovalRequested); ok {
				requests[env.AggregateID] = r
			}
			e.Action = auditAction(p, func() (events.ApprovalRequested, bool) {
				if r, ok := requests[env.AggregateID]; ok {
					return r, true
				}
				r, ok := approvalRequest(ctx, j, env.AggregateID)
				requests[env.AggregateID] = r
				return r, ok
			})
		}
		out[i] = e
	}
	return out, more, nil
}

// firstEvent reads an aggregate's first event.
func firstEvent(ctx context.Context, j AuditJournal, id string) (journal.Envelope, bool) {
	var env journal.Envelope
	ok := false
	_ = j.ScanAggregate(ctx, id, 0, 1, func(_ uint64, raw []byte) error {
		var err error
		env, err = journal.DecodeEnvelope(raw)
		ok = err == nil
		return nil
	})
	return env, ok
}

// isSession tells whether the journal holds a Session of that ID.
func isSession(ctx context.Context, j AuditJournal, id string) bool {
	first, ok := firstEvent(ctx, j, id)
	return ok && first.Aggregate == events.Session
}

// approvalRequest reads the request that opened an approval.
func approvalRequest(ctx context.Context, j AuditJournal, id string) (events.ApprovalRequested, bool) {
	var r events.ApprovalRequested
	env, ok := firstEvent(ctx, j, id)
	return r, ok && env.Type == r.EventType() && json.Unmarshal(env.Data, &r) == nil
}

// turnOf is the turn an event belongs to, if any.
func turnOf(p events.Payload) string {
	switch e := p.(type) {
	case events.TurnEvent:
		return e.Turn()
	case events.ApprovalRequested:
		return e.TurnID
	case events.AttachmentsConsumed:
		return e.TurnID
	case events.TurnRestored:
		return e.TurnID
	}
	return ""
}

// auditAction says what an event did, in one line, after its actor.
func auditAction(p events.Payload, request func() (events.ApprovalRequested, bool)) string {
	q := func(s string) string { return "`" + s + "`" }
	switch e := p.(type) {
	case events.SessionCreated:
		return fmt.Sprintf("created the Session %q in %s", e.Name, e.WorkingDir)
	case events.SessionRenamed:
		return fmt.Sprintf("renamed the Session to %q", e.Name)
	case events.WorktreeAdded, events.SessionMerged, events.WorktreeRemoved:
		return worktreeAction(e) // projections/worktree.go
	case events.SessionClosed:
		return "closed the Session"
	case events.SessionReopened:
		return "reopened the Session"
	case events.SessionDeleted:
		return "deleted the Session"
	case events.SessionRewound:
		return fmt.Sprintf("rewound the conversation, hiding %d turn(s)", len(e.Hidden))
	case events.EnvironmentPlanned:
		setup := "no setup command"
		if e.SetupCommand != "" {
			setup = "setup " + q(e.SetupCommand)
			if e.SetupApproved {
				setup += " (approved)"
			}
		}
		return fmt.Sprintf("planned environment generation %d: image %s, %s", e.Generation, orDefault(e.Image), setup)
	case events.EnvironmentChanging:
		return fmt.Sprintf("began to %s environment generation %d", e.Owner, e.Generation)
	case events.EnvironmentReady:
		return fmt.Sprintf("made environment generation %d ready", e.Generation)
	case events.EnvironmentFailed:
		return fmt.Sprintf("recorded that environment generation %d failed: %s", e.Generation, e.Evidence.Error)
	case events.EnvironmentStopped:
		return fmt.Sprintf("stopped environment generation %d", e.Generation)
	case events.EnvironmentSettled:
		return fmt.Sprintf("settled environment generation %d", e.Generation)
	case events.TaskStarted:
		return fmt.Sprintf("started task %s: %s", e.TaskID, q(e.Command))
	case events.TaskExited:
		return fmt.Sprintf("recorded that task %s exited with %d", e.TaskID, e.ExitCode)
	case events.TaskDetached:
		return fmt.Sprintf("detached task %s (%s)", e.TaskID, e.Reason)
	case events.TaskKilled:
		return fmt.Sprintf("killed task %s", e.TaskID)
	case events.TurnAccepted:
		return fmt.Sprintf("asked %s: %q", e.AgentID, clip(e.Input.Inline, 80))
	case events.TurnStarted:
		if e.AgentName != "" {
			return fmt.Sprintf("started the turn on %s with %s %s", e.Model, q(e.AgentName), e.AgentVersion)
		}
		return fmt.Sprintf("started the turn on %s", e.Model)
	case events.TurnPlanned:
		done := 0
		for _, en := range e.Entries {
			if en.Status == events.PlanCompleted {
				done++
			}
		}
		return fmt.Sprintf("planned %d step(s), %d done", len(e.Entries), done)
	case events.TurnOutput:
		if len(e.ToolCalls) > 0 {
			return fmt.Sprintf("answered step %d with %d tool call(s)", e.Step, len(e.ToolCalls))
		}
		return fmt.Sprintf("answered step %d: %q", e.Step, clip(e.Text.Inline, 80))
	case events.TurnUsage:
		return fmt.Sprintf("used %d input and %d output tokens on %s", e.InputTokens, e.OutputTokens, e.Model)
	case events.ToolCallStarted:
		return "called " + q(e.Name)
	case events.ToolCallFinished:
		if e.IsError {
			return fmt.Sprintf("got an error from %s after %d ms", q(e.Name), e.DurationMS)
		}
		return fmt.Sprintf("got the result of %s after %d ms", q(e.Name), e.DurationMS)
	case events.TurnChanges:
		return fmt.Sprintf("changed %d file(s)", len(e.Paths))
	case events.HookRan:
		return fmt.Sprintf("ran %s hook %s: %s", e.Event, q(e.Hook), strings.TrimSpace(e.Decision+" "+clip(e.Reason, 80)))
	case events.AttemptSetStarted:
		return fmt.Sprintf("started %d Way(s) at %q", len(e.Attempts), clip(e.Input.Inline, 80))
	case events.LaneStarted:
		return fmt.Sprintf("started lane %d", e.Index)
	case events.LaneEnded:
		return fmt.Sprintf("ended lane %d %s", e.Index, e.State)
	case events.LaneVerified:
		verdict := "failed"
		if e.Passed {
			verdict = "passed"
		}
		return fmt.Sprintf("checked lane %d: %s (exit %d)", e.Index, verdict, e.ExitCode)
	case events.KeepPhase:
		return fmt.Sprintf("kept lane %d: %s", e.Index, e.Phase)
	case events.AttemptSetDiscarded:
		return "discarded the Ways"
	case events.AttemptSetSettled:
		return "settled the Ways, releasing the Workspace"
	case events.TurnRestored:
		forced := ""
		if e.Forced {
			forced = ", overriding later changes"
		}
		return fmt.Sprintf("restored %s from the %s side of turn %s%s", paths(e.Paths, false), e.Side, e.TurnID, forced)
	case events.LatticePlanned:
		return fmt.Sprintf("planned %d subtask(s) for %q", len(e.Subtasks), clip(e.Goal, 80))
	case events.LatticeTask:
		return fmt.Sprintf("moved subtask %s of Worker %s to %s", e.Subtask, e.Agent, e.State)
	case events.TurnDone:
		return "finished the turn"
	case events.TurnCancelled:
		return "stopped the turn"
	case events.TurnFailed:
		if e.Refused {
			return "refused the prompt: " + clip(e.Error, 120)
		}
		return "failed the turn: " + clip(e.Error, 120)
	case events.ApprovalRequested:
		return fmt.Sprintf("asked to call %s for %s", q(toolName(e)), e.AgentID)
	case events.ApprovalResolved:
		what := "a tool call"
		if r, ok := request(); ok {
			what = fmt.Sprintf("%s for %s", q(toolName(r)), r.AgentID)
		}
		verb := map[string]string{events.DecisionAllow: "approved", events.DecisionDeny: "denied",
			events.DecisionCancelled: "cancelled the approval of", events.DecisionExpired: "let expire the approval of"}[e.Decision]
		scope := map[string]string{events.PersistAgentTool: ", always for this tool", events.PersistAgentServer: ", always for this server",
			events.PersistAnyAgentServer: ", always for this server and every Agent"}[e.Persist]
		return fmt.Sprintf("%s %s%s", cmp.Or(verb, e.Decision), what, scope)
	case events.AttachmentAdded:
		return fmt.Sprintf("attached %q (%d bytes, %s)", e.Name, e.Size, e.Scope)
	case events.AttachmentScopeChanged:
		return fmt.Sprintf("changed attachment %s to %s", e.ReferenceID, e.Scope)
	case events.AttachmentDeleted:
		return "removed attachment " + e.ReferenceID
	case events.AttachmentsConsumed:
		return fmt.Sprintf("gave %d attachment(s) to the turn", len(e.ReferenceIDs))
	case events.FileWritten:
		return fmt.Sprintf("saved %s (%d bytes)", q(e.Path), e.Size)
	case events.FileCreated:
		return "created " + q(e.Path)
	case events.FolderCreated:
		return "created the folder " + q(e.Path)
	case events.FileRenamed:
		return fmt.Sprintf("renamed %s to %s", q(e.From), q(e.To))
	case events.FileDeleted:
		return "deleted " + q(e.Path)
	case events.GitStaged:
		return "staged " + paths(e.Paths, e.All)
	case events.GitUnstaged:
		return "unstaged " + paths(e.Paths, e.All)
	case events.GitHunkStaged:
		return "staged a hunk of " + q(e.Path)
	case events.GitHunkUnstaged:
		return "unstaged a hunk of " + q(e.Path)
	case events.GitHunkDiscarded:
		return "discarded a hunk of " + q(e.Path)
	case events.GitDiscarded:
		return "discarded the changes to " + paths(e.Paths, false)
	case events.GitCheckedOut:
		return "checked out " + q(cmp.Or(e.Branch, e.Ref))
	case events.GitCommitted:
		return fmt.Sprintf("committed %s on %s: %q", clip(e.Commit, 12), cmp.Or(e.Branch, "a detached HEAD"), e.Subject)
	case events.CheckSet:
		if e.CheckCommand == nil {
			return "cleared the Check"
		}
		return "set the Check to " + q(*e.CheckCommand)
	case events.CheckRan:
		return "ran the Check " + q(e.Command)
	}
	return "recorded " + p.EventType()
}

func toolName(r events.ApprovalRequested) string { return "mcp__" + r.Server + "__" + r.Tool }

func orDefault(image string) string { return cmp.Or(image, "(default)") }

func paths(p []string, all bool) string {
	switch {
	case all:
		return "every change"
	case len(p) == 1:
		return "`" + p[0] + "`"
	}
	return fmt.Sprintf("%d paths", len(p))
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(strings.ReplaceAll(s, "\n", " "))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}

// SessionAt is a Session as it was right after journal seq Seq: its record
// (with its environment), turns, attachments and tasks, rebuilt by folding
// its own events (and its Workspace's and related aggregates') up to Seq
// with the same code that serves the live state.
type SessionAt struct {
	Seq         uint64       `json:"seq"`
	Events      int          `json:"events"` // the Session's own events up to Seq
	Session     Session      `json:"session"`
	Turns       []Turn       `json:"turns"`
	Attachments []Attachment `json:"attachments"`
	Tasks       []Task       `json:"tasks"`
	// AttemptSet is the Session's newest Attempt set as of Seq, if any.
	AttemptSet *AttemptSet `json:"attempt_set,omitempty"`
}

// SeqRangeError: Seq is outside the Session's history, which spans From to
// Until (the journal's head, or the seq that deleted it).
type SeqRangeError struct {
	Seq, From, Until uint64
	Deleted          bool
}

func (e *SeqRangeError) Error() string {
	switch {
	case e.Seq < e.From:
		return fmt.Sprintf("seq %d is before the Session existed: its history spans seq %d to %d", e.Seq, e.From, e.Until)
	case e.Deleted:
		return fmt.Sprintf("seq %d is after the Session was deleted (at seq %d): its history spans seq %d to %d", e.Seq, e.Until, e.From, e.Until)
	}
	return fmt.Sprintf("seq %d is beyond the journal's head: the Session's history spans seq %d to %d", e.Seq, e.From, e.Until)
}

// SessionAt rebuilds the Session as of seq. Nothing is written.
func (s *AuditModel) SessionAt(ctx context.Context, j AuditJournal, id string, seq uint64) (SessionAt, error) {
	head := j.Last()
	if im, ok := s.pasts.at(id, seq); ok {
		if out, ok, err := s.sessionAt(ctx, j, id, seq, head, &im); ok {
			return out, err
		}
		s.pasts.drop(id, im.seq) // the journal does not match it
	}
	out, _, err := s.sessionAt(ctx, j, id, seq, head, nil)
	return out, err
}

// blobReader is the reader of referenced content.
func (s *AuditModel) blobReader() events.BlobReader {
	s.sh.mu.RLock()
	defer s.sh.mu.RUnlock()
	return s.sh.blobs
}
