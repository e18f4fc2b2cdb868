package acprunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"lathe/commands/core"
	"lathe/runtime/agent"
	"lathe/runtime/sandbox"
	"lathe/runtime/usage"
)

// AloneTurn is one turn where no Session is.
type AloneTurn = core.AloneTurn

// aloneRemoveTimeout bounds the removal of an alone turn's sandbox.
const aloneRemoveTimeout = time.Minute

// RunAlone runs t in a sandbox of its own, on an empty folder of the
// daemon's scratch (the operator's default image, network and limits),
// both removed when the turn ends. A daemon killed under it leaves both to
// its next start: the scratch is emptied, the sandbox an orphan removed.
func (r *ACPRunner) RunAlone(ctx context.Context, t AloneTurn, obs agent.TurnObserver) agent.TurnResult {
	fail := func(err error) agent.TurnResult {
		return agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}
	}
	o := r.core.Opts
	if o.Connect == nil {
		return fail(fmt.Errorf("%w: no sandbox provider is configured", sandbox.ErrUnavailable))
	}
	dir, err := os.MkdirTemp(o.Scratch(), "lathe-agent-run-")
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return fail(fmt.Errorf("a folder for the agent: %w", err))
	}
	defer os.RemoveAll(dir)
	id := "agent-run-" + strings.ToLower(ulid.Make().String())
	spec := sandbox.Spec{SessionID: id, Generation: 1, Image: o.DefaultImage, WorkingDir: dir,
		Network: o.Sandbox.Network, Limits: o.Sandbox.Limits}
	if o.RemoteSandbox && o.RemoteTemplate != "" {
		spec.Image = o.RemoteTemplate
	}
	sb, err := r.prepareAlone(ctx, spec, t.AgentID)
	if err != nil {
		return fail(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), aloneRemoveTimeout)
		defer cancel()
		if err := sb.Teardown(rctx); err != nil {
			r.core.Log.Warn("remove an agent run's sandbox", "sandbox", id, "err", err)
		}
	}()
	defer r.End(id)
	return r.Run(ctx, Turn{Run: t.Run, Process: id, TurnID: t.TurnID, AgentID: t.AgentID, Sandbox: sb, Dir: dir,
		Input: t.Input, Stop: t.Stop, Hooks: t.Hooks}, obs)
}

// prepareAlone prepares spec with Agent id's install mounted.
func (r *ACPRunner) prepareAlone(ctx context.Context, spec sandbox.Spec, id string) (sandbox.Sandbox, error) {
	pctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	drv, err := r.core.Opts.Connect(pctx)
	if err != nil {
		return nil, err
	}
	if spec.Tools, err = r.core.Opts.Outside.Tools(pctx, id); err != nil {
		return nil, err
	}
	sb, err := drv.Prepare(pctx, spec)
	if err != nil {
		return nil, fmt.Errorf("prepare the agent's sandbox: %w", err)
	}
	return sb, nil
}
