// Package usage is the token usage of model work, in the one type that every
// layer counts it in: the provider clients (runtime/llm), the agent loop, the
// journal's events, the read models, the commands and the frames. It imports
// nothing, so that every package may import it.
//
// The rule, as CONTRACT.md fixes it and as OpenAI and Anthropic count:
// reasoning tokens are the part of the output spent on reasoning, counted
// inside OutputTokens and never added on top, so Total is input + output
// wherever total_tokens appears.
package usage

// Tokens are the token counts of some model work. TokenUsageKnown false
// marks a known subtotal: some of the work had counts the provider did not
// report (it omitted them, or the stream failed). The zero value is an
// empty subtotal; the empty known total is Tokens{TokenUsageKnown: true}.
type Tokens struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// ReasoningTokens is the part of OutputTokens spent on reasoning, where
	// the provider reports it (Anthropic does not: 0).
	ReasoningTokens int  `json:"reasoning_tokens"`
	TokenUsageKnown bool `json:"token_usage_known"`
}

// Add sums t and o; the sum is known only when both are.
func (t Tokens) Add(o Tokens) Tokens {
	return Tokens{
		InputTokens: t.InputTokens + o.InputTokens, OutputTokens: t.OutputTokens + o.OutputTokens,
		ReasoningTokens: t.ReasoningTokens + o.ReasoningTokens, TokenUsageKnown: t.TokenUsageKnown && o.TokenUsageKnown,
	}
}

// Total is input + output: reasoning is inside output.
func (t Tokens) Total() int { return t.InputTokens + t.OutputTokens }

// View is t as the routes and frames show it: the counts and their
// total_tokens.
func (t Tokens) View() View { return View{Tokens: t, TotalTokens: t.Total()} }

// View is Tokens with total_tokens, for JSON: the counts are embedded, so a
// route's or frame's fields stay flat. Build it with Tokens.View, never by
// hand, so that TotalTokens is always Total; assign a new View rather than
// changing its Tokens.
type View struct {
	Tokens
	TotalTokens int `json:"total_tokens"`
}
