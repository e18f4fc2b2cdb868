package acprunner

import (
	"context"
	"encoding/json"
	"fmt"
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

	mu    sync.Mutex
	text  strings.Builder
	cards map[acp.ToolCallId]*card
}

// card is one tool call of the agent, open until it completes or fails.
type card struct {
	call    agent.Call
	started time.Time
	kind    string
	title   string
	out     strings.Builder
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
		cd := tr.open(c.ToolCallId, string(c.Kind), c.Title, c.RawInput, c.Locations)
		if cd != nil {
			tr.content(cd, c.Content)
			tr.settle(c.ToolCallId, cd, c.Status)
		}
	case u.ToolCallUpdate != nil:
		c := u.ToolCallUpdate
		cd := tr.cards[c.ToolCallId]
		if cd == nil {
			kind, title := "", ""
			if c.Kind != nil {
				kind = string(*c.Kind)
			}
			if c.Title != nil {
				title = *c.Title
			}
			if cd = tr.open(c.ToolCallId, kind, title, c.RawInput, c.Locations); cd == nil {
				return
			}
		}
		tr.content(cd, c.Content)
		if c.Status != nil {
			tr.settle(c.ToolCallId, cd, *c.Status)
		}
	case u.Plan != nil:
		var b strings.Builder
		for _, e := range u.Plan.Entries {
			fmt.Fprintf(&b, "- [%s] %s\n", e.Status, e.Content)
		}
		tr.obs.Delta(agent.DeltaReasoning, "Plan:\n"+b.String())
	}
}

// open starts the card of a call the agent announced, or nil when it
// cannot be tracked (a bad ID, too many open).
func (tr *turnRun) open(id acp.ToolCallId, kind, title string, input any, locs []acp.ToolCallLocation) *card {
	if id == "" || len(id) > MaxCallID || len(tr.cards) >= MaxCards {
		tr.r.core.Log.Warn("an outside agent's tool call dropped", "session", tr.t.SessionID, "turn", tr.t.TurnID, "id_bytes", len(id), "open", len(tr.cards))
		return nil
	}
	if cd, ok := tr.cards[id]; ok {
		return cd
	}
	paths := make([]string, 0, len(locs))
	for _, l := range locs {
		paths = append(paths, l.Path)
	}
	args, err := json.Marshal(map[string]any{"title": title, "kind": kind, "locations": paths, "input": input})
	if err != nil {
		args = []byte(`{}`)
	}
	name := kind
	if name == "" {
		name = "tool"
	}
	cd := &card{call: agent.Call{CallID: string(id), Occurrence: 1, Name: name, Arguments: args}, started: time.Now(), kind: kind, title: title}
	tr.cards[id] = cd
	if err := tr.obs.ToolStarted(cd.call); err != nil {
		tr.r.core.Log.Warn("record an outside agent's tool call", "session", tr.t.SessionID, "err", err)
	}
	return cd
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

// settle ends a card once its call completed or failed.
func (tr *turnRun) settle(id acp.ToolCallId, cd *card, st acp.ToolCallStatus) {
	if st != acp.ToolCallStatusCompleted && st != acp.ToolCallStatusFailed {
		return
	}
	delete(tr.cards, id)
	out := cd.out.String()
	if len(out) > MaxCardText {
		out = out[:MaxCardText]
	}
	if err := tr.obs.ToolFinished(cd.call, tools.Result{Output: out, IsError: st == acp.ToolCallStatusFailed}, time.Since(cd.started)); err != nil {
		tr.r.core.Log.Warn("record an outside agent's tool result", "session", tr.t.SessionID, "err", err)
	}
}

// finishOpen ends the cards the agent left open when its prompt ended.
func (tr *turnRun) finishOpen(err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for id, cd := range tr.cards {
		if cd.out.Len() == 0 {
			cd.out.WriteString("the turn ended before the call finished")
		}
		tr.settle(id, cd, acp.ToolCallStatusFailed)
	}
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
	var call agent.Call
	if cd != nil {
		call = cd.call
	}
	tr.mu.Unlock()
	if cd == nil {
		return reject(req), nil
	}
	if tr.t.Hooks != nil {
		if blocked, msg := tr.t.Hooks.PreTool(ctx, call, call.Name, call.Arguments); blocked {
			tr.r.core.Log.Info("a hook refused an outside agent's call", "session", tr.t.SessionID, "call", call.CallID, "reason", msg)
			return reject(req), nil
		}
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-tr.t.Stop:
			cancel()
		case <-pctx.Done():
		}
	}()
	decision, err := tr.r.core.Approver.Park(pctx, core.ApprovalRequest{Run: tr.t.SessionID, Session: tr.t.SessionID, TurnID: tr.t.TurnID,
		AgentID: tr.t.AgentID, Server: "acp:" + tr.t.AgentID, Tool: call.Name, Arguments: call.Arguments})
	switch {
	case err != nil:
		return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
	case decision == events.DecisionAllow:
		return pick(req, acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways), nil
	case decision == events.DecisionDeny:
		return reject(req), nil
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
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
