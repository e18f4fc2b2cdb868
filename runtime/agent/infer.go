package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"lathe/runtime/jsonlimit"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/usage"
)

// The one inference path, shared by Execute (one inference) and RunTurn
// (one per step), and the one budget rule both apply.

// spend is one request's use of its Agent's budget: a direct execute, or a
// Session turn with all its inferences.
//
// The budget rule (0 = unlimited):
//   - max_output_tokens: each inference is capped at what is left of it
//     (at least 1 token). The request breaches it when its output tokens
//     exceed it, or reach it in an inference that stopped at that cap: the
//     budget, not the model, ended the answer. An inference that stops at an
//     output limit with output below the budget hit the provider's own limit;
//     that is no breach (see finalAnswer).
//   - max_usd: the request breaches it when the priced cost of its
//     inferences so far exceeds it. An unknown price is never treated as
//     free or as over budget: it adds nothing.
type spend struct {
	budget Budget
	usage  usage.Tokens // summed over the request's inferences
	usd    float64      // the known-priced part of the cost so far
}

func newSpend(b Budget) *spend { return &spend{budget: b, usage: usage.Tokens{TokenUsageKnown: true}} }

// limit is the output cap of the next inference: what is left of
// max_output_tokens, at least 1; 0 (the provider's default) when unlimited.
func (s *spend) limit() int {
	if b := s.budget.MaxOutputTokens; b > 0 {
		return max(1, b-s.usage.OutputTokens)
	}
	return 0
}

// add counts one inference and applies the budget rule, returning the name
// of the budget breached ("max_output_tokens" or "max_usd") and an error
// wrapping ErrBudget, or "" and nil.
func (s *spend) add(u usage.Tokens, c catalog.Cost, stop llm.StopReason) (string, error) {
	s.usage = s.usage.Add(u)
	if c.PriceKnown {
		s.usd += c.USD
	}
	if b := s.budget.MaxOutputTokens; b > 0 && (s.usage.OutputTokens > b || stop == llm.StopMaxTokens && s.usage.OutputTokens >= b) {
		return "max_output_tokens", fmt.Errorf("%w: max_output_tokens %d (%d output tokens used)", ErrBudget, b, s.usage.OutputTokens)
	}
	if b := s.budget.MaxUSD; b > 0 && s.usd > b {
		return "max_usd", fmt.Errorf("%w: max_usd %g (%g USD spent)", ErrBudget, b, s.usd)
	}
	return "", nil
}

// inference is one model inference of a request.
type inference struct {
	actor    *actor
	provider llm.Provider
	// priceAs is the Agent's provider name, for pricing.
	priceAs string
	req     llm.Request
	// stop, when closed, abandons the inference (a turn's Stop); nil never.
	stop <-chan struct{}
	// stall is how long the provider may send nothing;
	// 0 means DefaultStallTimeout.
	stall time.Duration
	// delta receives the text and reasoning deltas as they come; nil drops
	// them.
	delta func(kind, text string)
}

// stepResult is StepOutput plus the stop reason and the budget breached.
type stepResult struct {
	StepOutput
	stop   llm.StopReason
	budget string
}

// infer runs one inference under the request's budget: its output cap is
// what is left of it, its usage counts in the Agent's report and in sp, and
// its cost is priced. The error is errStopped for a Stop, ErrProvider (or
// the context's error) for a failed inference, and ErrBudget, with
// stepResult.budget naming it, for a finished inference that breached the
// budget.
func (r *Registry) infer(ctx context.Context, in inference, sp *spend) (stepResult, error) {
	in.req.MaxOutputTokens = sp.limit()
	out, err := stream(ctx, in)
	out.Model = in.req.Model
	out.Cost = r.cat.Cost(in.priceAs, in.req.Model, out.Usage)
	in.actor.mu.Lock()
	in.actor.counts.add(out.Usage)
	in.actor.mu.Unlock()
	if err != nil {
		sp.usage = sp.usage.Add(out.Usage)
		if errors.Is(err, errStopped) {
			return out, err
		}
		return out, providerErr(ctx, err)
	}
	out.budget, err = sp.add(out.Usage, out.Cost, out.stop)
	return out, err
}

// finalAnswer refuses an answer the model could not finish: it stopped at
// an output limit that was not the budget's (that is a breach, which infer
// reports first).
func finalAnswer(out stepResult) error {
	if out.stop == llm.StopMaxTokens {
		return fmt.Errorf("%w: the model stopped at its output limit before finishing", ErrProvider)
	}
	return nil
}

func providerErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrProvider, err)
}

// stream streams one inference, passing deltas on as they come. A Stop or a
// stall abandons it: the output so far is Partial, its usage unknown.
func stream(ctx context.Context, in inference) (stepResult, error) {
	var out stepResult
	stall := in.stall
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	delta := in.delta
	if delta == nil {
		delta = func(string, string) {}
	}
	ictx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-in.stop:
			cancel(errStopped)
		case <-ictx.Done():
		}
	}()
	timer := time.AfterFunc(stall, func() {
		cancel(fmt.Errorf("%w: the provider sent nothing for %s", llm.ErrUnavailable, stall))
	})
	defer timer.Stop()
	var text, reasoning strings.Builder
	abandon := func(err error) (stepResult, error) {
		if u, ok := llm.UsageOf(err); ok {
			out.Usage = u
		}
		out.Usage.TokenUsageKnown = false
		out.Text, out.Reasoning, out.Partial = text.String(), reasoning.String(), true
		out.Calls = nil
		if cause := context.Cause(ictx); cause != nil && ctx.Err() == nil {
			err = cause
		}
		return out, err
	}
	s, err := in.provider.Stream(ictx, in.req)
	if err != nil {
		return abandon(err)
	}
	defer s.Close()
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return abandon(err)
		}
		timer.Reset(stall)
		switch e := ev.(type) {
		case llm.TextDelta:
			text.WriteString(e.Text)
			delta(DeltaText, e.Text)
		case llm.ReasoningDelta:
			reasoning.WriteString(e.Text)
			delta(DeltaReasoning, e.Text)
		case llm.ToolCallEnd:
			id := e.ID
			if id == "" { // some local servers send none; the pairing needs one
				id = fmt.Sprintf("call_%d", len(out.Calls)+1)
			}
			out.Calls = append(out.Calls, boundedCall(Call{CallID: id, Name: e.Name, Arguments: e.Arguments}))
		case llm.Usage:
			out.Usage = e.Tokens
		case llm.Done:
			out.stop = e.StopReason
		}
	}
	if cause := context.Cause(ictx); cause != nil {
		return abandon(cause) // stopped or stalled as the stream ended
	}
	out.Text, out.Reasoning = text.String(), reasoning.String()
	return out, nil
}

// boundedCall refuses a call whose arguments nest or weigh past
// jsonlimit.Default: the tool does not run, the model is told why, and the
// arguments are kept (as a JSON string, cut at 64 KiB) only as evidence,
// so that the events that record the call stay small and always replay.
func boundedCall(c Call) Call {
	err := jsonlimit.Check(c.Arguments, jsonlimit.Default)
	if err == nil {
		return c
	}
	c.Refused = fmt.Sprintf("the arguments of %s were refused: %v; call it again with a flatter, smaller JSON object", c.Name, err)
	kept := c.Arguments[:min(len(c.Arguments), 64<<10)]
	c.Arguments, _ = json.Marshal(string(kept))
	return c
}
