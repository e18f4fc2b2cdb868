package agentrun

import (
	"time"

	"lathe/journal/events"
	"lathe/runtime/agent"
)

// InferenceClock times the model calls of a turn that journals no step
// events (a Chat's, an agent node's) for the telemetry read models: each
// begins at Started or at the end of the step's tool calls, its first
// token is its first delta. The turn's observer calls it from the turn's
// goroutine, in order.
type InferenceClock struct {
	Agent        string
	asked, first time.Time
	Done         []events.Inference
}

// Ask notes that the next inference starts now.
func (c *InferenceClock) Ask() { c.asked, c.first = time.Now(), time.Time{} }

func (c *InferenceClock) Delta() {
	if c.first.IsZero() {
		c.first = time.Now()
	}
}

// Step records the inference that produced st.
func (c *InferenceClock) Step(st agent.StepOutput) {
	if c.asked.IsZero() {
		c.Ask()
	}
	in := events.Inference{Agent: c.Agent, Step: st.Step, Model: st.Model, At: c.asked, DurationMS: ms(time.Since(c.asked)),
		InputTokens: st.Usage.InputTokens, OutputTokens: st.Usage.OutputTokens, ReasoningTokens: st.Usage.ReasoningTokens,
		UsageKnown: st.Usage.TokenUsageKnown, FinishReason: events.FinishReason(st.Partial, len(st.Calls))}
	if st.Cost.PriceKnown {
		usd := st.Cost.USD
		in.CostUSD = &usd
	}
	if !c.first.IsZero() {
		in.FirstTokenMS = ms(c.first.Sub(c.asked))
	}
	c.Done = append(c.Done, in)
	c.Ask() // the next inference, if any, starts after this step's tool calls
}

// ms is d in milliseconds, to the nanosecond, so that a first token right
// after its ask does not read 0 (none).
func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
