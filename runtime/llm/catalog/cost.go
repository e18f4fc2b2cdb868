package catalog

import "lathe/runtime/usage"

// Cost is what some usage cost in USD, and whether that figure is complete.
// Known is false when the price is unknown (then USD is 0 and means
// nothing) or when the token counts are only a known subtotal (then USD is a
// lower bound). An unknown price is never reported as free.
type Cost struct {
	USD        float64 `json:"usd"`
	PriceKnown bool    `json:"price_known"`
	Known      bool    `json:"known"`
}

// Cost prices usage at the configured price of model on provider. Output
// tokens include reasoning tokens, as providers bill them.
func (c *Catalog) Cost(provider, model string, u usage.Tokens) Cost {
	p := c.PriceOf(provider, model)
	if p == nil {
		return Cost{}
	}
	usd := (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output) / 1e6
	return Cost{USD: usd, PriceKnown: true, Known: u.TokenUsageKnown}
}

// Add sums two costs; the sum is known only when both parts are.
func (a Cost) Add(b Cost) Cost {
	return Cost{USD: a.USD + b.USD, PriceKnown: a.PriceKnown && b.PriceKnown, Known: a.Known && b.Known}
}
