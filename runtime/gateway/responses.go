package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// The OpenAI Responses wire: POST /v1/responses, stateless (store: false,
// the whole conversation in input, as Codex sends it).
var responsesWire = wire{parse: parseResponses, writeErr: openAIError, newStream: newResponsesStream, reply: responsesReply}

type rsRequest struct {
	Model        string          `json:"model"`
	Instructions string          `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Tools        []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"tools"`
	MaxOutputTokens int `json:"max_output_tokens"`
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Stream             bool   `json:"stream"`
	PreviousResponseID string `json:"previous_response_id"`
}

type rsInItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// parseResponses translates a Responses request. Reasoning items the agent
// sends back are dropped; tools other than function tools (web search,
// custom, local shell) are dropped; a previous_response_id is refused, since
// the gateway keeps no responses.
func parseResponses(body []byte) (call, error) {
	var in rsRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return call{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if in.PreviousResponseID != "" {
		return call{}, fmt.Errorf("%w: previous_response_id: the gateway keeps no responses; send the whole conversation in input", ErrBadRequest)
	}
	req := llm.Request{Model: in.Model, System: in.Instructions, MaxOutputTokens: max(in.MaxOutputTokens, 0)}
	if in.Reasoning != nil {
		req.ThinkingBudget = effortBudget(in.Reasoning.Effort)
	}
	var items []rsInItem
	if len(in.Input) > 0 && in.Input[0] == '"' {
		var s string
		if err := json.Unmarshal(in.Input, &s); err != nil {
			return call{}, fmt.Errorf("%w: input: %v", ErrBadRequest, err)
		}
		items = []rsInItem{{Type: "message", Role: "user", Content: in.Input}}
	} else if len(in.Input) > 0 {
		if err := json.Unmarshal(in.Input, &items); err != nil {
			return call{}, fmt.Errorf("%w: input: want a string or a list of items: %v", ErrBadRequest, err)
		}
	}
	for i, it := range items {
		what := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "message", "":
			t, err := text(it.Content, what+".content")
			if err != nil {
				return call{}, err
			}
			switch it.Role {
			case "system", "developer":
				req.System = join(req.System, t)
			case "user":
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Text: t})
			case "assistant":
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Text: t})
			default:
				return call{}, fmt.Errorf("%w: %s: role %q", ErrBadRequest, what, it.Role)
			}
		case "function_call":
			a, err := args(it.Arguments, what)
			if err != nil {
				return call{}, err
			}
			tc := llm.ToolCall{ID: it.CallID, Name: it.Name, Arguments: a}
			// Calls that follow an assistant message (or each other) are its calls.
			if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == llm.RoleAssistant {
				req.Messages[n-1].ToolCalls = append(req.Messages[n-1].ToolCalls, tc)
			} else {
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{tc}})
			}
		case "function_call_output":
			t, err := text(it.Output, what+".output")
			if err != nil {
				return call{}, err
			}
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Text: t, ToolCallID: it.CallID})
		case "reasoning":
		default:
			return call{}, fmt.Errorf("%w: %s: item of type %q is not supported by the gateway", ErrBadRequest, what, it.Type)
		}
	}
	for _, t := range in.Tools {
		if t.Type == "function" && t.Name != "" {
			req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Description, Schema: t.Parameters})
		}
	}
	if req.ThinkingBudget > 0 && inToolLoop(req.Messages) {
		req.ThinkingBudget = 0 // as parseAnthropic: no thinking block to give back
	}
	return call{req: req, stream: in.Stream}, nil
}

type rsUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func rsUsageOf(u usage.Tokens) *rsUsage {
	r := &rsUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
	r.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	return r
}

type rsText struct {
	Type        string `json:"type"` // output_text or summary_text
	Text        string `json:"text"`
	Annotations *[]any `json:"annotations,omitempty"`
}

func outputText(s string) rsText { return rsText{Type: "output_text", Text: s, Annotations: &[]any{}} }

// rsItem is an output item: a message, a reasoning summary or a function
// call; the fields of the other kinds are omitted.
type rsItem struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Status    string    `json:"status,omitempty"`
	Role      string    `json:"role,omitempty"`
	Content   *[]rsText `json:"content,omitempty"`
	Summary   *[]rsText `json:"summary,omitempty"`
	CallID    string    `json:"call_id,omitempty"`
	Name      string    `json:"name,omitempty"`
	Arguments *string   `json:"arguments,omitempty"`
}

type rsResponse struct {
	ID                string    `json:"id"`
	Object            string    `json:"object"`
	CreatedAt         int64     `json:"created_at"`
	Status            string    `json:"status"`
	Error             *rsFault  `json:"error"`
	IncompleteDetails *rsReason `json:"incomplete_details"`
	Model             string    `json:"model"`
	Output            []rsItem  `json:"output"`
	Usage             *rsUsage  `json:"usage"`
}

type rsFault struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type rsReason struct {
	Reason string `json:"reason"`
}

type rsEvent struct {
	Type           string      `json:"type"`
	SequenceNumber int         `json:"sequence_number"`
	Response       *rsResponse `json:"response,omitempty"`
	OutputIndex    *int        `json:"output_index,omitempty"`
	ItemID         string      `json:"item_id,omitempty"`
	ContentIndex   *int        `json:"content_index,omitempty"`
	SummaryIndex   *int        `json:"summary_index,omitempty"`
	Item           *rsItem     `json:"item,omitempty"`
	Part           *rsText     `json:"part,omitempty"`
	Delta          *string     `json:"delta,omitempty"`
	Text           *string     `json:"text,omitempty"`
	Arguments      *string     `json:"arguments,omitempty"`
}

// finish fills the final status of r for stop.
func (r *rsResponse) finish(stop llm.StopReason, u usage.Tokens) {
	r.Status, r.Usage = "completed", rsUsageOf(u)
	if stop == llm.StopMaxTokens {
		r.Status, r.IncompleteDetails = "incomplete", &rsReason{Reason: "max_output_tokens"}
	}
}

// rsStream writes a Responses SSE reply.
type rsStream struct {
	s     *sse
	resp  rsResponse
	seq   int
	open  int // output index of the open message or reasoning item, or -1
	text  strings.Builder
	calls map[int]int // tool call index to output index
	usage usage.Tokens
}

func newResponsesStream(s *sse, c call) encoder {
	e := &rsStream{s: s, open: -1, calls: map[int]int{},
		resp: rsResponse{ID: newID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
			Model: c.req.Model, Output: []rsItem{}}}
	e.send(rsEvent{Type: "response.created", Response: ptr(e.resp)})
	e.send(rsEvent{Type: "response.in_progress", Response: ptr(e.resp)})
	return e
}

func (e *rsStream) send(ev rsEvent) {
	ev.SequenceNumber = e.seq
	e.seq++
	e.s.send(ev.Type, ev)
}

// add appends an output item and announces it.
func (e *rsStream) add(it rsItem) int {
	e.resp.Output = append(e.resp.Output, it)
	i := len(e.resp.Output) - 1
	e.send(rsEvent{Type: "response.output_item.added", OutputIndex: ptr(i), Item: ptr(it)})
	return i
}

func (e *rsStream) closeOpen() {
	if e.open < 0 {
		return
	}
	i, it, s := e.open, &e.resp.Output[e.open], e.text.String()
	if it.Type == "message" {
		part := outputText(s)
		it.Status, it.Content = "completed", &[]rsText{part}
		e.send(rsEvent{Type: "response.output_text.done", ItemID: it.ID, OutputIndex: ptr(i), ContentIndex: ptr(0), Text: &s})
		e.send(rsEvent{Type: "response.content_part.done", ItemID: it.ID, OutputIndex: ptr(i), ContentIndex: ptr(0), Part: &part})
	} else {
		part := rsText{Type: "summary_text", Text: s}
		it.Summary = &[]rsText{part}
		e.send(rsEvent{Type: "response.reasoning_summary_text.done", ItemID: it.ID, OutputIndex: ptr(i), SummaryIndex: ptr(0), Text: &s})
		e.send(rsEvent{Type: "response.reasoning_summary_part.done", ItemID: it.ID, OutputIndex: ptr(i), SummaryIndex: ptr(0), Part: &part})
	}
	e.send(rsEvent{Type: "response.output_item.done", OutputIndex: ptr(i), Item: ptr(*it)})
	e.open = -1
	e.text.Reset()
}

func (e *rsStream) event(ev llm.Event) {
	switch ev := ev.(type) {
	case llm.TextDelta:
		if e.open < 0 || e.resp.Output[e.open].Type != "message" {
			e.closeOpen()
			e.open = e.add(rsItem{ID: newID("msg_"), Type: "message", Status: "in_progress", Role: "assistant", Content: &[]rsText{}})
			e.send(rsEvent{Type: "response.content_part.added", ItemID: e.resp.Output[e.open].ID, OutputIndex: ptr(e.open),
				ContentIndex: ptr(0), Part: ptr(outputText(""))})
		}
		e.text.WriteString(ev.Text)
		e.send(rsEvent{Type: "response.output_text.delta", ItemID: e.resp.Output[e.open].ID, OutputIndex: ptr(e.open),
			ContentIndex: ptr(0), Delta: ptr(ev.Text)})
	case llm.ReasoningDelta:
		if e.open < 0 || e.resp.Output[e.open].Type != "reasoning" {
			e.closeOpen()
			e.open = e.add(rsItem{ID: newID("rs_"), Type: "reasoning", Summary: &[]rsText{}})
			e.send(rsEvent{Type: "response.reasoning_summary_part.added", ItemID: e.resp.Output[e.open].ID, OutputIndex: ptr(e.open),
				SummaryIndex: ptr(0), Part: &rsText{Type: "summary_text"}})
		}
		e.text.WriteString(ev.Text)
		e.send(rsEvent{Type: "response.reasoning_summary_text.delta", ItemID: e.resp.Output[e.open].ID, OutputIndex: ptr(e.open),
			SummaryIndex: ptr(0), Delta: ptr(ev.Text)})
	case llm.ToolCallStart:
		e.closeOpen()
		e.calls[ev.Index] = e.add(rsItem{ID: newID("fc_"), Type: "function_call", Status: "in_progress", CallID: ev.ID,
			Name: ev.Name, Arguments: ptr("")})
	case llm.ToolCallArgsDelta:
		if i, ok := e.calls[ev.Index]; ok {
			e.send(rsEvent{Type: "response.function_call_arguments.delta", ItemID: e.resp.Output[i].ID, OutputIndex: ptr(i), Delta: ptr(ev.Delta)})
		}
	case llm.ToolCallEnd:
		if i, ok := e.calls[ev.Index]; ok {
			it := &e.resp.Output[i]
			it.Status, it.Arguments = "completed", ptr(string(ev.Arguments))
			e.send(rsEvent{Type: "response.function_call_arguments.done", ItemID: it.ID, OutputIndex: ptr(i), Arguments: it.Arguments})
			e.send(rsEvent{Type: "response.output_item.done", OutputIndex: ptr(i), Item: ptr(*it)})
		}
	case llm.Usage:
		e.usage = ev.Tokens
	case llm.Done:
		e.closeOpen()
		e.resp.finish(ev.StopReason, e.usage)
		typ := "response.completed"
		if e.resp.Status == "incomplete" {
			typ = "response.incomplete"
		}
		e.send(rsEvent{Type: typ, Response: ptr(e.resp)})
	}
}

func (e *rsStream) fail(status int, msg string) {
	e.resp.Status = "failed"
	code := "server_error"
	if c := oaErrorOf(status, msg).Code; c != nil {
		code = *c
	}
	e.resp.Error = &rsFault{Code: code, Message: msg}
	e.send(rsEvent{Type: "response.failed", Response: ptr(e.resp)})
}

func responsesReply(w http.ResponseWriter, c call, a answer) {
	r := rsResponse{ID: newID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Model: c.req.Model, Output: []rsItem{}}
	if a.reasoning != "" {
		r.Output = append(r.Output, rsItem{ID: newID("rs_"), Type: "reasoning", Summary: &[]rsText{{Type: "summary_text", Text: a.reasoning}}})
	}
	if a.text != "" {
		r.Output = append(r.Output, rsItem{ID: newID("msg_"), Type: "message", Status: "completed", Role: "assistant",
			Content: &[]rsText{outputText(a.text)}})
	}
	for _, tc := range a.calls {
		r.Output = append(r.Output, rsItem{ID: newID("fc_"), Type: "function_call", Status: "completed", CallID: tc.ID,
			Name: tc.Name, Arguments: ptr(string(tc.Arguments))})
	}
	r.finish(a.stop, a.usage)
	writeJSON(w, http.StatusOK, r)
}
