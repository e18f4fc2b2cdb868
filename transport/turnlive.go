package transport

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"lathe/commands/turns"

	"github.com/julienschmidt/httprouter"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/usage"
)

// Session turn frames (spec: Server frames: Session turn). The journaled
// ones derive from turn events in Broadcast; token and reasoning frames
// derive from the live deltas the live-run projection folded, in SendLive.

type sessionFrame struct {
	Kind    string `json:"kind"`
	Session string `json:"session"`
	TurnID  string `json:"turn_id"`
}

// terminalFrame is session-done, session-cancelled or session-error.
type terminalFrame struct {
	Kind    string `json:"kind"`
	Session string `json:"session"`
	TurnID  string `json:"turn_id"`
	Error   string `json:"error,omitempty"`
	// Output is the final answer of session-done.
	Output string `json:"output,omitempty"`
	usage.View
	Interrupted bool   `json:"interrupted,omitempty"`
	Budget      string `json:"budget,omitempty"`
	// StopReason says why a hook ended a session-cancelled turn.
	StopReason string `json:"stop_reason,omitempty"`
	// Rejected marks a session-error for a turn that was never accepted.
	Rejected bool `json:"rejected,omitempty"`
}

// startFrame is session-start: beside the spec's fields, what runs the
// turn: its Agent, its model and, for an outside agent, the name and
// version it reported of itself.
type startFrame struct {
	Kind         string `json:"kind"` // "session-start"
	Session      string `json:"session"`
	TurnID       string `json:"turn_id"`
	Agent        string `json:"agent"`
	Model        string `json:"model,omitempty"`
	AgentName    string `json:"agent_name,omitempty"`
	AgentVersion string `json:"agent_version,omitempty"`
}

// turnPlanFrame is turn-plan: an outside agent's whole plan for the turn,
// replacing the one before. coordinator-plan does not fit it: that is a
// lattice coordinator's one decomposition, whose subtasks the auction gave
// to Workers and whose states the Worker lifecycle events move, while this
// plan comes again whole with every change, each entry with its own status.
type turnPlanFrame struct {
	Kind     string             `json:"kind"` // "turn-plan"
	Workflow string             `json:"workflow"`
	Agent    string             `json:"agent"`
	TurnID   string             `json:"turn_id"`
	Entries  []events.PlanEntry `json:"entries"`
	// AttemptSetID is set on a Ways lane's frames.
	AttemptSetID string `json:"attempt_set_id,omitempty"`
}

type deltaFrame struct {
	Kind     string `json:"kind"` // "token" or "reasoning"
	Workflow string `json:"workflow"`
	Agent    string `json:"agent"`
	TurnID   string `json:"turn_id"`
	Delta    string `json:"delta"`
	// AttemptSetID is set on a Ways lane's frames.
	AttemptSetID string `json:"attempt_set_id,omitempty"`
}

type toolCallFrame struct {
	Kind       string          `json:"kind"` // "tool-call"
	Workflow   string          `json:"workflow"`
	Agent      string          `json:"agent"`
	TurnID     string          `json:"turn_id"`
	CallID     string          `json:"call_id"`
	Occurrence int             `json:"occurrence"`
	Name       string          `json:"name"`
	Phase      string          `json:"phase"` // "start" or "result"
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Result     *string         `json:"result,omitempty"`
	IsError    bool            `json:"is_error"`
	DurationMS int64           `json:"duration_ms,omitempty"`
	// AttemptSetID is set on a Ways lane's frames.
	AttemptSetID string `json:"attempt_set_id,omitempty"`
}

type stopRejectedFrame struct {
	Kind    string `json:"kind"` // "session-stop-rejected"
	Session string `json:"session"`
	TurnID  string `json:"turn_id"`
	Error   string `json:"error"`
}

// turnFrames are the frames of a Session's turn events, by event type: a
// replay's (turnEventFrame), and the live stream's (liveFrames), whose
// session-accepted carries more (acceptedFrame). turn-output, turn-usage
// and the others have none.
var turnFrames = frameTable(
	turnFrame(func(session string, e events.TurnAccepted) any {
		return sessionFrame{Kind: "session-accepted", Session: session, TurnID: e.TurnID}
	}),
	turnFrame(func(session string, e events.TurnStarted) any {
		return startFrame{Kind: "session-start", Session: session, TurnID: e.TurnID, Agent: e.Agent, Model: e.Model,
			AgentName: e.AgentName, AgentVersion: e.AgentVersion}
	}),
	turnFrame(func(session string, e events.TurnPlanned) any {
		return turnPlanFrame{Kind: "turn-plan", Workflow: session, Agent: e.Agent, TurnID: e.TurnID, Entries: e.Entries}
	}),
	turnFrame(func(session string, e events.ToolCallStarted) any {
		return toolCallFrame{Kind: "tool-call", Workflow: session, Agent: e.Agent, TurnID: e.TurnID, CallID: e.CallID,
			Occurrence: e.Occurrence, Name: e.Name, Phase: "start", Arguments: e.Arguments.Value()}
	}),
	turnFrame(func(session string, e events.ToolCallFinished) any {
		// Content the event only references (events.Text) is framed as its
		// preview; the turn's record (GET turns) has it whole.
		result := e.Result.String()
		return toolCallFrame{Kind: "tool-call", Workflow: session, Agent: e.Agent, TurnID: e.TurnID, CallID: e.CallID,
			Occurrence: e.Occurrence, Name: e.Name, Phase: "result", Result: &result, IsError: e.IsError, DurationMS: e.DurationMS}
	}),
	turnFrame(func(session string, e events.LatticePlanned) any { return newPlanFrame(session, e) }), // transport/lattice.go
	turnFrame(func(session string, e events.TurnDone) any {
		return newTerminal("session-done", session, e.TurnID, e.Totals, func(f *terminalFrame) { f.Output = e.Output.String() })
	}),
	turnFrame(func(session string, e events.TurnCancelled) any {
		return newTerminal("session-cancelled", session, e.TurnID, e.Totals, func(f *terminalFrame) { f.StopReason = e.StopReason })
	}),
	turnFrame(func(session string, e events.TurnFailed) any {
		return newTerminal("session-error", session, e.TurnID, e.Totals, func(f *terminalFrame) {
			f.Error, f.Interrupted, f.Budget = e.Error, e.Interrupted, e.Budget
		})
	}),
)

// turnEventFrame is the frame of a turn event of session, as a replay
// (transport/turncode.go) shows it, or nil for an event without one.
func turnEventFrame(session string, p events.Payload) any {
	if build := turnFrames[p.EventType()]; build != nil {
		return build(session, p)
	}
	return nil
}

func newTerminal(kind, session, turn string, t usage.Tokens, set func(*terminalFrame)) terminalFrame {
	f := terminalFrame{Kind: kind, Session: session, TurnID: turn, View: t.View()}
	if set != nil {
		set(&f)
	}
	return f
}

// outcomeFrame is the terminal frame of an ended turn's record: the answer
// to a repeated `session` command for a finished identity.
func outcomeFrame(t projections.Turn) any {
	var kind string
	switch t.Status {
	case projections.TurnDone:
		kind = "session-done"
	case projections.TurnCancelled:
		kind = "session-cancelled"
	case projections.TurnError:
		kind = "session-error"
	default:
		return nil
	}
	return newTerminal(kind, t.SessionID, t.TurnID, t.Usage.Tokens, func(f *terminalFrame) {
		f.Output, f.Error, f.Interrupted, f.Budget, f.StopReason = t.Output.String(), t.Error, t.Interrupted, t.Budget, t.StopReason
	})
}

// SendLive sends the frame of one live delta that the live-run projection
// folded as number live (projections.Store.OnLive), so that a snapshot
// taken meanwhile and the frame never both show it. A Chat turn's delta
// (live 0) goes only to the connection that issued the turn (sendChat).
func (s *Server) SendLive(d events.LiveDelta, live uint64) {
	if d.ChatDelta() { // for the one connection that issued the turn
		s.sendChat(d)
		return
	}
	if s.hub.Clients() == 0 {
		return
	}
	if d.Kind == events.DeltaCheckout {
		s.checkoutChanged(d.Session)
		return
	}
	f := deltaFrame{Kind: d.Kind, Workflow: d.Session, Agent: d.Agent, TurnID: d.TurnID, Delta: d.Delta, AttemptSetID: d.AttemptSetID}
	if d.Run != "" {
		f.Workflow = d.Run
	}
	data, err := json.Marshal(f)
	if err != nil {
		s.log.Error("encode delta frame", "err", err)
		return
	}
	s.hub.Broadcast(Frame{Live: live, Data: data})
}

// sessionCommand is the `session` /ws command.
type sessionCommand struct {
	ID                string            `json:"id"`
	Input             string            `json:"input"`
	DisplayInput      *string           `json:"display_input"`
	ContextReferences []json.RawMessage `json:"context_references"`
	TurnID            string            `json:"turn_id"`
	IdempotencyKey    string            `json:"idempotency_key"`
	ReferenceIDs      []string          `json:"reference_ids"`
	ModelOverride     *string           `json:"model_override"`
	TargetAgent       *string           `json:"target_agent"`
}

// handleSession accepts a turn. A new turn's frames reach every client
// from the commit feed; a repeat for a known identity reattaches: this
// client gets session-accepted again and, for an ended turn, the same
// terminal frame.
//
// Each accept is a journal commit, so it runs off the connection's reader:
// a client that sends many turns at once (to many Sessions) has them share
// group commits instead of waiting for each in turn. Commands for one
// Session from one connection still run in arrival order, and a
// session-stop waits for the accepts sent before it.
func (s *turnLiveRoutes) handleSession(ctx context.Context, c *Client, raw json.RawMessage) {
	var cmd sessionCommand
	if !decodeCommand(c, "session", raw, &cmd) {
		return
	}
	if cmd.ID == "" {
		c.Send(ErrorFrame(`malformed session command: missing "id" (the Session ID)`))
		return
	}
	s.accepts.run(c, cmd.ID, func() { s.submitTurn(ctx, c, cmd) })
}

func (s *turnLiveRoutes) submitTurn(ctx context.Context, c *Client, cmd sessionCommand) {
	t, reattached, err := s.cmds.SubmitTurn(ctx, turns.TurnRequest{
		SessionID: cmd.ID, TurnID: cmd.TurnID, IdempotencyKey: cmd.IdempotencyKey, Input: cmd.Input,
		DisplayInput: cmd.DisplayInput, ContextReferences: cmd.ContextReferences, ReferenceIDs: cmd.ReferenceIDs,
		ModelOverride: cmd.ModelOverride, TargetAgent: cmd.TargetAgent, Source: "ws",
	})
	if err != nil {
		// A frame has no status code: its message keeps the class ("not
		// found: …", "conflict: …") that an HTTP body leaves to the status.
		f := newTerminal("session-error", cmd.ID, cmd.TurnID, usage.Tokens{TokenUsageKnown: true}, func(f *terminalFrame) {
			f.Error, f.Rejected = err.Error(), true
		})
		s.sendTo(c, f)
		return
	}
	if !reattached {
		return
	}
	s.sendTo(c, sessionFrame{Kind: "session-accepted", Session: t.SessionID, TurnID: t.TurnID})
	if f := outcomeFrame(t); f != nil {
		s.sendTo(c, f)
	}
}

// stopCommand is the `session-stop` /ws command.
type stopCommand struct {
	ID     string `json:"id"`
	TurnID string `json:"turn_id"`
}

func (s *turnLiveRoutes) handleSessionStop(_ context.Context, c *Client, raw json.RawMessage) {
	var cmd stopCommand
	if !decodeCommand(c, "session-stop", raw, &cmd) {
		return
	}
	if cmd.ID == "" || cmd.TurnID == "" {
		c.Send(ErrorFrame(`malformed session-stop command: "id" and "turn_id" are required`))
		return
	}
	s.accepts.wait(c, cmd.ID)
	if err := s.cmds.StopTurn(cmd.ID, cmd.TurnID); err != nil {
		s.sendTo(c, stopRejectedFrame{Kind: "session-stop-rejected", Session: cmd.ID, TurnID: cmd.TurnID, Error: err.Error()})
	}
}

// sendTo sends one frame to one /ws client.
func (s logged) sendTo(c *Client, frame any) {
	data, err := json.Marshal(frame)
	if err != nil {
		s.log.Error("encode frame", "err", err)
		return
	}
	c.Send(data)
}

// executeResponse is the body of POST /api/sessions/{id}/execute, on
// success and on failure alike: paid work is always visible.
type executeResponse struct {
	TurnID      string `json:"turn_id"`
	Status      string `json:"status"`
	Output      string `json:"output"`
	Error       string `json:"error,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	Budget      string `json:"budget,omitempty"`
	usage.View
	CostUSD   float64 `json:"cost_usd"`
	CostKnown bool    `json:"cost_known"`
}

// sessionExecuteBody is the body of sessionExecute.
type sessionExecuteBody struct {
	Input *string `json:"input" required:"true"`
	// The Agent execute's override fields are accepted and ignored.
	SystemOverride json.RawMessage `json:"system_override"`
	ModelOverride  json.RawMessage `json:"model_override"`
	Stateless      json.RawMessage `json:"stateless"`
}

// sessionExecute runs one turn synchronously: {input}; the other execute
// fields are ignored. The turn is the same durable turn a `session`
// command starts; a client that goes away does not cancel it.
func (s *turnLiveRoutes) sessionExecute(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var body sessionExecuteBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, err)
		return
	}
	if body.Input == nil {
		writeError(w, http.StatusBadRequest, "input is required")
		return
	}
	id := ps.ByName("id")
	t, _, err := s.cmds.SubmitTurn(r.Context(), turns.TurnRequest{SessionID: id, Input: *body.Input, Source: "execute"})
	if err != nil {
		fail(w, err)
		return
	}
	t, err = s.cmds.WaitTurn(r.Context(), id, t.TurnID)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			fail(w, err)
		}
		return
	}
	resp := executeResponse{TurnID: t.TurnID, Status: t.Status, Output: t.Output.String(), Error: t.Error, Interrupted: t.Interrupted,
		Budget: t.Budget, View: t.Usage.View, CostUSD: t.Usage.CostUSD, CostKnown: t.Usage.CostKnown}
	switch t.Status {
	case projections.TurnDone:
		writeJSON(w, http.StatusOK, resp)
	case projections.TurnCancelled:
		resp.Error = cmp.Or(t.StopReason, "the turn was stopped")
		writeJSON(w, http.StatusConflict, resp)
	default:
		writeJSON(w, http.StatusBadGateway, resp)
	}
}

// acceptPool runs accepts concurrently, at most acceptWorkers at once (past
// that the reader runs them itself: backpressure), and chains those of one
// connection and Session so they keep their order.
type acceptPool struct {
	slots chan struct{}
	mu    sync.Mutex
	tails map[acceptKey]chan struct{} // closed when the last queued accept ends
}

type acceptKey struct {
	c       *Client
	session string
}

const acceptWorkers = 256

func newAcceptPool() *acceptPool {
	return &acceptPool{slots: make(chan struct{}, acceptWorkers), tails: map[acceptKey]chan struct{}{}}
}

func (p *acceptPool) run(c *Client, session string, fn func()) {
	key := acceptKey{c, session}
	done := make(chan struct{})
	p.mu.Lock()
	prev := p.tails[key]
	p.tails[key] = done
	p.mu.Unlock()
	work := func() {
		if prev != nil {
			<-prev
		}
		fn()
		p.mu.Lock()
		if p.tails[key] == done {
			delete(p.tails, key)
		}
		p.mu.Unlock()
		close(done)
	}
	select {
	case p.slots <- struct{}{}:
		go func() {
			defer func() { <-p.slots }()
			work()
		}()
	default:
		work()
	}
}

// wait blocks until the accepts queued for a connection and Session ended.
func (p *acceptPool) wait(c *Client, session string) {
	p.mu.Lock()
	tail := p.tails[acceptKey{c, session}]
	p.mu.Unlock()
	if tail != nil {
		<-tail
	}
}

// checkoutFrame is checkout-changed: something wrote in a live Session's
// checkout (the editor, a terminal, a task, a turn or a process outside
// Lathe); clients showing its files or Source Control re-read them. It is a
// notice, not state: nothing is journaled, and a client that missed one
// re-reads on its next snapshot anyway.
type checkoutFrame struct {
	Kind    string `json:"kind"` // "checkout-changed"
	Session string `json:"session"`
}

// checkoutChanged sends checkout-changed for session to every client.
func (s *Server) checkoutChanged(session string) {
	data, err := json.Marshal(checkoutFrame{Kind: "checkout-changed", Session: session})
	if err != nil {
		return
	}
	s.hub.Broadcast(Frame{Data: data})
}
