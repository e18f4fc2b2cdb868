package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"

	"lathe/commands/core"
	"lathe/commands/environments"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/hooks"
	"lathe/runtime/sandbox"
)

// The operator's hooks (runtime/hooks) run wherever an Agent runs a turn:
// a Session turn, a lattice Worker's run, a Ways lane, a Chat turn, an
// Automation run's agent node, a direct execute of an Agent. SessionStart (before a conversation's first
// turn) and UserPromptSubmit run before the model is asked; PreToolUse and
// PostToolUse around each tool call, MCP tools included; Stop once the
// turn's work ended, before its terminal event. The decision rules are the
// same everywhere. Every run is journaled: hook-ran on the Session,
// attempt-lane-hook-ran on a Ways lane's set, chat-hook-ran on a Chat,
// automation-node-hook-ran on an Automation run, agent-hook-ran on the
// executed Agent.
//
// A Chat, an agent node and an execute have no sandbox: there, only hooks marked host
// run (in a scratch directory of their own, removed at the turn's end), and
// the others fail with a message, which blocks on a blocking event, as a
// broken guard does.

// RunHooks is where one run's hooks run, what they are told, and where
// their runs are journaled.
type RunHooks struct {
	s  *core.Core
	in hooks.Input // SessionID, TurnID, AgentID, Scope
	At hooks.Place
	// file files a run's record in the journal; nil: not journaled.
	file func(events.HookRan) journal.Event
	// first: the conversation's first turn, so SessionStart runs.
	first bool
}

// TurnHooks runs the hooks of the turns of s that have a Session sandbox.
type TurnHooks struct{ Core *core.Core }

// tools runs the tool hooks around each call of box; sandboxBox is the
// turn's sandbox tools (where the hooks run). Without hooks, or outside a
// Session sandbox, box is returned as is (a Chat or an agent node wraps its
// own with runHooks.tools).
func (th TurnHooks) tools(box, sandboxBox agent.Toolbox, call core.ApprovalRequest, stop <-chan struct{}) agent.Toolbox {
	set, ok := sandboxBox.(*tools.Set)
	if th.Core.Opts.Hooks.Empty() || !ok {
		return box
	}
	return th.Run(call, set.Sandbox(), set.Root(), false).Tools(box, call, stop)
}

// Run is the hooks of call's run (a Session turn, or a Ways lane when its
// Run is not its Session) in sandbox sb at dir.
func (th TurnHooks) Run(call core.ApprovalRequest, sb sandbox.Sandbox, dir string, first bool) RunHooks {
	r := RunHooks{s: th.Core, in: hooks.Input{SessionID: call.Session, TurnID: call.TurnID, AgentID: call.AgentID, Scope: hooks.ScopeSession},
		At: hooks.Place{Sandbox: sb, Dir: dir, HostDir: dir}, file: sessionFile(call.Session), first: first}
	if th.Core.Opts.RemoteSandbox { // the checkout is a clone on the engine's host (remote.go)
		r.At.HostDir = ""
		if !th.Core.Opts.Hooks.Empty() {
			r.At.HostDir = environments.RemoteHookDir(th.Core.Opts.Scratch(), call.Session)
		}
	}
	if call.Run != call.Session { // a Ways lane: its own copy of the checkout, its set's journal
		r.in.Scope = hooks.ScopeLane
		r.file, r.At.HostDir = th.lane(call)
		return r
	}
	// A Session turn's hooks read the turn so far (transcript_path).
	store := th.Core.Store
	r.At.Transcript = func() []byte {
		t, _ := store.Turn(call.Session, call.TurnID)
		return hookTranscript(t)
	}
	r.At.TranscriptDir = th.Core.Opts.ScratchDir
	return r
}

// lane finds a Ways lane's run in its Session's current set: where its
// runs are journaled (attempt-lane-hook-ran) and the host directory of its
// copy, which its sandbox sees at the Session's path. Not found (the set
// moved on): nowhere, and host hooks refuse to run.
func (th TurnHooks) lane(call core.ApprovalRequest) (func(events.HookRan) journal.Event, string) {
	set, ok := th.Core.Store.CurrentAttemptSet(call.Session)
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

func sessionFile(session string) func(events.HookRan) journal.Event {
	return func(e events.HookRan) journal.Event { return events.New(session, e) }
}

// session is the hooks of Session turn t in sandbox sb at dir; prior are
// the Session's turns, t's included.
func (th TurnHooks) session(t projections.Turn, sb sandbox.Sandbox, dir string, prior []projections.Turn) RunHooks {
	first := true
	for _, p := range prior {
		first = first && p.TurnID == t.TurnID
	}
	return th.Run(core.ApprovalRequest{Run: t.SessionID, Session: t.SessionID, TurnID: t.TurnID, AgentID: t.AgentID}, sb, dir, first)
}

// Prompt runs a Session turn's SessionStart and UserPromptSubmit hooks
// (runHooks.prompt).
func (th TurnHooks) Prompt(ctx context.Context, t projections.Turn, sb sandbox.Sandbox, dir string, prior []projections.Turn, input string) (string, error) {
	return th.session(t, sb, dir, prior).Prompt(ctx, input)
}

// Stop runs a Session turn's Stop hooks once its work ended.
func (th TurnHooks) Stop(ctx context.Context, t projections.Turn, sb sandbox.Sandbox, dir string) {
	th.session(t, sb, dir, nil).Stop(ctx)
}

// outsideHooks is the hooks of a run with no sandbox (scope chat or automation):
// host hooks run in a scratch directory that done removes.
func outsideHooks(s *core.Core, scope, id, turn, agentID string, first bool, file func(events.HookRun) journal.Event) (r RunHooks, done func()) {
	r = RunHooks{s: s, in: hooks.Input{SessionID: id, TurnID: turn, AgentID: agentID, Scope: scope}, first: first,
		file: func(e events.HookRan) journal.Event { return file(events.HookRun(e)) }}
	done = func() {}
	if s.Opts.Hooks.Empty() {
		return r, done
	}
	// A directory that cannot be made leaves HostDir empty: host hooks then
	// fail with a message.
	if dir, err := os.MkdirTemp(s.Opts.Scratch(), "lathe-hooks-"); err == nil {
		r.At.HostDir, done = dir, func() { os.RemoveAll(dir) }
	}
	return r, done
}

// ChatHooks is the hooks of turn turnID of Chat chatID; first: the Chat
// had no message before it.
func ChatHooks(s *core.Core, chatID, turnID, agentID string, first bool) (RunHooks, func()) {
	return outsideHooks(s, hooks.ScopeChat, chatID, turnID, agentID, first, func(e events.HookRun) journal.Event {
		return events.New(chatID, events.ChatHookRan{HookRun: e})
	})
}

// NodeHooks is the hooks of agent node node of Automation run runID: each
// node's turn is a conversation of its own.
func NodeHooks(s *core.Core, runID, node, agentID string) (RunHooks, func()) {
	return outsideHooks(s, hooks.ScopeAutomation, runID, node, agentID, true, func(e events.HookRun) journal.Event {
		return events.New(runID, events.NodeHookRan{Node: node, HookRun: e})
	})
}

// ExecuteHooks is the hooks of a direct execute of Agent agentID, whose
// effect intent is intent; first: a stateless execute, a conversation of
// its own.
func ExecuteHooks(s *core.Core, intent, agentID string, first bool) (RunHooks, func()) {
	return outsideHooks(s, hooks.ScopeAgent, intent, intent, agentID, first, func(e events.HookRun) journal.Event {
		return events.New(agentID, events.AgentHookRan{HookRun: e})
	})
}

// hookRefusal is a prompt a UserPromptSubmit hook blocked (or that failed
// on it), with the hook's message alone: forbidden where the refusal is the
// request's answer (an execute). Where the prompt is recorded (a Session
// turn, a Chat message) its end marks it refused, and no conversation built
// afterwards carries it: it never reaches a model.
type hookRefusal struct{ error }

func (hookRefusal) Is(target error) bool { return target == core.ErrForbidden }

// RefusedPrompt reports whether err ended a turn before any inference
// because a hook refused its prompt.
func RefusedPrompt(err error) bool {
	var r hookRefusal
	return errors.As(err, &r)
}

// Tools runs the tool hooks around each call of box, which caller makes
// and stop stops.
func (r RunHooks) Tools(box agent.Toolbox, caller core.ApprovalRequest, stop <-chan struct{}) agent.Toolbox {
	if r.s.Opts.Hooks.Empty() {
		return box
	}
	return &hookedTools{Toolbox: box, r: r, caller: caller, stop: stop}
}

// SandboxlessTools is the toolbox of a run with no sandbox (a Chat, an
// agent node, an execute): its Agent's MCP tools between its hooks.
func (r RunHooks) SandboxlessTools(caller core.ApprovalRequest, stop <-chan struct{}) agent.Toolbox {
	return r.Tools(NewTurnTools(r.s, NoTools{}, caller, stop), caller, stop)
}

type hookedTools struct {
	agent.Toolbox
	r      RunHooks
	caller core.ApprovalRequest
	stop   <-chan struct{}
}

// Call runs one call between its hooks: a PreToolUse block refuses it, an
// ask parks it for the operator under the hook's server, a stop refuses it
// and ends the turn; PostToolUse adds to its result (or ends the turn).
func (h *hookedTools) Call(ctx context.Context, name string, args json.RawMessage) tools.Result {
	c, _ := agent.CallOf(ctx)
	v := h.r.PreTool(ctx, c, name, args)
	switch {
	case v.Stopped:
		return tools.Result{Output: v.Message(), IsError: true, EndTurn: v.Message()}
	case v.Blocked:
		return tools.Result{Output: v.Message(), IsError: true}
	case v.Asked:
		req := h.caller
		req.Server, req.Tool, req.Arguments, req.Reason = v.AskedBy.Server, name, args, v.AskedBy.Reason
		if refused, ok := Undecided(core.ParkOrStop(ctx, h.r.s.Approver, req, h.stop)); !ok {
			return refused
		}
	}
	return h.r.PostTool(ctx, c, name, args, h.Toolbox.Call(ctx, name, args))
}

// PreTool runs the PreToolUse hooks of call c of tool name.
func (r RunHooks) PreTool(ctx context.Context, c agent.Call, name string, args json.RawMessage) hooks.Verdict {
	in := r.in
	in.ToolName, in.ToolUseID, in.ToolInput = name, c.CallID, ValidArgs(args)
	return hooks.RunAll(ctx, r.s.Opts.Hooks.For(in.AgentID, hooks.PreToolUse, name), in, r.At, r.recorder(ctx, c))
}

// ToolHooks is a run's tool hooks as a process manager runs them about a
// call it did not start (an outside agent's): PreToolUse as a verdict,
// PostToolUse as RunHooks runs them.
type ToolHooks struct{ RunHooks }

func (p ToolHooks) PreTool(ctx context.Context, c agent.Call, name string, args json.RawMessage) core.PreToolVerdict {
	if p.s.Opts.Hooks.Empty() {
		return core.PreToolVerdict{}
	}
	v := p.RunHooks.PreTool(ctx, c, name, args)
	switch {
	case v.Blocked:
		return core.PreToolVerdict{Refused: v.Message(), EndTurn: v.Stopped}
	case v.Asked:
		return core.PreToolVerdict{AskServer: v.AskedBy.Server, AskReason: v.AskedBy.Reason}
	}
	return core.PreToolVerdict{}
}

// PostTool runs the PostToolUse hooks of call c once it returned res, and
// returns res with what they added.
func (r RunHooks) PostTool(ctx context.Context, c agent.Call, name string, args json.RawMessage, res tools.Result) tools.Result {
	post := r.s.Opts.Hooks.For(r.in.AgentID, hooks.PostToolUse, name)
	if len(post) == 0 {
		return res
	}
	in := r.in
	in.ToolName, in.ToolUseID, in.ToolInput = name, c.CallID, ValidArgs(args)
	in.ToolResponse = &hooks.ToolResponse{Output: res.Output, IsError: res.IsError}
	v := hooks.RunAll(ctx, post, in, r.At, r.recorder(ctx, c))
	for _, n := range v.Notes {
		res.Output += "\n[" + n + "]"
	}
	if v.Stopped {
		res.EndTurn = v.Message()
	}
	if v.Context != "" {
		res.Output += "\n[hook context]\n" + v.Context
	}
	return res
}

// recorder journals each hook run through r.file (nil: none) for tool call
// c (zero: none); a journal that refuses it is logged, never fails the
// call.
func (r RunHooks) recorder(ctx context.Context, c agent.Call) func(hooks.Outcome) {
	if r.file == nil {
		return nil
	}
	s := r.s
	ctx = context.WithoutCancel(ctx)
	return func(o hooks.Outcome) {
		ev := events.HookRan{TurnID: r.in.TurnID, Agent: r.in.AgentID, Event: o.Event, Hook: o.Hook, CallID: c.CallID, Occurrence: c.Occurrence,
			Tool: c.Name, Decision: o.Decision, Reason: events.ClipHookOutput(o.Reason), ExitCode: o.ExitCode, TimedOut: o.TimedOut,
			Stdout: events.ClipHookOutput(o.Stdout), Stderr: events.ClipHookOutput(o.Stderr), DurationMS: o.Duration.Milliseconds()}
		if err := s.Append(ctx, []journal.Event{r.file(ev)}); err != nil {
			s.Log.Warn("journal a hook run", "scope", r.in.Scope, "id", r.in.SessionID, "turn", r.in.TurnID, "hook", o.Hook, "err", err)
		}
	}
}

// Prompt runs the SessionStart hooks (on a conversation's first turn) and
// the UserPromptSubmit hooks, and returns the input with what they added,
// or the hookRefusal that ends the turn when one blocked or failed.
func (r RunHooks) Prompt(ctx context.Context, input string) (string, error) {
	set := r.s.Opts.Hooks
	if set.Empty() {
		return input, nil
	}
	in, record := r.in, r.recorder(ctx, agent.Call{})
	var added []string
	if r.first {
		v := hooks.RunAll(ctx, set.For(in.AgentID, hooks.SessionStart, ""), in, r.At, record)
		if v.Stopped { // continue: false before any inference
			return "", hookRefusal{errors.New(v.Message())}
		}
		if v.Context != "" {
			added = append(added, v.Context)
		}
	}
	in.Prompt = input
	v := hooks.RunAll(ctx, set.For(in.AgentID, hooks.UserPromptSubmit, ""), in, r.At, record)
	if v.Blocked {
		return "", hookRefusal{errors.New(v.Message())}
	}
	if v.Context != "" {
		added = append(added, v.Context)
	}
	if len(added) == 0 {
		return input, nil
	}
	return input + "\n\n[Context from hooks]\n" + strings.Join(added, "\n"), nil
}

// Stop runs the Stop hooks once the turn's work ended.
func (r RunHooks) Stop(ctx context.Context) {
	list := r.s.Opts.Hooks.For(r.in.AgentID, hooks.Stop, "")
	if len(list) == 0 {
		return
	}
	// A Stop of the user still runs the Stop hooks; a shutdown does not.
	if ctx.Err() != nil {
		return
	}
	hooks.RunAll(ctx, list, r.in, r.At, r.recorder(ctx, agent.Call{}))
}
