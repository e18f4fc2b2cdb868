package acprunner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
)

// Bounds of one turn's record of an outside agent.
const (
	// MaxCards bounds the tool calls one turn tracks at once.
	MaxCards = 1024
	// MaxCallID bounds an agent's tool call ID.
	MaxCallID = 256
	// MaxCardText bounds the text a card's result keeps.
	MaxCardText = 256 << 10
)

// turnRun follows one prompt: it turns the agent's updates into the
// turn's frames and records (through the observer, as the built-in loop
// does), and its model calls, metered at the gateway, into its steps. The
// observer is called under mu: updates, steps and permission requests
// come from different goroutines.
type turnRun struct {
	r       *ACPRunner
	t       Turn
	obs     agent.TurnObserver
	relayed *agent.Relayed
	// ctx is the turn's, for the hooks its cards run.
	ctx context.Context
	// halted is closed once a hook ended the turn (continue: false), with
	// haltReason set before; the turn then stops as a Stop does.
	halted     chan struct{}
	haltOnce   sync.Once
	haltReason string

	mu    sync.Mutex
	text  strings.Builder
	cards map[acp.ToolCallId]*card
	// planned is the plan last journaled, nil before the first.
	planned []events.PlanEntry
}

// card is one tool call of the agent, open until it completes or fails.
type card struct {
	id      acp.ToolCallId
	call    agent.Call
	started time.Time
	kind    string
	title   string
	input   any
	output  any // the agent's raw output of the call, for a card without content
	paths   []string
	// shown: its start is journaled. An agent may announce a call before
	// it knows its input (Claude Code sends it in the next update): the
	// start waits for the input, a permission request or the end.
	shown bool
	// refused says why Lathe refused the call's permission, if it did:
	// the call never ran, and its card says so.
	refused string
	out     strings.Builder
}

// merge takes what an update adds to the call.
func (cd *card) merge(kind, title string, input any, locs []acp.ToolCallLocation) {
	if kind != "" {
		cd.kind = kind
	}
	if title != "" {
		cd.title = title
	}
	if input != nil {
		cd.input = input
	}
	for _, l := range locs {
		if len(cd.paths) < 64 {
			cd.paths = append(cd.paths, l.Path)
		}
	}
}

// hasInput reports whether the agent said what the call does.
func (cd *card) hasInput() bool {
	switch v := cd.input.(type) {
	case nil:
		return false
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// halt ends the turn at a hook's word (why), once.
func (tr *turnRun) halt(why string) {
	tr.haltOnce.Do(func() {
		tr.haltReason = why
		close(tr.halted)
	})
}

// stopReason is why a hook ended the turn, "" when none did.
func (tr *turnRun) stopReason() string {
	select {
	case <-tr.halted:
		return tr.haltReason
	default:
		return ""
	}
}

func (tr *turnRun) output() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.text.String()
}

// step records one model call the gateway forwarded.
func (tr *turnRun) step(s agent.StepOutput) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if err := tr.obs.Step(s); err != nil {
		tr.r.core.Log.Warn("record an outside agent's model call", "session", tr.t.SessionID, "turn", tr.t.TurnID, "err", err)
	}
}

// Update maps one session/update onto the turn.
func (tr *turnRun) Update(u acp.SessionUpdate) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch {
	case u.AgentMessageChunk != nil:
		if txt := u.AgentMessageChunk.Content.Text; txt != nil {
			tr.text.WriteString(txt.Text)
			tr.obs.Delta(agent.DeltaText, txt.Text)
		}
	case u.AgentThoughtChunk != nil:
		if txt := u.AgentThoughtChunk.Content.Text; txt != nil {
			tr.obs.Delta(agent.DeltaReasoning, txt.Text)
		}
	case u.ToolCall != nil:
		c := u.ToolCall
		if cd := tr.open(c.ToolCallId, string(c.Kind), c.Title, c.RawInput, c.Locations); cd != nil {
			tr.content(cd, c.Content)
			tr.progress(cd, c.Status)
		}
	case u.ToolCallUpdate != nil:
		c := u.ToolCallUpdate
		kind, title := "", ""
		if c.Kind != nil {
			kind = string(*c.Kind)
		}
		if c.Title != nil {
			title = *c.Title
		}
		cd := tr.open(c.ToolCallId, kind, title, c.RawInput, c.Locations)
		if cd == nil {
			return
		}
		tr.content(cd, c.Content)
		if c.RawOutput != nil {
			cd.output = c.RawOutput
		}
		var st acp.ToolCallStatus
		if c.Status != nil {
			st = *c.Status
		}
		tr.progress(cd, st)
	case u.Plan != nil:
		tr.plan(u.Plan.Entries)
	}
}

// outsideObserver is what a turn's observer adds for an outside agent
// (agentrun.TurnObserver has it): what ran the turn, as the agent reported
// itself, and the agent's plan. An observer without it (a run nobody
// streams) gets Started, and no plan.
type outsideObserver interface {
	StartedBy(model, name, version string) error
	Plan(entries []events.PlanEntry) error
}

// started journals the turn's start with what the agent said of itself in
// initialize (nil: nothing).
func (tr *turnRun) started(model string, info *acp.Implementation) error {
	o, ok := tr.obs.(outsideObserver)
	if !ok || info == nil {
		return tr.obs.Started(model)
	}
	return o.StartedBy(model, info.Name, info.Version)
}

// plan journals the agent's plan, the whole of it each time (ACP), clipped
// to its bounds; a plan the same as the last one adds nothing.
func (tr *turnRun) plan(entries []acp.PlanEntry) {
	o, ok := tr.obs.(outsideObserver)
	if !ok {
		return
	}
	p := make([]events.PlanEntry, 0, min(len(entries), events.MaxPlanEntries))
	for _, e := range entries[:min(len(entries), events.MaxPlanEntries)] {
		p = append(p, events.PlanEntry{Content: e.Content, Status: string(e.Status), Priority: string(e.Priority)})
	}
	p = events.ClipPlan(p)
	if tr.planned != nil && slices.Equal(p, tr.planned) {
		return
	}
	tr.planned = p
	if err := o.Plan(p); err != nil {
		tr.r.core.Log.Warn("record an outside agent's plan", "session", tr.t.SessionID, "turn", tr.t.TurnID, "err", err)
	}
}

// open starts the card of a call the agent announced, or nil when it
// cannot be tracked (a bad ID, too many open).
func (tr *turnRun) open(id acp.ToolCallId, kind, title string, input any, locs []acp.ToolCallLocation) *card {
	if cd, ok := tr.cards[id]; ok {
		cd.merge(kind, title, input, locs)
		return cd
	}
	if id == "" || len(id) > MaxCallID || len(tr.cards) >= MaxCards {
		tr.r.core.Log.Warn("an outside agent's tool call dropped", "session", tr.t.SessionID, "turn", tr.t.TurnID, "id_bytes", len(id), "open", len(tr.cards))
		return nil
	}
	cd := &card{id: id, started: time.Now()}
	cd.merge(kind, title, input, locs)
	tr.cards[id] = cd
	// The answer so far led to this call: the turn's output is what the
	// agent says after its last call.
	tr.text.Reset()
	return cd
}

// show journals the card's start once.
func (tr *turnRun) show(cd *card) {
	if cd.shown {
		return
	}
	cd.shown = true
	args, err := json.Marshal(map[string]any{"title": cd.title, "kind": cd.kind, "locations": cd.paths, "input": cd.input})
	if err != nil || len(args) > MaxCardText {
		args, _ = json.Marshal(map[string]any{"title": cd.title, "kind": cd.kind, "locations": cd.paths})
	}
	name := cd.kind
	if name == "" {
		name = "tool"
	}
	cd.call = agent.Call{CallID: string(cd.id), Occurrence: 1, Name: name, Arguments: args}
	if err := tr.obs.ToolStarted(cd.call); err != nil {
		tr.r.core.Log.Warn("record an outside agent's tool call", "session", tr.t.SessionID, "err", err)
	}
}

// content adds what a call showed (text, a diff, a terminal) to its card.
func (tr *turnRun) content(cd *card, cs []acp.ToolCallContent) {
	for _, c := range cs {
		if cd.out.Len() > MaxCardText {
			return
		}
		switch {
		case c.Content != nil && c.Content.Content.Text != nil:
			cd.out.WriteString(c.Content.Content.Text.Text)
			cd.out.WriteByte('\n')
		case c.Diff != nil:
			fmt.Fprintf(&cd.out, "--- %s\n+++ %s\n", c.Diff.Path, c.Diff.Path)
			if c.Diff.OldText != nil {
				for _, l := range strings.Split(*c.Diff.OldText, "\n") {
					cd.out.WriteString("-" + l + "\n")
				}
			}
			for _, l := range strings.Split(c.Diff.NewText, "\n") {
				cd.out.WriteString("+" + l + "\n")
			}
		case c.Terminal != nil:
			fmt.Fprintf(&cd.out, "[terminal %s]\n", c.Terminal.TerminalId)
		}
	}
}

// progress shows a card once it has its input or runs, and ends it once
// its call completed or failed.
func (tr *turnRun) progress(cd *card, st acp.ToolCallStatus) {
	ended := st == acp.ToolCallStatusCompleted || st == acp.ToolCallStatusFailed
	if cd.hasInput() || st == acp.ToolCallStatusInProgress || ended {
		tr.show(cd)
	}
	if !ended {
		return
	}
	delete(tr.cards, cd.id)
	// The turn's output is what the agent says after its last call, also
	// when it streamed some of the text before it after the call's start
	// (Codex may).
	tr.text.Reset()
	if cd.out.Len() == 0 && cd.output != nil {
		if b, err := json.Marshal(cd.output); err == nil {
			cd.out.Write(b)
		}
	}
	out := cd.out.String()
	if len(out) > MaxCardText {
		out = out[:MaxCardText]
	}
	res := tools.Result{Output: out, IsError: st == acp.ToolCallStatusFailed}
	switch {
	case cd.refused != "":
		res.Output += "\n[" + cd.refused + "]"
	case tr.t.Hooks != nil && tr.ctx.Err() == nil:
		// The call ran in the agent: what the hooks add goes on its card
		// (History, audit), which the agent itself never reads.
		res = tr.t.Hooks.PostTool(tr.ctx, cd.call, cd.call.Name, cd.call.Arguments, res)
		if res.EndTurn != "" {
			tr.halt(res.EndTurn)
		}
	}
	if err := tr.obs.ToolFinished(cd.call, res, time.Since(cd.started)); err != nil {
		tr.r.core.Log.Warn("record an outside agent's tool result", "session", tr.t.SessionID, "err", err)
	}
}

// finishOpen ends the cards the agent left open when its prompt ended.
func (tr *turnRun) finishOpen(err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	said := tr.text.String() // the agent's last words stand
	for _, cd := range tr.cards {
		if cd.out.Len() == 0 {
			cd.out.WriteString("the turn ended before the call finished")
		}
		tr.progress(cd, acp.ToolCallStatusFailed)
	}
	tr.text.Reset()
	tr.text.WriteString(said)
}

// Permission answers a session/request_permission through Lathe's one
// policy: the PreToolUse hooks, then a saved decision or the operator
// (approval server acp:<agent>). A call the turn never saw is refused.
func (tr *turnRun) Permission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	tr.mu.Lock()
	cd := tr.cards[req.ToolCall.ToolCallId]
	if cd == nil && req.ToolCall.Title != nil {
		// Some agents ask before they announce the call: the request
		// announces it.
		kind := ""
		if req.ToolCall.Kind != nil {
			kind = string(*req.ToolCall.Kind)
		}
		cd = tr.open(req.ToolCall.ToolCallId, kind, *req.ToolCall.Title, req.ToolCall.RawInput, req.ToolCall.Locations)
	}
	// What the answer needs is copied under mu: the agent's updates of
	// the same call arrive meanwhile on another goroutine.
	var call agent.Call
	var title string
	if cd != nil {
		cd.merge("", "", req.ToolCall.RawInput, req.ToolCall.Locations)
		tr.show(cd)
		call, title = cd.call, cd.title
	}
	tr.mu.Unlock()
	if cd == nil {
		return reject(req), nil
	}
	if strings.HasPrefix(title, "mcp__"+MCPName+"__") {
		// A call of Lathe's own MCP endpoint: the endpoint applies the one
		// policy (its server's approval, saved decisions, the hooks) when
		// the call arrives. An agent that names another call so gains
		// nothing: it runs its own commands in its sandbox as it likes.
		return pick(req, acp.PermissionOptionKindAllowOnce), nil
	}
	ask := core.ApprovalRequest{Run: tr.t.Run, Session: tr.t.SessionID, TurnID: tr.t.TurnID,
		AgentID: tr.t.AgentID, Server: "acp:" + tr.t.AgentID, Tool: call.Name, Arguments: call.Arguments}
	if tr.t.Hooks != nil {
		v := tr.t.Hooks.PreTool(ctx, call, call.Name, call.Arguments)
		switch {
		case v.Refused != "":
			tr.r.core.Log.Info("a hook refused an outside agent's call", "session", tr.t.SessionID, "call", call.CallID, "reason", v.Refused)
			tr.refuse(cd, v.Refused)
			if v.EndTurn {
				tr.halt(v.Refused)
			}
			return reject(req), nil
		case v.AskServer != "":
			// The hook leaves the call to the operator: one prompt, under
			// the hook's server.
			ask.Server, ask.Reason = v.AskServer, v.AskReason
		}
	}
	decision, err := core.ParkOrStop(ctx, tr.r.core.Approver, ask, tr.t.Stop)
	switch {
	case err != nil:
		return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
	case decision == events.DecisionAllow:
		return pick(req, acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways), nil
	case decision == events.DecisionDeny:
		tr.refuse(cd, "denied")
		return reject(req), nil
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

// refuse notes on cd why its call was refused.
func (tr *turnRun) refuse(cd *card, why string) {
	tr.mu.Lock()
	cd.refused = why
	tr.mu.Unlock()
}

// pick selects the first option of the first kind offered; none offered:
// the request is answered as cancelled.
func pick(req acp.RequestPermissionRequest, kinds ...acp.PermissionOptionKind) acp.RequestPermissionResponse {
	for _, k := range kinds {
		for _, o := range req.Options {
			if o.Kind == k {
				return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}
			}
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}
}

func reject(req acp.RequestPermissionRequest) acp.RequestPermissionResponse {
	return pick(req, acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways)
}
