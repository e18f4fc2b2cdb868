package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/usage"
)

// scripted answers each inference with its next list of events and records
// the output cap each request carried.
type scripted struct {
	mu    sync.Mutex
	steps [][]llm.Event
	caps  []int
}

func (s *scripted) Stream(_ context.Context, req llm.Request) (llm.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps = append(s.caps, req.MaxOutputTokens)
	if len(s.steps) == 0 {
		return nil, &llm.StreamError{Err: llm.ErrUnavailable}
	}
	evs := s.steps[0]
	s.steps = s.steps[1:]
	return &events{evs: evs}, nil
}

type events struct{ evs []llm.Event }

func (e *events) Recv() (llm.Event, error) {
	if len(e.evs) == 0 {
		return nil, io.EOF
	}
	ev := e.evs[0]
	e.evs = e.evs[1:]
	return ev, nil
}

func (e *events) Close() error { return nil }

// answer is one inference's events: text, usage and the stop reason; a
// tool_calls stop asks for one call.
func answer(output int, stop llm.StopReason) []llm.Event {
	evs := []llm.Event{llm.TextDelta{Text: "answer"}}
	if stop == llm.StopToolCalls {
		evs = append(evs, llm.ToolCallEnd{ID: "c1", Name: "list_files", Arguments: json.RawMessage(`{}`)})
	}
	return append(evs, llm.Usage{Tokens: usage.Tokens{InputTokens: 1, OutputTokens: output, TokenUsageKnown: true}}, llm.Done{StopReason: stop})
}

// quiet is a TurnObserver that accepts everything.
type quiet struct{}

func (quiet) Started(string) error                                       { return nil }
func (quiet) Delta(string, string)                                       {}
func (quiet) Step(agent.StepOutput) error                                { return nil }
func (quiet) ToolStarted(agent.Call) error                               { return nil }
func (quiet) ToolFinished(agent.Call, tools.Result, time.Duration) error { return nil }

// budgetRegistry is one Agent "a" with budget b on provider p, whose model
// "m" costs 0.1 USD per output token.
func budgetRegistry(p llm.Provider, b catalog.Budget) *agent.Registry {
	cat := catalog.New([]catalog.Provider{{Name: "p", Kind: catalog.KindOpenAI}},
		[]catalog.Agent{{ID: "a", Provider: "p", Model: "m", Budget: b}},
		catalog.Options{Prices: map[string]catalog.Price{"p/m": {Output: 100_000}}})
	return agent.New(agent.Options{Catalog: cat, ProviderFor: func(catalog.AgentView) (llm.Provider, error) { return p, nil }})
}

// TestOneBudgetRule runs each case through Execute and through a turn
// (RunTurn): both apply the same rule to the same inference.
func TestOneBudgetRule(t *testing.T) {
	tokens := catalog.Budget{MaxOutputTokens: 10}
	for _, tc := range []struct {
		name   string
		budget catalog.Budget
		step   []llm.Event
		err    error  // nil, ErrBudget or ErrProvider
		breach string // the budget named on ErrBudget
	}{
		{name: "under the budget", budget: tokens, step: answer(5, llm.StopEnd)},
		{name: "finished exactly at the budget", budget: tokens, step: answer(10, llm.StopEnd)},
		{name: "cut at the budget's cap", budget: tokens, step: answer(10, llm.StopMaxTokens), err: agent.ErrBudget, breach: "max_output_tokens"},
		{name: "over the budget (cap ignored)", budget: tokens, step: answer(11, llm.StopEnd), err: agent.ErrBudget, breach: "max_output_tokens"},
		{name: "cut below the budget is the provider's limit", budget: tokens, step: answer(4, llm.StopMaxTokens), err: agent.ErrProvider},
		{name: "cut without a budget", step: answer(4, llm.StopMaxTokens), err: agent.ErrProvider},
		{name: "unlimited", step: answer(1000, llm.StopEnd)},
		{name: "within max_usd", budget: catalog.Budget{MaxUSD: 0.5}, step: answer(5, llm.StopEnd)},
		{name: "over max_usd", budget: catalog.Budget{MaxUSD: 0.5}, step: answer(6, llm.StopEnd), err: agent.ErrBudget, breach: "max_usd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(path string, err error, breach string, p *scripted) {
				t.Helper()
				switch {
				case tc.err == nil && err != nil:
					t.Errorf("%s: %v", path, err)
				case tc.err != nil && !errors.Is(err, tc.err):
					t.Errorf("%s: %v, want %v", path, err, tc.err)
				case tc.breach != "" && !strings.Contains(err.Error(), tc.breach):
					t.Errorf("%s: %v does not name %s", path, err, tc.breach)
				}
				if path == "turn" && breach != tc.breach {
					t.Errorf("turn: budget %q, want %q", breach, tc.breach)
				}
				if want := []int{tc.budget.MaxOutputTokens}; !slices.Equal(p.caps, want) {
					t.Errorf("%s: output caps sent %v, want %v", path, p.caps, want)
				}
			}

			p := &scripted{steps: [][]llm.Event{tc.step}}
			res, err := budgetRegistry(p, tc.budget).Execute(context.Background(), "a", agent.ExecuteRequest{Input: "x"})
			check("execute", err, "", p)
			if want := tc.step[len(tc.step)-2].(llm.Usage).OutputTokens; res.OutputTokens != want || !res.TokenUsageKnown {
				t.Errorf("execute: output tokens %d (known %v), want %d: counted whatever the outcome", res.OutputTokens, res.TokenUsageKnown, want)
			}

			p = &scripted{steps: [][]llm.Event{tc.step}}
			tr := budgetRegistry(p, tc.budget).RunTurn(context.Background(), agent.TurnRequest{AgentID: "a", Input: "x"}, quiet{})
			check("turn", tr.Err, tr.Budget, p)
		})
	}
}

// TestTurnBudgetSpansSteps: a turn's budget is one budget over all its
// inferences; each step is capped at what is left of it.
func TestTurnBudgetSpansSteps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second []llm.Event
		err    error
	}{
		{name: "second step finishes within", second: answer(4, llm.StopEnd)},
		{name: "second step cut at what was left", second: answer(4, llm.StopMaxTokens), err: agent.ErrBudget},
		{name: "second step cut below what was left", second: answer(3, llm.StopMaxTokens), err: agent.ErrProvider},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &scripted{steps: [][]llm.Event{answer(6, llm.StopToolCalls), tc.second}}
			r := budgetRegistry(p, catalog.Budget{MaxOutputTokens: 10})
			res := r.RunTurn(context.Background(), agent.TurnRequest{AgentID: "a", Input: "x"}, quiet{})
			if tc.err == nil && res.Err != nil || tc.err != nil && !errors.Is(res.Err, tc.err) {
				t.Fatalf("turn: %v, want %v", res.Err, tc.err)
			}
			if !slices.Equal(p.caps, []int{10, 4}) {
				t.Errorf("output caps %v, want [10 4]", p.caps)
			}
			if res.Usage.OutputTokens != 6+tc.second[len(tc.second)-2].(llm.Usage).OutputTokens {
				t.Errorf("turn usage %+v", res.Usage)
			}
			if st, _ := r.Status("a"); st.Requests != 2 || st.OutputTokens != res.Usage.OutputTokens {
				t.Errorf("report %+v, want both inferences counted", st.Counts)
			}
		})
	}
}
