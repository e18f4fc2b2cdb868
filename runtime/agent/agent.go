// Package agent is the live Agent runtime: one actor per configured Agent,
// built from the catalog's config projection and a provider factory.
//
// Decisions:
//   - An actor runs one request at a time. A second concurrent Execute (or a
//     Restart) waits its turn, bounded by its context.
//   - The actor's config (name, model, prompt, dependencies, budget) is held
//     in memory. Patch changes it there only; the YAML is never written. The
//     Registry is the source of GET /api/agents, so a patch shows there.
//   - The checkpoint is the conversation: the user/assistant messages of the
//     successful stateful executes. A stateless execute (or one with a system
//     or model override, which implies stateless) is exactly one provider
//     inference with no tools advertised and no tool loop, and never touches
//     the conversation. A stateful execute is also one inference, with the
//     history plus the input, appended to the history on success, unless
//     the caller runs it as a turn with tools (ExecuteTurn: the commands'
//     execute advertises the Agent's MCP tools, never the sandbox tools,
//     which come with Session turns).
//   - Restart rebuilds the provider client from the current in-memory config,
//     keeps the conversation and the runtime counters, clears last_error and
//     resets spawned_at; restarts counts them.
//   - Usage is known only when the provider reported it. A failed inference
//     keeps the known subtotal (llm.UsageOf) with token_usage_known false.
//     An Agent's (and the report's) token_usage_known is false once any of
//     its requests had unknown usage. total_tokens = input + output; output
//     already includes reasoning where the provider reports it.
//   - Execute and RunTurn share one inference path (Registry.infer in
//     infer.go: streaming, stall timeout, pricing, counting) and one budget
//     rule (spend), applied per request: an execute, or a whole Session turn.
//     max_output_tokens caps each inference at what is left of it and is
//     breached when the request's output exceeds it, or reaches it in an
//     inference stopped at that cap; max_usd is breached when the priced
//     cost (catalog.Cost) so far exceeds it (an unknown price is never
//     treated as free or as over budget). A breach fails with ErrBudget
//     naming the budget. An answer cut at an output limit below the budget
//     (the provider's own) is no breach: it fails with ErrProvider, in an
//     execute as in a turn's final answer. Over-budget output is not
//     appended to the conversation; its tokens are still counted.
package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"lathe/runtime/errs"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/usage"
)

// Errors.
var (
	ErrUnknownAgent = errs.New(errs.NotFound, "unknown agent")
	ErrInvalid      = errs.New(errs.Invalid, "invalid request")
	ErrBudget       = errs.New(errs.OverBudget, "budget exceeded")
	// ErrNotSpawned reports an Agent whose provider client could not be built.
	ErrNotSpawned = errs.New(errs.Unavailable, "agent not spawned")
	// ErrProvider wraps every failure of the provider inference.
	ErrProvider = errs.New(errs.Upstream, "provider failed")
)

// ProviderFactory builds the provider client of an Agent from its config.
type ProviderFactory func(a catalog.AgentView) (llm.Provider, error)

// Budget limits a request; zero means unlimited.
type Budget = catalog.Budget

// Options configure a Registry.
type Options struct {
	Catalog     *catalog.Catalog
	ProviderFor ProviderFactory
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Registry holds one actor per configured Agent, in config order.
type Registry struct {
	cat    *catalog.Catalog
	newP   ProviderFactory
	now    func() time.Time
	order  []string
	actors map[string]*actor
}

// Counts are runtime token counts: the requests and their usage.
type Counts struct {
	Requests int `json:"requests"`
	usage.View
}

func newCounts() Counts { return Counts{View: usage.Tokens{TokenUsageKnown: true}.View()} }

func (c *Counts) add(u usage.Tokens) {
	c.Requests++
	c.View = c.Tokens.Add(u).View()
}

func (c *Counts) sum(o Counts) {
	c.Requests += o.Requests
	c.View = c.Tokens.Add(o.Tokens).View()
}

// Status is an actor's live status.
type Status struct {
	AgentID   string    `json:"agent_id"`
	State     string    `json:"state"` // "idle" or "busy"
	Spawned   bool      `json:"spawned"`
	SpawnedAt time.Time `json:"spawned_at"`
	Restarts  int       `json:"restarts"`
	LastError string    `json:"last_error,omitempty"`
	// Messages is the length of the conversation (the checkpoint).
	Messages int `json:"messages"`
	Counts
}

type actor struct {
	id   string
	turn chan struct{} // one request at a time

	mu        sync.Mutex
	cfg       catalog.AgentView
	provider  llm.Provider
	spawnErr  error
	spawnedAt time.Time
	restarts  int
	lastErr   string
	busy      bool
	turns     int // Session turns running on this Agent (turn.go)
	history   []llm.Message
	counts    Counts
}

// New spawns one actor per Agent of the catalog. An Agent whose provider
// cannot be built stays registered but not spawned, with last_error set.
func New(opts Options) *Registry {
	r := &Registry{cat: opts.Catalog, newP: opts.ProviderFor, now: opts.Now, actors: map[string]*actor{}}
	if r.cat == nil {
		r.cat = catalog.New(nil, nil, catalog.Options{})
	}
	if r.now == nil {
		r.now = time.Now
	}
	for _, v := range r.cat.Agents() {
		a := &actor{id: v.ID, turn: make(chan struct{}, 1), cfg: v, counts: newCounts()}
		r.spawn(a)
		r.order = append(r.order, v.ID)
		r.actors[v.ID] = a
	}
	return r
}

// spawn (re)builds a's provider; a.mu must be held or a unshared.
func (r *Registry) spawn(a *actor) {
	a.spawnedAt = r.now().UTC()
	a.provider, a.spawnErr = nil, nil
	if r.newP == nil {
		a.spawnErr = errors.New("no provider factory")
	} else {
		a.provider, a.spawnErr = r.newP(a.cfg)
	}
	a.lastErr = ""
	if a.spawnErr != nil {
		a.provider = nil
		a.lastErr = a.spawnErr.Error()
	}
}

func (r *Registry) actor(id string) (*actor, error) {
	if r == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownAgent, id)
	}
	a, ok := r.actors[id]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownAgent, id)
	}
	return a, nil
}

// Spawned counts the Agents whose actor is running.
func (r *Registry) Spawned() int {
	if r == nil {
		return 0
	}
	n := 0
	for _, a := range r.actors {
		a.mu.Lock()
		if a.provider != nil {
			n++
		}
		a.mu.Unlock()
	}
	return n
}

// Agents is the projection of every Agent's current in-memory config, in
// config order, with prices from the catalog.
func (r *Registry) Agents() []catalog.AgentView {
	out := make([]catalog.AgentView, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, r.view(r.actors[id]))
	}
	return out
}

// Agent is one Agent's projection.
func (r *Registry) Agent(id string) (catalog.AgentView, error) {
	a, err := r.actor(id)
	if err != nil {
		return catalog.AgentView{}, err
	}
	return r.view(a), nil
}

func (r *Registry) view(a *actor) catalog.AgentView {
	a.mu.Lock()
	v := a.cfg
	a.mu.Unlock()
	v.Dependencies = slices.Clone(v.Dependencies)
	if v.Dependencies == nil {
		v.Dependencies = []string{}
	}
	v.Price = r.cat.PriceOf(v.Provider, v.Model)
	return v
}

// Report records what an outside Agent said of itself (its name and
// version, from its initialize), for its view.
func (r *Registry) Report(id string, rep catalog.Reported) {
	a, err := r.actor(id)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.cfg.Reported = &rep
	a.mu.Unlock()
}

// Status is the live status of one Agent.
func (r *Registry) Status(id string) (Status, error) {
	a, err := r.actor(id)
	if err != nil {
		return Status{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Status{
		AgentID: a.id, State: "idle", Spawned: a.provider != nil, SpawnedAt: a.spawnedAt,
		Restarts: a.restarts, LastError: a.lastErr, Messages: len(a.history), Counts: a.counts,
	}
	if a.busy || a.turns > 0 {
		st.State = "busy"
	}
	return st, nil
}

// Load is how many requests run on Agent id now: Session turns and a
// direct execute. An unknown Agent has none.
func (r *Registry) Load(id string) int {
	a, err := r.actor(id)
	if err != nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.turns
	if a.busy {
		n++
	}
	return n
}

// AgentCounts is one Agent's line of the token report.
type AgentCounts struct {
	AgentID string `json:"agent_id"`
	Counts
}

// TokenReport is the per-Agent and total runtime token counts.
type TokenReport struct {
	Agents []AgentCounts `json:"agents"`
	Total  Counts        `json:"total"`
}

// TokenReport reports the runtime token counts since the daemon started.
func (r *Registry) TokenReport() TokenReport {
	rep := TokenReport{Agents: []AgentCounts{}, Total: newCounts()}
	if r == nil {
		return rep
	}
	for _, id := range r.order {
		a := r.actors[id]
		a.mu.Lock()
		c := a.counts
		a.mu.Unlock()
		rep.Agents = append(rep.Agents, AgentCounts{AgentID: id, Counts: c})
		rep.Total.sum(c)
	}
	return rep
}

// ExecuteRequest is one direct Agent execution.
type ExecuteRequest struct {
	Input          string
	SystemOverride *string
	ModelOverride  *string
	Stateless      bool
}

// Result is the outcome of Execute. Execute fills the token fields on
// failure too (the known subtotal, TokenUsageKnown false).
type Result struct {
	Output    string `json:"output"`
	Model     string `json:"model"`
	Stateless bool   `json:"stateless"`
	usage.View
}

// acquire takes a's turn, bounded by ctx.
func (a *actor) acquire(ctx context.Context) error {
	select {
	case a.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *actor) release() { <-a.turn }

// Execute runs one request on the Agent and waits for it. The Result carries
// the token fields whether or not err is nil.
func (r *Registry) Execute(ctx context.Context, id string, req ExecuteRequest) (Result, error) {
	res := Result{View: usage.Tokens{TokenUsageKnown: true}.View()}
	a, err := r.actor(id)
	if err != nil {
		return res, err
	}
	if strings.TrimSpace(req.Input) == "" {
		return res, fmt.Errorf("%w: input is required", ErrInvalid)
	}
	if req.ModelOverride != nil && strings.TrimSpace(*req.ModelOverride) == "" {
		return res, fmt.Errorf("%w: model_override must not be empty", ErrInvalid)
	}
	if err := a.acquire(ctx); err != nil {
		return res, err
	}
	defer a.release()

	a.mu.Lock()
	cfg, provider := a.cfg, a.provider
	history := slices.Clone(a.history)
	if provider == nil {
		a.mu.Unlock()
		return res, fmt.Errorf("%w: %s: %s", ErrNotSpawned, id, a.lastErr)
	}
	a.busy = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.busy = false
		a.mu.Unlock()
	}()

	stateless := req.Stateless || req.SystemOverride != nil || req.ModelOverride != nil
	llmReq := llm.Request{Model: cfg.Model, System: cfg.Prompt}
	if req.ModelOverride != nil {
		llmReq.Model = *req.ModelOverride
	}
	if req.SystemOverride != nil {
		llmReq.System = *req.SystemOverride
	}
	user := llm.Message{Role: llm.RoleUser, Text: req.Input}
	if stateless {
		llmReq.Messages = []llm.Message{user}
	} else {
		llmReq.Messages = append(history, user)
	}
	res.Model, res.Stateless = llmReq.Model, stateless

	out, err := r.infer(ctx, inference{actor: a, provider: provider, priceAs: cfg.Provider, req: llmReq}, newSpend(cfg.Budget))
	res.View = out.Usage.View()
	if err == nil {
		err = finalAnswer(out)
	}

	a.mu.Lock()
	if err != nil {
		a.lastErr = err.Error()
	} else {
		res.Output = out.Text
		if !stateless {
			a.history = append(a.history, user, llm.Message{Role: llm.RoleAssistant, Text: out.Text})
		}
	}
	a.mu.Unlock()
	return res, err
}

// ExecuteTurn runs a stateful execute as a turn with tools: it holds the
// Agent's turn as Execute does, runs req through RunTurn with the Agent's
// conversation as its History, and, when the turn is done, adds the input
// and the output to the conversation.
func (r *Registry) ExecuteTurn(ctx context.Context, req TurnRequest, obs TurnObserver) TurnResult {
	a, err := r.actor(req.AgentID)
	if err != nil {
		return TurnResult{Outcome: OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}
	}
	if strings.TrimSpace(req.Input) == "" {
		return TurnResult{Outcome: OutcomeError, Err: fmt.Errorf("%w: input is required", ErrInvalid), Usage: usage.Tokens{TokenUsageKnown: true}}
	}
	if err := a.acquire(ctx); err != nil {
		return TurnResult{Outcome: OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}
	}
	defer a.release()
	a.mu.Lock()
	req.History = slices.Clone(a.history)
	a.busy = true
	a.mu.Unlock()
	res := r.RunTurn(ctx, req, obs)
	a.mu.Lock()
	a.busy = false
	if res.Outcome == OutcomeDone {
		a.history = append(a.history, llm.Message{Role: llm.RoleUser, Text: req.Input}, llm.Message{Role: llm.RoleAssistant, Text: res.Output})
	}
	a.mu.Unlock()
	return res
}

// Restart rebuilds the Agent's actor from its current in-memory config,
// keeping the conversation and the counters. It waits for a running request
// to finish, bounded by ctx.
func (r *Registry) Restart(ctx context.Context, id string) (Status, error) {
	a, err := r.actor(id)
	if err != nil {
		return Status{}, err
	}
	if err := a.acquire(ctx); err != nil {
		return Status{}, err
	}
	a.mu.Lock()
	r.spawn(a)
	a.restarts++
	a.mu.Unlock()
	a.release()
	return r.Status(id)
}

// CheckPatch validates a patch without applying it.
func CheckPatch(p AgentPatch) error {
	if p.Name != nil && strings.TrimSpace(*p.Name) == "" {
		return fmt.Errorf("%w: name must not be empty", ErrInvalid)
	}
	if p.Model != nil && strings.TrimSpace(*p.Model) == "" {
		return fmt.Errorf("%w: model must not be empty", ErrInvalid)
	}
	if p.Dependencies != nil {
		for i, d := range *p.Dependencies {
			if strings.TrimSpace(d) == "" {
				return fmt.Errorf("%w: dependencies[%d] is empty", ErrInvalid, i)
			}
		}
	}
	if p.Budget != nil && (p.Budget.MaxOutputTokens < 0 || !(p.Budget.MaxUSD >= 0)) {
		return fmt.Errorf("%w: budget values must be 0 (unlimited) or more", ErrInvalid)
	}
	return nil
}

// AgentPatch changes an Agent's in-memory config; nil fields stay.
type AgentPatch struct {
	Name         *string   `json:"name"`
	Model        *string   `json:"model"`
	Prompt       *string   `json:"prompt"`
	Dependencies *[]string `json:"dependencies"`
	Budget       *Budget   `json:"budget"`
}

// Patch validates and applies p in memory (never to the YAML) and, when
// restart is true, restarts the actor. It returns the new projection.
func (r *Registry) Patch(ctx context.Context, id string, p AgentPatch, restart bool) (catalog.AgentView, error) {
	a, err := r.actor(id)
	if err != nil {
		return catalog.AgentView{}, err
	}
	if err := CheckPatch(p); err != nil {
		return catalog.AgentView{}, err
	}
	a.mu.Lock()
	if p.Name != nil {
		a.cfg.Name = *p.Name
	}
	if p.Model != nil {
		a.cfg.Model = *p.Model
	}
	if p.Prompt != nil {
		a.cfg.Prompt = *p.Prompt
	}
	if p.Dependencies != nil {
		a.cfg.Dependencies = slices.Clone(*p.Dependencies)
	}
	if p.Budget != nil {
		a.cfg.Budget = *p.Budget
	}
	a.mu.Unlock()
	if restart {
		if _, err := r.Restart(ctx, id); err != nil {
			return r.view(a), err
		}
	}
	return r.view(a), nil
}
