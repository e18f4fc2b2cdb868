package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// Relayed is one turn of an outside agent (an ACP agent in a Session's
// sandbox) whose model calls Lathe's gateway forwards to the Agent's
// provider. It applies the same budget rule as RunTurn over all of the
// turn's calls, counts each in the Agent's report, prices it, and hands each
// finished call to the turn's observer as one step, metered from the
// provider's stream, whatever the agent itself reports.
type Relayed struct {
	r        *Registry
	a        *actor
	provider llm.Provider
	priceAs  string
	model    string
	step     func(StepOutput)

	mu     sync.Mutex
	sp     *spend
	n      int
	budget string
	err    error
}

// Relay opens a relayed turn on Agent id with model override model (nil:
// the Agent's); step receives each finished call, in the order they end.
func (r *Registry) Relay(id string, model *string, step func(StepOutput)) (*Relayed, error) {
	a, err := r.actor(id)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	cfg, provider, lastErr := a.cfg, a.provider, a.lastErr
	a.mu.Unlock()
	if provider == nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrNotSpawned, id, lastErr)
	}
	m := cfg.Model
	if model != nil {
		m = *model
	}
	return &Relayed{r: r, a: a, provider: provider, priceAs: cfg.Provider, model: m, step: step, sp: newSpend(cfg.Budget)}, nil
}

// Model is the model every call of the turn goes to.
func (t *Relayed) Model() string { return t.model }

// Usage sums the turn's calls so far.
func (t *Relayed) Usage() usage.Tokens {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sp.usage
}

// Breach is the budget the turn breached ("" none) and its error.
func (t *Relayed) Breach() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.budget, t.err
}

// Stream forwards one call. The model asked for is replaced by the turn's
// (an agent's own choice, a small model for titles included, is not
// Lathe's to pay for); the output is capped at what is left of the budget;
// a call after a breach is refused with ErrBudget.
func (t *Relayed) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	t.mu.Lock()
	if t.err != nil {
		err := t.err
		t.mu.Unlock()
		return nil, err
	}
	req.Model = t.model
	if lim := t.sp.limit(); lim > 0 && (req.MaxOutputTokens == 0 || req.MaxOutputTokens > lim) {
		req.MaxOutputTokens = lim
	}
	t.n++
	n := t.n
	t.mu.Unlock()
	asked := time.Now()
	s, err := t.provider.Stream(ctx, req)
	if err != nil {
		t.finish(StepOutput{Step: n, Model: t.model, Partial: true}, "", err)
		return nil, providerErr(ctx, err)
	}
	return &metered{t: t, s: s, out: StepOutput{Step: n, Model: t.model}, asked: asked}, nil
}

// finish counts one ended call and hands it on.
func (t *Relayed) finish(out StepOutput, stop llm.StopReason, failed error) {
	out.Cost = t.r.cat.Cost(t.priceAs, out.Model, out.Usage)
	t.a.mu.Lock()
	t.a.counts.add(out.Usage)
	t.a.mu.Unlock()
	t.mu.Lock()
	if failed != nil {
		t.sp.usage = t.sp.usage.Add(out.Usage)
	} else if t.err == nil {
		t.budget, t.err = t.sp.add(out.Usage, out.Cost, stop)
	} else {
		t.sp.usage = t.sp.usage.Add(out.Usage)
	}
	t.mu.Unlock()
	if t.step != nil {
		t.step(out)
	}
}

// metered passes a provider's stream on while it records the call.
type metered struct {
	t            *Relayed
	s            llm.Stream
	out          StepOutput
	asked, first time.Time
	text, reason strings.Builder
	stop         llm.StopReason
	once         sync.Once
}

func (m *metered) Recv() (llm.Event, error) {
	ev, err := m.s.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			m.end(nil)
		} else {
			m.end(err)
		}
		return ev, err
	}
	switch e := ev.(type) {
	case llm.TextDelta:
		m.mark()
		m.text.WriteString(e.Text)
	case llm.ReasoningDelta:
		m.mark()
		m.reason.WriteString(e.Text)
	case llm.ToolCallStart:
		m.mark()
	case llm.ToolCallEnd:
		id := e.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", len(m.out.Calls)+1)
		}
		m.out.Calls = append(m.out.Calls, boundedCall(Call{CallID: id, Occurrence: 1, Name: e.Name, Arguments: e.Arguments}))
	case llm.Usage:
		m.out.Usage = e.Tokens
	case llm.Done:
		m.stop = e.StopReason
	}
	return ev, nil
}

func (m *metered) mark() {
	if m.first.IsZero() {
		m.first = time.Now()
	}
}

// end records the call once: a stream closed before its end (the agent
// hung up, a Stop) is a partial call with unknown usage.
func (m *metered) end(err error) {
	m.once.Do(func() {
		m.out.Text, m.out.Reasoning = m.text.String(), m.reason.String()
		if !m.first.IsZero() {
			m.out.FirstToken = m.first.Sub(m.asked)
		}
		if err != nil {
			if u, ok := llm.UsageOf(err); ok {
				m.out.Usage = u
			}
			m.out.Usage.TokenUsageKnown = false
			m.out.Partial, m.out.Calls = true, nil
		}
		m.t.finish(m.out, m.stop, err)
	})
}

func (m *metered) Close() error {
	m.end(errors.New("closed before its end"))
	return m.s.Close()
}

var _ llm.Stream = (*metered)(nil)
