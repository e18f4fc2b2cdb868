package fakellm

import (
	"fmt"
	"strings"
)

// OpenAI Responses wire types. An output item is one of rsMessage,
// rsReasoning and rsFunctionCall.

type rsResponse struct {
	ID                string    `json:"id"`
	Object            string    `json:"object"`
	CreatedAt         int64     `json:"created_at"`
	Status            string    `json:"status"`
	Error             *struct{} `json:"error"`
	IncompleteDetails *struct{} `json:"incomplete_details"`
	Model             string    `json:"model"`
	Output            []any     `json:"output"`
	ParallelToolCalls bool      `json:"parallel_tool_calls"`
	ToolChoice        string    `json:"tool_choice"`
	Tools             []any     `json:"tools"`
	Usage             *rsUsage  `json:"usage"`
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

type rsText struct {
	Type        string `json:"type"` // output_text or summary_text
	Text        string `json:"text"`
	Annotations *[]any `json:"annotations,omitempty"` // output_text only
}

type rsMessage struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"`
	Status  string   `json:"status"`
	Role    string   `json:"role"`
	Content []rsText `json:"content"`
}

type rsReasoning struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"`
	Summary []rsText `json:"summary"`
}

type rsFunctionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

// rsEvent is every streaming event; unused fields are omitted.
type rsEvent struct {
	Type           string  `json:"type"`
	SequenceNumber int     `json:"sequence_number"`
	Response       any     `json:"response,omitempty"`
	OutputIndex    *int    `json:"output_index,omitempty"`
	ItemID         string  `json:"item_id,omitempty"`
	ContentIndex   *int    `json:"content_index,omitempty"`
	SummaryIndex   *int    `json:"summary_index,omitempty"`
	Item           any     `json:"item,omitempty"`
	Part           any     `json:"part,omitempty"`
	Delta          *string `json:"delta,omitempty"`
	Text           *string `json:"text,omitempty"`
	Arguments      *string `json:"arguments,omitempty"`
	Logprobs       []any   `json:"logprobs,omitempty"`
}

func rsUsageOf(st Step) *rsUsage {
	u := &rsUsage{InputTokens: st.In, OutputTokens: st.Out, TotalTokens: st.In + st.Out}
	u.OutputTokensDetails.ReasoningTokens = st.Reasoning
	return u
}

// rsPlay plays the Turn's steps as Responses events through emit and returns
// the output items, or false when a stall ended with the client gone. A
// streaming play writes Malformed and Drop as events; a non-streaming one
// hands them to spoil.
func (p *player) rsPlay(emit func(rsEvent), spoil func(Kind)) ([]any, bool) {
	var out []any
	var text strings.Builder
	open := "" // type of the open item: message, reasoning, or ""
	idx := func() *int { return ptr(len(out) - 1) }
	itemID := func(prefix string) string { return fmt.Sprintf("%s_fakellm_%d_%d", prefix, p.seq, len(out)) }
	closeItem := func() {
		switch open {
		case "message":
			m := out[len(out)-1].(rsMessage)
			s := text.String()
			part := rsText{Type: "output_text", Text: s, Annotations: &[]any{}}
			m.Status, m.Content = "completed", []rsText{part}
			out[len(out)-1] = m
			emit(rsEvent{Type: "response.output_text.done", ItemID: m.ID, OutputIndex: idx(), ContentIndex: ptr(0), Text: &s, Logprobs: []any{}})
			emit(rsEvent{Type: "response.content_part.done", ItemID: m.ID, OutputIndex: idx(), ContentIndex: ptr(0), Part: part})
			emit(rsEvent{Type: "response.output_item.done", OutputIndex: idx(), Item: m})
		case "reasoning":
			r := out[len(out)-1].(rsReasoning)
			s := text.String()
			part := rsText{Type: "summary_text", Text: s}
			r.Summary = []rsText{part}
			out[len(out)-1] = r
			emit(rsEvent{Type: "response.reasoning_summary_text.done", ItemID: r.ID, OutputIndex: idx(), SummaryIndex: ptr(0), Text: &s})
			emit(rsEvent{Type: "response.reasoning_summary_part.done", ItemID: r.ID, OutputIndex: idx(), SummaryIndex: ptr(0), Part: part})
			emit(rsEvent{Type: "response.output_item.done", OutputIndex: idx(), Item: r})
		}
		open = ""
		text.Reset()
	}
	for _, st := range p.turn.Steps {
		switch st.Kind {
		case KindText:
			if open != "message" {
				closeItem()
				m := rsMessage{ID: itemID("msg"), Type: "message", Status: "in_progress", Role: "assistant", Content: []rsText{}}
				out = append(out, m)
				open = "message"
				emit(rsEvent{Type: "response.output_item.added", OutputIndex: idx(), Item: m})
				emit(rsEvent{Type: "response.content_part.added", ItemID: m.ID, OutputIndex: idx(), ContentIndex: ptr(0),
					Part: rsText{Type: "output_text", Text: "", Annotations: &[]any{}}})
			}
			d := st.delta()
			text.WriteString(d)
			emit(rsEvent{Type: "response.output_text.delta", ItemID: out[len(out)-1].(rsMessage).ID, OutputIndex: idx(),
				ContentIndex: ptr(0), Delta: &d, Logprobs: []any{}})
		case KindReasoning:
			if open != "reasoning" {
				closeItem()
				r := rsReasoning{ID: itemID("rs"), Type: "reasoning", Summary: []rsText{}}
				out = append(out, r)
				open = "reasoning"
				emit(rsEvent{Type: "response.output_item.added", OutputIndex: idx(), Item: r})
				emit(rsEvent{Type: "response.reasoning_summary_part.added", ItemID: r.ID, OutputIndex: idx(), SummaryIndex: ptr(0),
					Part: rsText{Type: "summary_text", Text: ""}})
			}
			d := st.delta()
			text.WriteString(d)
			emit(rsEvent{Type: "response.reasoning_summary_text.delta", ItemID: out[len(out)-1].(rsReasoning).ID, OutputIndex: idx(),
				SummaryIndex: ptr(0), Delta: &d})
		case KindToolCall:
			closeItem()
			fc := rsFunctionCall{ID: itemID("fc"), Type: "function_call", Status: "in_progress", CallID: st.ID, Name: st.Name}
			out = append(out, fc)
			emit(rsEvent{Type: "response.output_item.added", OutputIndex: idx(), Item: fc})
			for _, a := range st.ArgsChunks {
				emit(rsEvent{Type: "response.function_call_arguments.delta", ItemID: fc.ID, OutputIndex: idx(), Delta: ptr(a)})
			}
			fc.Arguments, fc.Status = strings.Join(st.ArgsChunks, ""), "completed"
			out[len(out)-1] = fc
			emit(rsEvent{Type: "response.function_call_arguments.done", ItemID: fc.ID, OutputIndex: idx(), Arguments: ptr(fc.Arguments)})
			emit(rsEvent{Type: "response.output_item.done", OutputIndex: idx(), Item: fc})
		case KindStall:
			if !p.stall(st) {
				return nil, false
			}
		case KindMalformed, KindDrop:
			spoil(st.Kind)
		}
	}
	closeItem()
	if out == nil {
		out = []any{}
	}
	return out, true
}

func (p *player) rsResponse(status string, output []any) rsResponse {
	r := rsResponse{ID: fmt.Sprintf("resp_fakellm_%d", p.seq), Object: "response", CreatedAt: Created, Status: status,
		Model: p.model, Output: output, ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{}}
	if st, ok := p.usage(); ok && status == "completed" {
		r.Usage = rsUsageOf(st)
	}
	return r
}

// responsesStream plays the Turn as a Responses SSE stream.
func (p *player) responsesStream() {
	p.startSSE()
	seq := 0
	emit := func(e rsEvent) {
		e.SequenceNumber = seq
		seq++
		fmt.Fprintf(p.w, "event: %s\ndata: %s\n\n", e.Type, marshal(e))
		p.flush()
	}
	emit(rsEvent{Type: "response.created", Response: p.rsResponse("in_progress", []any{})})
	emit(rsEvent{Type: "response.in_progress", Response: p.rsResponse("in_progress", []any{})})
	out, ok := p.rsPlay(emit, func(k Kind) {
		if k == KindDrop {
			p.drop()
		}
		fmt.Fprintf(p.w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"delta\":\"\n\n", seq)
		p.flush()
	})
	if !ok {
		return
	}
	emit(rsEvent{Type: "response.completed", Response: p.rsResponse("completed", out)})
}

// responsesComplete plays the Turn as one response object. Stall delays
// it; Malformed and Drop spoil it.
func (p *player) responsesComplete() {
	p.w.Header().Set("Content-Type", "application/json")
	spoiled := false
	out, ok := p.rsPlay(func(rsEvent) {}, func(k Kind) {
		if spoiled {
			return
		}
		spoiled = true
		p.w.WriteHeader(200)
		fmt.Fprintf(p.w, "{\"id\":\"resp_fakellm_%d\",\"object\":\"response\",\"output\":[", p.seq)
		if k == KindDrop {
			p.drop()
		}
	})
	if !ok || spoiled {
		return
	}
	writeJSON(p.w, p.rsResponse("completed", out))
}
