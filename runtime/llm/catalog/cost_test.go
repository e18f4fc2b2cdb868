package catalog

import (
	"math"
	"testing"

	"lathe/runtime/usage"
)

func TestCost(t *testing.T) {
	c := New(nil, nil, Options{Prices: map[string]Price{
		"openai/gpt-4.1": {Input: 2, Output: 8},
		"local/free":     {Input: 0, Output: 0},
	}})
	for _, tc := range []struct {
		name            string
		provider, model string
		usage           usage.Tokens
		want            Cost
	}{
		{"priced and complete", "openai", "gpt-4.1", usage.Tokens{InputTokens: 1_000_000, OutputTokens: 500_000, TokenUsageKnown: true}, Cost{USD: 6, PriceKnown: true, Known: true}},
		{"priced subtotal is a lower bound", "openai", "gpt-4.1", usage.Tokens{InputTokens: 1000, OutputTokens: 1000}, Cost{USD: 0.01, PriceKnown: true}},
		{"configured zero is free", "local", "free", usage.Tokens{InputTokens: 5000, TokenUsageKnown: true}, Cost{PriceKnown: true, Known: true}},
		{"unknown price stays unknown", "openai", "gpt-9", usage.Tokens{InputTokens: 5000, TokenUsageKnown: true}, Cost{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Cost(tc.provider, tc.model, tc.usage)
			if math.Abs(got.USD-tc.want.USD) > 1e-12 || got.PriceKnown != tc.want.PriceKnown || got.Known != tc.want.Known {
				t.Fatalf("Cost = %+v, want %+v", got, tc.want)
			}
		})
	}
	sum := Cost{USD: 1, PriceKnown: true, Known: true}.Add(Cost{})
	if sum.Known || sum.PriceKnown || sum.USD != 1 {
		t.Fatalf("adding an unknown cost: %+v", sum)
	}
}
