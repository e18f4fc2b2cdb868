package agent_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"lathe/runtime/agent"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/polltest"
	"lathe/runtime/usage"
)

// gated is a provider whose inferences wait for release, recording the
// message counts they saw.
type gated struct {
	release chan struct{}
	mu      sync.Mutex
	seen    []int
}

type oneShot struct {
	g    *gated
	ctx  context.Context
	step int
}

func (g *gated) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	g.mu.Lock()
	g.seen = append(g.seen, len(req.Messages))
	g.mu.Unlock()
	return &oneShot{g: g, ctx: ctx}, nil
}

func (s *oneShot) Recv() (llm.Event, error) {
	s.step++
	switch s.step {
	case 1:
		select {
		case <-s.g.release:
		case <-s.ctx.Done():
			return nil, &llm.StreamError{Err: s.ctx.Err()}
		}
		return llm.TextDelta{Text: "ok"}, nil
	case 2:
		return llm.Usage{Tokens: usage.Tokens{InputTokens: 1, OutputTokens: 1, TokenUsageKnown: true}}, nil
	case 3:
		return llm.Done{StopReason: llm.StopEnd}, nil
	}
	return nil, io.EOF
}

func (s *oneShot) Close() error { return nil }

func newRegistry(p llm.Provider, agents ...catalog.Agent) *agent.Registry {
	cat := catalog.New([]catalog.Provider{{Name: "p", Kind: catalog.KindOpenAI}}, agents, catalog.Options{})
	return agent.New(agent.Options{Catalog: cat, ProviderFor: func(catalog.AgentView) (llm.Provider, error) { return p, nil }})
}

func TestOneRequestAtATime(t *testing.T) {
	g := &gated{release: make(chan struct{})}
	r := newRegistry(g, catalog.Agent{ID: "a", Name: "A", Provider: "p", Model: "m"})
	first := make(chan error, 1)
	go func() {
		_, err := r.Execute(context.Background(), "a", agent.ExecuteRequest{Input: "one"})
		first <- err
	}()
	polltest.Until(t, "the first execute to make the Agent busy", func() bool {
		st, _ := r.Status("a")
		return st.State == "busy"
	})
	// A second execute waits its turn, bounded by its context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.Execute(ctx, "a", agent.ExecuteRequest{Input: "two"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second execute while busy: %v, want deadline exceeded", err)
	}
	second := make(chan error, 1)
	go func() {
		_, err := r.Execute(context.Background(), "a", agent.ExecuteRequest{Input: "three"})
		second <- err
	}()
	close(g.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.seen) != 2 || g.seen[0] != 1 || g.seen[1] != 3 {
		t.Fatalf("message counts per inference = %v, want [1 3] (the second sees the first's history)", g.seen)
	}
	st, _ := r.Status("a")
	if st.State != "idle" || st.Requests != 2 || st.Messages != 4 || !st.TokenUsageKnown {
		t.Fatalf("status: %+v", st)
	}
}

func TestNotSpawned(t *testing.T) {
	cat := catalog.New(nil, []catalog.Agent{{ID: "a", Model: "m"}}, catalog.Options{})
	r := agent.New(agent.Options{Catalog: cat, ProviderFor: func(catalog.AgentView) (llm.Provider, error) { return nil, errors.New("no key") }})
	if r.Spawned() != 0 {
		t.Fatalf("spawned = %d", r.Spawned())
	}
	if _, err := r.Execute(context.Background(), "a", agent.ExecuteRequest{Input: "x"}); !errors.Is(err, agent.ErrNotSpawned) {
		t.Fatalf("execute: %v", err)
	}
	if st, _ := r.Status("a"); st.LastError != "no key" || st.Spawned {
		t.Fatalf("status: %+v", st)
	}
}
