package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"lathe/commands/agentrun"
	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/usage"
)

// Agents changes the live Agent actors: a PATCH of an Agent's in-memory
// config and a restart of its actor. Both are journaled (agent-patched,
// agent-restarted) before the runtime applies them, so the journal audits
// them; the config itself stays in memory, and Started journals the
// daemon-started event that ends every earlier patch.
type Agents struct {
	*core.Core
	runtime *agent.Registry
}

// maxPromptBytes bounds a patched prompt: it is journaled whole.
const maxPromptBytes = 64 << 10

// Started journals that a daemon started on this data dir (id is its
// stable ID) when Agent patches of the run before are still in force in the
// projection, which the event ends. A start with nothing to end appends
// nothing.
func (s *Agents) Started(ctx context.Context, id, version string) error {
	if !s.Store.AgentPatched() {
		return nil
	}
	return s.Append(ctx, []journal.Event{events.New(id, events.DaemonStarted{Version: version})})
}

// Patch validates p, journals it, and applies it to the Agent in memory
// (never to the YAML), restarting the actor unless restart is false.
func (s *Agents) Patch(ctx context.Context, id string, p AgentPatch, restart bool) (catalog.AgentView, error) {
	if _, err := s.runtime.Status(id); err != nil {
		return catalog.AgentView{}, err
	}
	if err := agent.CheckPatch(p.runtime()); err != nil {
		return catalog.AgentView{}, err
	}
	if p.Prompt != nil && len(*p.Prompt) > maxPromptBytes {
		return catalog.AgentView{}, fmt.Errorf("%w: prompt is %d bytes, over the %d-byte limit", core.ErrTooLarge, len(*p.Prompt), maxPromptBytes)
	}
	ev := events.AgentPatched{Name: p.Name, Model: p.Model, Prompt: p.Prompt, Dependencies: p.Dependencies, Restarted: restart}
	if p.Budget != nil {
		ev.Budget = &events.AgentBudget{MaxOutputTokens: p.Budget.MaxOutputTokens, MaxUSD: p.Budget.MaxUSD}
	}
	if err := s.Append(ctx, []journal.Event{events.New(id, ev)}); err != nil {
		return catalog.AgentView{}, err
	}
	return s.runtime.Patch(context.WithoutCancel(ctx), id, p.runtime(), restart)
}

// Restart journals and restarts an Agent's actor.
func (s *Agents) Restart(ctx context.Context, id string) (agent.Status, error) {
	if _, err := s.runtime.Status(id); err != nil {
		return agent.Status{}, err
	}
	if err := s.Append(ctx, []journal.Event{events.New(id, events.AgentRestarted{})}); err != nil {
		return agent.Status{}, err
	}
	return s.runtime.Restart(context.WithoutCancel(ctx), id)
}

// Execute runs POST /api/agents/{id}/execute, recorded then acted: an
// effect intent, the execute, then agent-executed (the envelope's actor,
// the input, the output or error, the usage; large content offloaded as
// every event's is) with the intent's settlement, in one append. A
// stateless execute (or one with an override, which implies stateless) is
// one inference with no tools. A stateful one is a turn on the Agent's
// conversation with the Agent's MCP tools advertised, under the same
// approvals, step limit, stall timeout and budget as a Session turn's.
func (s *Agents) Execute(ctx context.Context, id string, req ExecuteRequest) (agent.Result, error) {
	res := agent.Result{View: usage.Tokens{TokenUsageKnown: true}.View()}
	if _, err := s.runtime.Status(id); err != nil {
		return res, err
	}
	if strings.TrimSpace(req.Input) == "" {
		return res, fmt.Errorf("%w: input is required", agent.ErrInvalid)
	}
	stateless := req.Stateless || req.SystemOverride != nil || req.ModelOverride != nil
	detail := "with the Agent's tools"
	if stateless {
		detail = "stateless"
	}
	fx, err := s.Intend(ctx, events.EffectAgentExecute, id, detail, "")
	if err != nil {
		return res, err
	}
	obs := &executeObserver{clock: agentrun.InferenceClock{Agent: id}}
	rh, done := agentrun.ExecuteHooks(s.Core, fx.Intent.Intent, id, stateless) // commands/agentrun/hooks.go
	defer done()
	input, err := rh.Prompt(ctx, req.Input) // a hookRefusal: 403
	switch {
	case err != nil: // refused: the model is not asked
	case stateless:
		run := req.runtime()
		run.Input = input
		obs.clock.Ask()
		res, err = s.runtime.Execute(ctx, id, run)
		obs.clock.Step(agent.StepOutput{Step: 1, Model: res.Model, Usage: res.Tokens, Partial: err != nil})
		rh.Stop(ctx)
	default:
		res, err = s.executeTurn(ctx, fx.Intent.Intent, id, input, rh, obs)
		rh.Stop(ctx)
	}
	ev := events.AgentExecuted{Intent: fx.Intent.Intent, Input: events.NewText(req.Input), Output: events.NewText(res.Output), Model: res.Model,
		Stateless: res.Stateless, Calls: obs.calls, Usage: res.Tokens, Inferences: obs.clock.Done, Tools: obs.tools}
	if err != nil {
		ev.Error = err.Error()
	}
	if rerr := fx.Settle(ctx, nil, events.New(id, ev)); rerr != nil {
		return res, errors.Join(err, fmt.Errorf("record the execute: %w", rerr))
	}
	return res, err
}

// executeTurn runs a stateful execute as a turn with the Agent's MCP tools
// (never the sandbox tools: there is no Session) and answers its result,
// its error; obs keeps its inferences and tool calls.
func (s *Agents) executeTurn(ctx context.Context, run, id, input string, rh agentrun.RunHooks, obs *executeObserver) (agent.Result, error) {
	var tr agent.TurnResult
	if s.Outside != nil && s.Outside.Outside(id) {
		// An outside agent works in a sandbox of its own for the execute.
		tr = s.Outside.RunAlone(ctx, core.AloneTurn{Run: run, AgentID: id, Input: input, Stop: ctx.Done(), Hooks: agentrun.ToolHooks{RunHooks: rh}}, obs)
	} else {
		toolbox := rh.SandboxlessTools(core.ApprovalRequest{Run: run, AgentID: id}, ctx.Done())
		tr = s.runtime.ExecuteTurn(ctx, agent.TurnRequest{AgentID: id, Input: input, Tools: toolbox, Stop: ctx.Done(),
			MaxSteps: s.Opts.Turns.MaxSteps, StallTimeout: s.Opts.Turns.StallTimeout}, obs)
	}
	res := agent.Result{Output: tr.Output, Model: obs.model, View: tr.Usage.View()}
	switch {
	case tr.Outcome == agent.OutcomeDone:
		return res, nil
	case tr.Outcome == agent.OutcomeCancelled && ctx.Err() != nil:
		return res, ctx.Err()
	case tr.Err != nil:
		res.Output = ""
		return res, tr.Err
	case tr.StopReason != "":
		res.Output = ""
		return res, fmt.Errorf("%w: the execute ended: %s", core.ErrConflict, tr.StopReason)
	}
	res.Output = ""
	return res, fmt.Errorf("the execute ended %s", tr.Outcome)
}

// executeObserver notes an execute turn's model, its inferences (for
// telemetry) and its tool calls; an execute streams nothing live.
type executeObserver struct {
	model string
	clock agentrun.InferenceClock
	tools []events.ExecutedTool
	calls int // started, finished or not
}

func (o *executeObserver) Started(model string) error     { o.model = model; o.clock.Ask(); return nil }
func (o *executeObserver) Delta(string, string)           { o.clock.Delta() }
func (o *executeObserver) Step(st agent.StepOutput) error { o.clock.Step(st); return nil }
func (o *executeObserver) ToolStarted(agent.Call) error   { o.calls++; return nil }
func (o *executeObserver) ToolFinished(c agent.Call, r tools.Result, took time.Duration) error {
	defer o.clock.Ask()
	o.tools = append(o.tools, events.ExecutedTool{CallID: c.CallID, Name: c.Name, At: time.Now().Add(-took), DurationMS: took.Milliseconds(), IsError: r.IsError})
	return nil
}

// NewAgents returns the Agent commands over the live actors runtime.
func NewAgents(c *core.Core, runtime *agent.Registry) *Agents {
	return &Agents{Core: c, runtime: runtime}
}
