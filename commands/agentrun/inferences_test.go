package agentrun

import (
	"testing"

	"lathe/runtime/agent"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/usage"
)

// TestInferenceClock: each inference of a turn is kept with its start,
// its first token (none when nothing streamed), its usage and cost (nil:
// no price) and how it ended, the next one starting after the step's tool
// calls.
func TestInferenceClock(t *testing.T) {
	c := InferenceClock{Agent: "a"}
	c.Ask() // Started
	c.Delta()
	c.Step(agent.StepOutput{Step: 1, Model: "m1", Calls: []agent.Call{{CallID: "c1"}}, Cost: catalog.Cost{USD: 0.5, PriceKnown: true},
		Usage: usage.Tokens{InputTokens: 5, OutputTokens: 2, ReasoningTokens: 1, TokenUsageKnown: true}})
	c.Ask() // the tool call finished
	c.Step(agent.StepOutput{Step: 2, Model: "m1"})
	c.Delta()
	c.Step(agent.StepOutput{Step: 3, Model: "m1", Partial: true})
	if len(c.Done) != 3 {
		t.Fatalf("inferences: %+v", c.Done)
	}
	for i, want := range []struct {
		reason    string
		first     bool
		in, out   int
		afterPrev bool
	}{
		{"tool_calls", true, 5, 2, false},
		{"stop", false, 0, 0, true},
		{"error", true, 0, 0, true},
	} {
		in := c.Done[i]
		if in.Agent != "a" || in.Step != i+1 || in.Model != "m1" || in.FinishReason != want.reason || (in.FirstTokenMS > 0) != want.first ||
			in.InputTokens != want.in || in.OutputTokens != want.out || in.DurationMS < 0 || in.At.IsZero() {
			t.Errorf("inference %d: %+v", i+1, in)
		}
		if priced := i == 0; (in.CostUSD != nil) != priced || priced && (*in.CostUSD != 0.5 || in.ReasoningTokens != 1 || !in.UsageKnown) {
			t.Errorf("inference %d's usage: %+v", i+1, in)
		}
		if want.afterPrev && in.At.Before(c.Done[i-1].At) {
			t.Errorf("inference %d starts before the one before it", i+1)
		}
	}
}
