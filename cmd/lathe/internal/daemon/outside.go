package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"lathe/commands/core"
	"lathe/runtime/acp"
	"lathe/runtime/acp/install"
	"lathe/runtime/agent"
	"lathe/runtime/errs"
	"lathe/runtime/sandbox"
)

// agentHome is an outside agent's HOME in its sandbox: the image's root
// home, outside the checkout, kept for the sandbox's life (its own
// sessions live there, for session/load).
const agentHome = "/root"

// outsideAgents starts the configured outside Agents (kind acp) from their
// presets and their installs under the data dir.
type outsideAgents struct {
	runtime *agent.Registry
	inst    *install.Installer

	mu        sync.Mutex
	installed map[string]install.Install // by Agent
}

func newOutsideAgents(rt *agent.Registry, dir string) *outsideAgents {
	return &outsideAgents{runtime: rt, inst: &install.Installer{Dir: dir}, installed: map[string]install.Install{}}
}

func (o *outsideAgents) Outside(id string) bool {
	v, err := o.runtime.Agent(id)
	return err == nil && v.Kind == "acp" && v.ACP != nil
}

// ensure installs Agent id's package once; an Agent whose command is on
// the image's PATH has none.
func (o *outsideAgents) ensure(ctx context.Context, id string) (install.Install, error) {
	v, err := o.runtime.Agent(id)
	if err != nil || v.ACP == nil {
		return install.Install{}, errs.New(errs.NotFound, fmt.Sprintf("agent %q is not an outside agent", id))
	}
	if v.ACP.Package == "" {
		return install.Install{Command: v.ACP.Command}, nil
	}
	in, err := o.inst.Ensure(ctx, install.Spec{Package: v.ACP.Package, Command: v.ACP.Command})
	if err != nil {
		return install.Install{}, err
	}
	o.mu.Lock()
	o.installed[id] = in
	o.mu.Unlock()
	return in, nil
}

// Tools installs Agents ids (those outside) and returns every install
// made so far, for the sandbox to mount read-only: a turn may name another
// outside Agent than the Session's.
func (o *outsideAgents) Tools(ctx context.Context, ids ...string) ([]sandbox.Tool, error) {
	for _, id := range ids {
		if !o.Outside(id) {
			continue
		}
		if _, err := o.ensure(ctx, id); err != nil {
			return nil, fmt.Errorf("install the outside agent %s: %w", id, err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	byName := map[string]string{}
	for _, in := range o.installed {
		if in.Dir != "" {
			byName[in.Name] = in.Dir
		}
	}
	var ts []sandbox.Tool
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		ts = append(ts, sandbox.Tool{Name: n, Dir: byName[n]})
	}
	return ts, nil
}

func (o *outsideAgents) Launch(ctx context.Context, id string, gw core.GatewayAccess) (core.Launch, error) {
	v, err := o.runtime.Agent(id)
	if err != nil || v.ACP == nil {
		return core.Launch{}, errs.New(errs.NotFound, fmt.Sprintf("agent %q is not an outside agent", id))
	}
	in, err := o.ensure(ctx, id)
	if err != nil {
		return core.Launch{}, err
	}
	p := acp.Presets[v.ACP.Preset] // the zero Preset for an explicit package
	p.Args = v.ACP.Args
	l := p.Launch(v.ACP.Protocol, acp.Gateway{URL: gw.URL, Token: gw.Token, Model: gw.Model, Home: agentHome})
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if in.PATH != "" {
		path = in.PATH + ":" + path
	}
	env := []string{"PATH=" + path, "HOME=" + agentHome}
	for _, k := range slices.Sorted(maps.Keys(v.ACP.Env)) {
		env = append(env, k+"="+v.ACP.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(l.Env)) {
		env = append(env, k+"="+l.Env[k])
	}
	return core.Launch{Args: append([]string{in.Command}, l.Args...), Env: env, Home: agentHome, Files: l.Files}, nil
}
