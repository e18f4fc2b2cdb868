package commands

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/hooks"
	"lathe/runtime/sandbox"
)

// The operator's hooks (runtime/hooks) run at fixed points of a turn that
// has a Session sandbox: a Session turn, a lattice Worker's run, a Ways
// lane. SessionStart (before a Session's first turn) and UserPromptSubmit
// run before the model is asked; PreToolUse and PostToolUse around each
// tool call, MCP tools included; Stop once the turn's work ended, before
// its terminal event. Every run is journaled: hook-ran on the Session, or
// lane-hook-ran on a Ways lane's set.

// turnHooks runs the hooks of the turns of s.
type turnHooks struct{ s *core }

// tools runs the tool hooks around each call of box; sandboxBox is the
// turn's sandbox tools (where the hooks run). Without hooks, or outside a
// Session sandbox, box is returned as is.
func (th turnHooks) tools(box, sandboxBox agent.Toolbox, call ApprovalRequest) agent.Toolbox {
	s := th.s
	set, ok := sandboxBox.(*tools.Set)
	if s.opts.Hooks.Empty() || !ok {
		return box
	}
	h := &hookedTools{Toolbox: box, s: s, call: call, at: hooks.Place{Sandbox: set.Sandbox(), Dir: set.Root()}}
	h.file, h.at.HostDir = sessionFile(call.Session), set.Root()
	if call.Run != call.Session { // a Ways lane: its own copy of the checkout, its set's journal
		h.file, h.at.HostDir = th.lane(call)
	}
	return h
}

// lane finds a Ways lane's run in its Session's current set: where its
// runs are journaled (attempt-lane-hook-ran) and the host directory of its
// copy, which its sandbox sees at the Session's path. Not found (the set
// moved on): nowhere, and host hooks refuse to run.
func (th turnHooks) lane(call ApprovalRequest) (func(events.HookRan) journal.Event, string) {
	set, ok := th.s.store.CurrentAttemptSet(call.Session)
	if !ok {
		return nil, ""
	}
	for _, a := range set.Attempts {
		if a.Run == call.Run && a.TurnID == call.TurnID {
			lane := events.Lane{Index: a.Index, Run: a.Run}
			return func(e events.HookRan) journal.Event {
				return events.New(set.ID, events.LaneHookRan{Lane: lane, HookRan: e})
			}, a.Copy
		}
	}
	return nil, ""
}

type hookedTools struct {
	agent.Toolbox
	s    *core
	call ApprovalRequest
	at   hooks.Place
	// file files a run's record in the journal; nil: not journaled.
	file func(events.HookRan) journal.Event
}

func (h *hookedTools) Call(ctx context.Context, name string, args json.RawMessage) tools.Result {
	c, _ := agent.CallOf(ctx)
	in := hooks.Input{SessionID: h.call.Session, TurnID: h.call.TurnID, AgentID: h.call.AgentID, ToolName: name, ToolInput: validArgs(args)}
	record := turnHooks{h.s}.recorder(ctx, h.file, h.call.Session, h.call.TurnID, h.call.AgentID, c)
	set := h.s.opts.Hooks
	if v := hooks.RunAll(ctx, set.For(h.call.AgentID, hooks.PreToolUse, name), in, h.at, record); v.Blocked {
		return tools.Result{Output: v.Message(), IsError: true}
	}
	res := h.Toolbox.Call(ctx, name, args)
	post := set.For(h.call.AgentID, hooks.PostToolUse, name)
	if len(post) == 0 {
		return res
	}
	in.ToolResponse = &hooks.ToolResponse{Output: res.Output, IsError: res.IsError}
	v := hooks.RunAll(ctx, post, in, h.at, record)
	for _, n := range v.Notes {
		res.Output += "\n[" + n + "]"
	}
	if v.Context != "" {
		res.Output += "\n[hook context]\n" + v.Context
	}
	return res
}

func sessionFile(session string) func(events.HookRan) journal.Event {
	return func(e events.HookRan) journal.Event { return events.New(session, e) }
}

// recorder journals each hook run of a turn through file (nil: none); a
// journal that refuses it is logged, never fails the call.
func (th turnHooks) recorder(ctx context.Context, file func(events.HookRan) journal.Event, session, turn, agentID string, c agent.Call) func(hooks.Outcome) {
	if file == nil {
		return nil
	}
	s := th.s
	ctx = context.WithoutCancel(ctx)
	return func(o hooks.Outcome) {
		ev := events.HookRan{TurnID: turn, Agent: agentID, Event: o.Event, Hook: o.Hook, CallID: c.CallID, Occurrence: c.Occurrence,
			Tool: c.Name, Decision: o.Decision, Reason: events.ClipHookOutput(o.Reason), ExitCode: o.ExitCode, TimedOut: o.TimedOut,
			Stdout: events.ClipHookOutput(o.Stdout), Stderr: events.ClipHookOutput(o.Stderr), DurationMS: o.Duration.Milliseconds()}
		if err := s.append(ctx, []journal.Event{file(ev)}); err != nil {
			s.log.Warn("journal a hook run", "session", session, "turn", turn, "hook", o.Hook, "err", err)
		}
	}
}

// prompt runs a turn's SessionStart hooks (on the Session's first
// turn) and its UserPromptSubmit hooks, and returns the input with what
// they added, or the error that ends the turn when one blocked or failed.
func (th turnHooks) prompt(ctx context.Context, t projections.Turn, sb sandbox.Sandbox, dir string, prior []projections.Turn, input string) (string, error) {
	set := th.s.opts.Hooks
	if set.Empty() {
		return input, nil
	}
	at := hooks.Place{Sandbox: sb, Dir: dir, HostDir: dir}
	in := hooks.Input{SessionID: t.SessionID, TurnID: t.TurnID, AgentID: t.AgentID}
	record := th.recorder(ctx, sessionFile(t.SessionID), t.SessionID, t.TurnID, t.AgentID, agent.Call{})
	var added []string
	first := true
	for _, p := range prior {
		first = first && p.TurnID == t.TurnID
	}
	if first {
		if v := hooks.RunAll(ctx, set.For(t.AgentID, hooks.SessionStart, ""), in, at, record); v.Context != "" {
			added = append(added, v.Context)
		}
	}
	in.Prompt = input
	v := hooks.RunAll(ctx, set.For(t.AgentID, hooks.UserPromptSubmit, ""), in, at, record)
	if v.Blocked {
		return "", errors.New(v.Message())
	}
	if v.Context != "" {
		added = append(added, v.Context)
	}
	if len(added) == 0 {
		return input, nil
	}
	return input + "\n\n[Context from hooks]\n" + strings.Join(added, "\n"), nil
}

// stop runs a turn's Stop hooks once its work ended.
func (th turnHooks) stop(ctx context.Context, t projections.Turn, sb sandbox.Sandbox, dir string) {
	list := th.s.opts.Hooks.For(t.AgentID, hooks.Stop, "")
	if len(list) == 0 {
		return
	}
	// A Stop of the user still runs the Stop hooks; a shutdown does not.
	if ctx.Err() != nil {
		return
	}
	in := hooks.Input{SessionID: t.SessionID, TurnID: t.TurnID, AgentID: t.AgentID}
	hooks.RunAll(ctx, list, in, hooks.Place{Sandbox: sb, Dir: dir, HostDir: dir}, th.recorder(ctx, sessionFile(t.SessionID), t.SessionID, t.TurnID, t.AgentID, agent.Call{}))
}
