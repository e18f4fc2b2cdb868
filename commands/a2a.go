package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
	*core
	receivers []A2AReceiver
}

// Receivers lists the configured receivers, in configuration order.
func (s *A2A) Receivers() []A2AReceiver { return s.receivers }

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

func (s *A2A) receiver(id string) (A2AReceiver, error) {
	for _, r := range s.receivers {
		if r.ID == id {
			return r, nil
		}
	}
	return A2AReceiver{}, fmt.Errorf("%w: no A2A receiver %q", ErrNotFound, id)
}

// Dispatch journals an inbound task, runs it on the receiver's Agent and
// journals its end, answering the task as it ended. An unknown receiver is
// ErrNotFound and nothing is journaled.
func (s *A2A) Dispatch(ctx context.Context, t A2ATask) (projections.A2ATask, error) {
	r, err := s.receiver(t.ReceiverID)
	if err != nil {
		return projections.A2ATask{}, err
	}
	if err := checkChatContent("the message text", t.Text); err != nil {
		return projections.A2ATask{}, err
	}
	if err := checkFreeJSON("the message", t.Message); err != nil {
		return projections.A2ATask{}, err
	}
	if s.opts.Runtime == nil {
		return projections.A2ATask{}, fmt.Errorf("%w: no Agent runtime is configured", ErrUnavailable)
	}
	id := ulid.Make().String()
	if t.ContextID == "" {
		t.ContextID = id
	}
	run, err := s.turns.reserve(a2aRunKey, id)
	if err != nil {
		return projections.A2ATask{}, err
	}
	defer s.turns.release(a2aRunKey, id, run)
	err = s.appendExpecting(ctx, id, 0, events.A2ATaskReceived{ReceiverID: r.ID, AgentID: r.AgentID, ContextID: t.ContextID,
		Message: events.NewJSON(t.Message), Text: events.NewText(t.Text)})
	if err != nil {
		return projections.A2ATask{}, err
	}
	// The task runs under the daemon's turn context: a client that goes
	// away does not cut it short, a shutdown ends it.
	res := s.opts.Runtime.RunTurn(s.turns.ctx, agent.TurnRequest{AgentID: r.AgentID, Input: t.Text, Stop: run.stop,
		MaxSteps: s.opts.Turns.MaxSteps, StallTimeout: s.opts.Turns.StallTimeout}, quietTurn{})
	end := events.A2ATaskEnded{State: A2ACompleted, Output: events.NewText(res.Output),
		Tokens: res.Usage}
	if res.Outcome != agent.OutcomeDone {
		end.State, end.Error = A2AFailed, "the task was stopped"
		if res.Err != nil {
			end.Error = res.Err.Error()
		}
	}
	if err := s.append(context.WithoutCancel(ctx), []journal.Event{events.New(id, end)}); err != nil {
		return projections.A2ATask{}, err
	}
	task, _ := s.store.A2ATask(id)
	return task, nil
}

// a2aRunKey keys the A2A tasks among the turns (for a shutdown's Stop).
const a2aRunKey = "a2a"

// Task reads an inbound task back.
func (s *A2A) Task(id string) (projections.A2ATask, error) {
	t, ok := s.store.A2ATask(id)
	if !ok {
		return t, fmt.Errorf("%w: A2A task %q", ErrNotFound, id)
	}
	return t, nil
}

// ReconcileA2A ends, at start, every A2A task the journal shows received
// but not ended: the daemon stopped under it.
func (s *A2A) ReconcileA2A(ctx context.Context) error {
	for _, t := range s.store.LiveA2ATasks() {
		err := s.append(ctx, []journal.Event{events.New(t.ID, events.A2ATaskEnded{State: A2AFailed,
			Error: "interrupted: the daemon stopped during this task"})}, journal.Expectation{AggregateID: t.ID, Version: t.Version})
		if err != nil && !errors.Is(err, ErrConflict) {
			return fmt.Errorf("end interrupted A2A task %s: %w", t.ID, err)
		}
	}
	return nil
}

// newA2A returns the A2A capability for the configured receivers.
func newA2A(c *core, receivers []A2AReceiver) *A2A { return &A2A{core: c, receivers: receivers} }
