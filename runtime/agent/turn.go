package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/usage"
)

// Turn loop bounds.
const (
	// DefaultMaxSteps bounds the inferences of one turn.
	DefaultMaxSteps = 50
	// DefaultStallTimeout is how long an inference may send nothing before
	// the turn fails as stalled.
	DefaultStallTimeout = 120 * time.Second
)

// Toolbox is the tool set a turn may use: tools.Set in a Session sandbox.
// RunTurn reads Tools once per turn, advertises them in every inference,
// and calls Call only with one of their names.
type Toolbox interface {
	Tools() []llm.Tool
	Call(ctx context.Context, name string, args json.RawMessage) tools.Result
}

// TurnRequest is one Session turn on an Agent.
type TurnRequest struct {
	AgentID string
	// Model overrides the Agent's model for this turn (same provider).
	Model *string
	// System replaces the Agent's prompt for this turn (a Chat's
	// system_override); nil keeps it.
	System *string
	// History is the conversation before this turn, Input the user message.
	History []llm.Message
	Input   string
	Tools   Toolbox
	// Stop is closed to ask for a cooperative Stop: an inference in flight is
	// abandoned at once, a running tool call finishes first.
	Stop <-chan struct{}
	// MaxSteps and StallTimeout default to DefaultMaxSteps and
	// DefaultStallTimeout.
	MaxSteps     int
	StallTimeout time.Duration
	// Occurrences counts the uses of each call ID, so that several runs of
	// one Agent inside one turn (a lattice Worker's subtasks) number their
	// calls as one; nil counts this run alone.
	Occurrences map[string]int
	// FinishOn names a tool whose call ends the turn once it ran: done with
	// the call's result as Output, or failed with it when it is an error.
	// It is how structured output is asked for (a lattice coordinator's
	// plan); "" means none.
	FinishOn string
}

// Call is one tool call of a turn. (CallID, Occurrence) identify it: a
// provider may reuse its call IDs, so Occurrence counts uses of CallID
// within the turn, from 1.
type Call struct {
	CallID     string
	Occurrence int
	Name       string
	Arguments  json.RawMessage
	// Refused says why the call was not run (its arguments were past
	// jsonlimit.Default); Arguments then holds them as a JSON string.
	Refused string
}

// StepOutput is one finished (or abandoned) inference.
type StepOutput struct {
	Step      int
	Model     string
	Text      string
	Reasoning string
	Calls     []Call
	Usage     usage.Tokens
	// Cost is the priced usage; PriceKnown false means unknown.
	Cost catalog.Cost
	// Partial marks an inference that did not finish.
	Partial bool
	// FirstToken, when not 0, is the time to the first token as measured
	// at the stream itself (a relayed call, relayed.go).
	FirstToken time.Duration
}

// TurnObserver follows a turn, called in order from the goroutine running
// it. An error from Started, Step, ToolStarted or ToolFinished (the journal
// refused the record) fails the turn.
type TurnObserver interface {
	Started(model string) error
	Delta(kind, text string)
	Step(s StepOutput) error
	ToolStarted(c Call) error
	ToolFinished(c Call, r tools.Result, took time.Duration) error
}

// Outcomes of a turn.
const (
	OutcomeDone      = "done"
	OutcomeCancelled = "cancelled"
	OutcomeError     = "error"
)

// TurnResult is how a turn ended. Usage sums every inference; it is a
// subtotal (TokenUsageKnown false) when any had unknown counts.
type TurnResult struct {
	Outcome string
	Output  string
	Err     error
	// Budget names the exceeded budget ("max_output_tokens" or "max_usd").
	Budget string
	Usage  usage.Tokens
	// StopReason says why a hook ended a cancelled turn (a tool result's
	// EndTurn).
	StopReason string
}

// Delta kinds passed to TurnObserver.Delta.
const (
	DeltaText      = "token"
	DeltaReasoning = "reasoning"
)

// errStopped is the cause of an inference abandoned by a Stop.
var errStopped = errors.New("stopped")

// Model returns the model a turn on Agent id would use.
func (r *Registry) Model(id string, override *string) (string, error) {
	a, err := r.actor(id)
	if err != nil {
		return "", err
	}
	if override != nil {
		return *override, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Model, nil
}

// RunTurn runs a Session turn's tool loop on Agent id: infer, run the tool
// calls the model asks for in the sandbox, feed the results back, until the
// model answers, a Stop, a budget or a failure. Turns of many Sessions run
// on one Agent at once; each one's usage counts in the Agent's report.
func (r *Registry) RunTurn(ctx context.Context, req TurnRequest, obs TurnObserver) TurnResult {
	res := TurnResult{Usage: usage.Tokens{TokenUsageKnown: true}}
	fail := func(err error) TurnResult {
		res.Outcome, res.Err = OutcomeError, err
		return res
	}
	a, err := r.actor(req.AgentID)
	if err != nil {
		return fail(err)
	}
	a.mu.Lock()
	cfg, provider := a.cfg, a.provider
	lastErr := a.lastErr
	if provider != nil {
		a.turns++
	}
	a.mu.Unlock()
	if provider == nil {
		return fail(fmt.Errorf("%w: %s: %s", ErrNotSpawned, req.AgentID, lastErr))
	}
	defer func() {
		a.mu.Lock()
		a.turns--
		if res.Err != nil && res.Budget == "" && !errors.Is(res.Err, context.Canceled) {
			a.lastErr = res.Err.Error()
		}
		a.mu.Unlock()
	}()
	model, system := cfg.Model, cfg.Prompt
	if req.Model != nil {
		model = *req.Model
	}
	if req.System != nil {
		system = *req.System
	}
	maxSteps := req.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	if err := obs.Started(model); err != nil {
		return fail(err)
	}
	messages := append(append([]llm.Message(nil), req.History...), llm.Message{Role: llm.RoleUser, Text: req.Input})
	// The loop dispatches only a tool it advertised: a model may name any
	// tool, and a name outside this set (a tool another Agent has, one of
	// a server closed to this Agent, any tool when none is offered) is an
	// unknown tool that reaches no Toolbox, so no sandbox, server, hook or
	// approval.
	var advertised []llm.Tool
	if req.Tools != nil {
		advertised = req.Tools.Tools()
	}
	offered := make(map[string]bool, len(advertised))
	for _, t := range advertised {
		offered[t.Name] = true
	}
	seen := req.Occurrences // call ID → uses in this turn
	if seen == nil {
		seen = map[string]int{}
	}
	sp := newSpend(cfg.Budget)
	for step := 1; ; step++ {
		if Stopped(req.Stop) {
			res.Outcome = OutcomeCancelled
			return res
		}
		if step > maxSteps {
			return fail(fmt.Errorf("the turn reached its limit of %d model steps", maxSteps))
		}
		out, err := r.infer(ctx, inference{
			actor: a, provider: provider, priceAs: cfg.Provider,
			req:  llm.Request{Model: model, System: system, Messages: messages, Tools: advertised},
			stop: req.Stop, stall: req.StallTimeout, delta: obs.Delta,
		}, sp)
		out.Step = step
		for i := range out.Calls {
			seen[out.Calls[i].CallID]++
			out.Calls[i].Occurrence = seen[out.Calls[i].CallID]
		}
		res.Usage = sp.usage
		if obsErr := obs.Step(out.StepOutput); obsErr != nil {
			return fail(obsErr)
		}
		switch {
		case errors.Is(err, errStopped):
			res.Outcome = OutcomeCancelled
			return res
		case err != nil:
			res.Budget = out.budget
			return fail(err)
		}
		if len(out.Calls) == 0 {
			if err := finalAnswer(out); err != nil {
				return fail(err)
			}
			res.Outcome, res.Output = OutcomeDone, out.Text
			return res
		}
		assistant := llm.Message{Role: llm.RoleAssistant, Text: out.Text}
		for _, c := range out.Calls {
			args := c.Arguments
			if c.Refused != "" {
				args = json.RawMessage("{}")
			}
			assistant.ToolCalls = append(assistant.ToolCalls, llm.ToolCall{ID: c.CallID, Name: c.Name, Arguments: args})
		}
		messages = append(messages, assistant)
		for _, c := range out.Calls {
			if Stopped(req.Stop) {
				res.Outcome = OutcomeCancelled
				return res
			}
			if err := obs.ToolStarted(c); err != nil {
				return fail(err)
			}
			t0 := time.Now()
			var result tools.Result
			switch {
			case !offered[c.Name]:
				result = tools.Result{Output: "unknown tool: " + c.Name, IsError: true}
			case c.Refused != "":
				result = tools.Result{Output: c.Refused, IsError: true}
			default:
				// A Stop lets a started tool finish: its context is the turn's,
				// not the Stop's.
				result = req.Tools.Call(withCall(ctx, c), c.Name, c.Arguments)
			}
			if err := obs.ToolFinished(c, result, time.Since(t0)); err != nil {
				return fail(err)
			}
			if req.FinishOn != "" && c.Name == req.FinishOn {
				if result.IsError {
					return fail(errors.New(result.Output))
				}
				res.Outcome, res.Output = OutcomeDone, result.Output
				return res
			}
			messages = append(messages, llm.Message{Role: llm.RoleTool, ToolCallID: c.CallID, Text: result.Output, IsError: result.IsError})
			if result.EndTurn != "" {
				// A hook ended the turn: the step's other calls do not run.
				res.Outcome, res.StopReason = OutcomeCancelled, result.EndTurn
				return res
			}
		}
	}
}

// Stopped reports whether a Stop was asked for on stop.
func Stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
