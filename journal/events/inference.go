package events

import "time"

// Inference is one model call of a turn that journals no step events (a
// Chat's, an Automation agent node's), kept on the turn's end for the
// telemetry read models: when it began, its time to first token (0: no
// streamed text or reasoning) and its duration, its model, usage and
// finish reason (stop, tool_calls or error), and the Agent that made it.
type Inference struct {
	Agent        string    `json:"agent"`
	Step         int       `json:"step"`
	Model        string    `json:"model,omitempty"`
	At           time.Time `json:"at"`
	DurationMS   float64   `json:"duration_ms"`
	FirstTokenMS float64   `json:"first_token_ms,omitempty"`
	InputTokens  int       `json:"input_tokens,omitempty"`
	OutputTokens int       `json:"output_tokens,omitempty"`
	// ReasoningTokens, UsageKnown and CostUSD complete the usage as a
	// Session turn's turn-usage has it: CostUSD is nil when the price is
	// unknown.
	ReasoningTokens int      `json:"reasoning_tokens,omitempty"`
	UsageKnown      bool     `json:"token_usage_known,omitempty"`
	CostUSD         *float64 `json:"cost_usd,omitempty"`
	FinishReason    string   `json:"finish_reason"`
}

// FinishReason names how an inference ended, in the GenAI conventions'
// words: error when it did not finish, tool_calls when it asked for any,
// else stop.
func FinishReason(partial bool, toolCalls int) string {
	switch {
	case partial:
		return "error"
	case toolCalls > 0:
		return "tool_calls"
	}
	return "stop"
}
