package acprunner

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/acp/client"
	"lathe/runtime/acp/relay"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/errs"
	"lathe/runtime/gateway"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/sandbox"
	"lathe/runtime/usage"
)

// GatewayPort is where an outside agent finds Lathe's model gateway in its
// sandbox: http://127.0.0.1:GatewayPort (runtime/acp/relay). Agents that
// share a sandbox (a lattice turn's Workers beside the Session's own) take
// the next free ports, up to MaxPerSandbox of them.
const GatewayPort = 47401

// MaxPerSandbox bounds the agent processes that run in one sandbox at once.
const MaxPerSandbox = 32

// ErrCrowded refuses an agent process in a sandbox that runs MaxPerSandbox.
var ErrCrowded = errs.New(errs.Conflict, "too many outside agent processes run in this sandbox")

// StartTimeout bounds an agent's start: its process, initialize and
// session/new.
const StartTimeout = 2 * time.Minute

// ErrNoTurn refuses a model call an outside agent makes while none of its
// turns runs: nothing would account for it.
var ErrNoTurn = errs.New(errs.Conflict, "no turn of this agent is running")

// ACPRunner runs the turns of outside Agents: one agent process per
// Session, started in its sandbox on its first turn and kept between
// turns, ended with the Session's runtime (End) or when its sandbox
// changes. Its model calls go through the gateway, which this runner
// accounts for as the turn's steps.
type ACPRunner struct {
	core    *core.Core
	gateway http.Handler

	mu   sync.Mutex
	live map[string]*live // by process key (processKey)
	byTk map[string]*live // by gateway token
	// claimed holds every process from its start to its end, with the
	// gateway port it holds in its sandbox.
	claimed map[*live]bool
}

// New returns the runner of the outside Agents of c.
func New(c *core.Core) *ACPRunner {
	r := &ACPRunner{core: c, live: map[string]*live{}, byTk: map[string]*live{}, claimed: map[*live]bool{}}
	r.gateway = r.routes(gateway.New(upstream{r}, tokens{r}, gateway.Options{}))
	c.Outside = r
	return r
}

// Outside reports whether Agent id runs here.
func (r *ACPRunner) Outside(id string) bool {
	return r.core.Opts.Outside != nil && r.core.Opts.Outside.Outside(id)
}

// live is one Session's agent process.
type live struct {
	// key is the run the process serves (a Session, or a Ways lane's
	// run); session the Session it works for.
	key, session, agentID string
	sb                    sandbox.Sandbox
	// port is the sandbox's loopback port its gateway listens on.
	port       int
	agent      *client.Agent
	relay      *relay.Relay
	token      string
	acpSession string
	// carrier marks the agent's and the relay's processes
	// (tools.NewCarrier): their trees end with them, and a daemon killed
	// under them leaves them to the next start's sweep.
	carrier string
	// mcp serves the Agent's MCP tools to the agent (mcp.go); nil: none.
	mcp *sdkmcp.Server

	mu   sync.Mutex
	turn *turnRun
}

func (l *live) current() *turnRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.turn
}

func (l *live) close() {
	l.agent.Close()
	l.relay.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = tools.KillCarriers(ctx, l.sb, l.carrier) // what the agent left running
}

// Turn is one turn to run.
type Turn = core.OutsideTurn

// Run runs one turn of an outside Agent to its result.
func (r *ACPRunner) Run(ctx context.Context, t Turn, obs agent.TurnObserver) agent.TurnResult {
	fail := func(err error) agent.TurnResult {
		return agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}
	}
	tr := &turnRun{r: r, t: t, obs: obs, ctx: ctx, cards: map[acp.ToolCallId]*card{}, halted: make(chan struct{})}
	relayed, err := r.core.Opts.Runtime.Relay(t.AgentID, t.Model, tr.step)
	if err != nil {
		return fail(err)
	}
	tr.relayed = relayed
	l, err := r.ensure(ctx, t, relayed.Model())
	if err != nil {
		return fail(err)
	}
	if err := tr.started(relayed.Model(), l.agent.Info.AgentInfo); err != nil {
		return fail(err)
	}
	l.mu.Lock()
	l.turn = tr
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.turn = nil
		l.mu.Unlock()
	}()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-t.Stop:
		case <-tr.halted: // a hook ended the turn: it stops as a Stop does
		case <-pctx.Done():
			return
		}
		close(stopped)
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = l.agent.Cancel(cctx)
		ccancel()
		// An agent that does not end its prompt after a cancel is ended.
		select {
		case <-time.After(client.StopGrace):
			cancel()
		case <-pctx.Done():
		}
	}()
	res, err := l.agent.Prompt(pctx, t.Input, tr)
	tr.finishOpen(err)
	out := agent.TurnResult{Output: tr.output(), Usage: relayed.Usage()}
	if name, berr := relayed.Breach(); berr != nil {
		out.Outcome, out.Err, out.Budget = agent.OutcomeError, berr, name
		return out
	}
	select {
	case <-stopped:
		// An agent may keep state of the prompt it was cancelled in (Claude
		// Code answers the next prompt with the cancelled one's end): the
		// process ends, and the next turn resumes its session in a new one.
		r.drop(l)
		out.Outcome, out.StopReason = agent.OutcomeCancelled, tr.stopReason()
		return out
	default:
	}
	switch {
	case errors.Is(err, client.ErrExited):
		r.drop(l)
		out.Outcome, out.Err = agent.OutcomeError, err
	case err != nil:
		out.Outcome, out.Err = agent.OutcomeError, fmt.Errorf("%w: %w", agent.ErrProvider, err)
	case res.StopReason == acp.StopReasonEndTurn:
		out.Outcome = agent.OutcomeDone
	case res.StopReason == acp.StopReasonCancelled:
		out.Outcome = agent.OutcomeCancelled
	default:
		out.Outcome, out.Err = agent.OutcomeError, fmt.Errorf("%w: the agent stopped: %s", agent.ErrProvider, res.StopReason)
	}
	return out
}

// ensure returns the Session's agent process for t, starting it when
// there is none (or it ran on another sandbox, or as another Agent).
func (r *ACPRunner) ensure(ctx context.Context, t Turn, model string) (*live, error) {
	key := processKey(t)
	r.mu.Lock()
	l := r.live[key]
	r.mu.Unlock()
	if l != nil {
		select {
		case <-l.agent.Exited():
		default:
			if l.agentID == t.AgentID && l.sb.SessionID() == t.Sandbox.SessionID() && l.sb.Generation() == t.Sandbox.Generation() {
				return l, nil
			}
		}
		r.drop(l)
	}
	sctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	var b [24]byte
	rand.Read(b[:])
	l = &live{key: key, session: t.SessionID, agentID: t.AgentID, sb: t.Sandbox, token: "lathe-gw-" + hex.EncodeToString(b[:]), carrier: tools.NewCarrier()}
	if err := r.claim(l); err != nil {
		return nil, err
	}
	rl, err := relay.Serve(sctx, t.Sandbox, l.port, r.gateway, l.carrier)
	if err != nil {
		r.forget(l)
		return nil, err
	}
	l.relay = rl
	url := "http://127.0.0.1:" + strconv.Itoa(l.port)
	l.mcp = r.mcpServer(l)
	launch, err := writeFiles(sctx, t.Sandbox)(r.core.Opts.Outside.Launch(sctx, t.AgentID, core.GatewayAccess{URL: url, Token: l.token, Model: model}))
	if err != nil {
		r.forget(l)
		rl.Close()
		return nil, err
	}
	r.mu.Lock()
	r.byTk[l.token] = l
	r.mu.Unlock()
	a, err := client.Start(sctx, t.Sandbox, client.Spec{Args: launch.Args, Env: append(launch.Env, l.carrier), Dir: t.Dir,
		Client: acp.Implementation{Name: "lathe", Version: "1"}, Log: r.core.Log.With("session", t.SessionID, "agent", t.AgentID)})
	if err != nil {
		r.forget(l)
		rl.Close()
		return nil, err
	}
	l.agent = a
	if info := a.Info.AgentInfo; info != nil {
		r.core.Opts.Runtime.Report(t.AgentID, catalog.Reported{Name: clip(info.Name), Version: clip(info.Version)})
	}
	// A Session's process resumes the agent's own session its last one
	// opened (after a Stop, a new sandbox or a restart of the daemon).
	var resume string
	if o, ok := r.core.Store.OutsideSession(t.SessionID); ok && key == t.SessionID && o.Agent == t.AgentID {
		resume = o.ACPSession
	}
	id, loaded, err := a.Open(sctx, t.Dir, mcpServers(l, url), resume)
	if err != nil {
		r.forget(l)
		l.close()
		return nil, err
	}
	l.acpSession = id
	if !loaded && key == t.SessionID {
		if err := r.core.Append(context.WithoutCancel(ctx), []journal.Event{events.New(events.OutsideSessionID(t.SessionID), events.OutsideSessionOpened{Agent: t.AgentID, ACPSession: id})}); err != nil {
			r.core.Log.Warn("journal an outside agent's session", "session", t.SessionID, "err", err)
		}
	}
	r.mu.Lock()
	r.live[key] = l
	r.mu.Unlock()
	return l, nil
}

// processKey is what keys t's agent process: its own Process, or its run.
func processKey(t Turn) string {
	return cmp.Or(t.Process, t.Run, t.SessionID)
}

// claim registers l under its key with the lowest gateway port no other
// process in its sandbox holds.
func (r *ACPRunner) claim(l *live) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	used := map[int]bool{}
	for o := range r.claimed {
		if o.sb.SessionID() == l.sb.SessionID() && o.sb.Generation() == l.sb.Generation() {
			used[o.port] = true
		}
	}
	for p := GatewayPort; p < GatewayPort+MaxPerSandbox; p++ {
		if !used[p] {
			l.port = p
			r.claimed[l] = true
			return nil
		}
	}
	return ErrCrowded
}

func (r *ACPRunner) forget(l *live) {
	r.mu.Lock()
	delete(r.byTk, l.token)
	delete(r.claimed, l)
	if r.live[l.key] == l {
		delete(r.live, l.key)
	}
	r.mu.Unlock()
}

// drop ends l, a run's agent process.
func (r *ACPRunner) drop(l *live) {
	r.forget(l)
	l.close()
}

// End ends the agent process of run (a Session, a Ways lane's run), if
// any: its sandbox goes.
func (r *ACPRunner) End(run string) {
	r.mu.Lock()
	l := r.live[run]
	r.mu.Unlock()
	if l != nil {
		r.forget(l)
		l.close()
	}
}

// Close ends every agent process.
func (r *ACPRunner) Close() {
	r.mu.Lock()
	all := make([]*live, 0, len(r.live))
	for _, l := range r.live {
		all = append(all, l)
	}
	r.mu.Unlock()
	for _, l := range all {
		r.drop(l)
	}
}

// AgentInfo is the name and version an outside agent reported for a
// Session, if it runs.
func (r *ACPRunner) AgentInfo(session string) (name, version string, ok bool) {
	r.mu.Lock()
	l := r.live[session]
	r.mu.Unlock()
	if l == nil || l.agent.Info.AgentInfo == nil {
		return "", "", false
	}
	return l.agent.Info.AgentInfo.Name, l.agent.Info.AgentInfo.Version, true
}

// clip bounds what an agent says of itself.
func clip(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return strings.ToValidUTF8(s, "")
}

// tokens finds the live agent a gateway token belongs to.
type tokens struct{ r *ACPRunner }

func (k tokens) Grant(token string) (gateway.Grant, bool) {
	l := k.r.byToken(token)
	if l == nil {
		return gateway.Grant{}, false
	}
	// SessionID names the run whose process holds the token.
	g := gateway.Grant{SessionID: l.key, AgentID: l.agentID}
	if tr := l.current(); tr != nil {
		g.TurnID = tr.t.TurnID
	}
	return g, true
}

// upstream forwards a gateway call into the running turn's account.
type upstream struct{ r *ACPRunner }

func (u upstream) Stream(ctx context.Context, g gateway.Grant, req llm.Request) (llm.Stream, error) {
	u.r.mu.Lock()
	l := u.r.live[g.SessionID]
	u.r.mu.Unlock()
	if l == nil {
		return nil, ErrNoTurn
	}
	tr := l.current()
	if tr == nil || tr.t.TurnID != g.TurnID {
		return nil, ErrNoTurn
	}
	return tr.relayed.Stream(ctx, req)
}
