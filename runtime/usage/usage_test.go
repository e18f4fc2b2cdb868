package usage_test

import (
	"encoding/json"
	"testing"

	"lathe/runtime/usage"
)

func TestAddTotalView(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b usage.Tokens
		want usage.Tokens
	}{
		{"known", usage.Tokens{InputTokens: 10, OutputTokens: 5, ReasoningTokens: 3, TokenUsageKnown: true},
			usage.Tokens{InputTokens: 1, OutputTokens: 2, ReasoningTokens: 1, TokenUsageKnown: true},
			usage.Tokens{InputTokens: 11, OutputTokens: 7, ReasoningTokens: 4, TokenUsageKnown: true}},
		{"a subtotal", usage.Tokens{InputTokens: 10, TokenUsageKnown: true}, usage.Tokens{OutputTokens: 2},
			usage.Tokens{InputTokens: 10, OutputTokens: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a.Add(tc.b)
			if got != tc.want {
				t.Fatalf("Add = %+v, want %+v", got, tc.want)
			}
			if got.Total() != tc.want.InputTokens+tc.want.OutputTokens {
				t.Fatalf("Total = %d, want input + output %d (reasoning is inside output)", got.Total(), tc.want.InputTokens+tc.want.OutputTokens)
			}
		})
	}
}

func TestViewJSON(t *testing.T) {
	b, err := json.Marshal(usage.Tokens{InputTokens: 100, OutputTokens: 40, ReasoningTokens: 30, TokenUsageKnown: true}.View())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"input_tokens":100,"output_tokens":40,"reasoning_tokens":30,"token_usage_known":true,"total_tokens":140}`
	if string(b) != want {
		t.Fatalf("View JSON %s, want %s", b, want)
	}
}
