package fakellm

import (
	"encoding/json"
	"fmt"
)

// Anthropic Messages streaming wire types.

type anMessage struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []struct{}      `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        json.RawMessage `json:"usage,omitempty"`
}

type anStartUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type anBlock struct {
	Type      string           `json:"type"`
	Text      *string          `json:"text,omitempty"`
	Thinking  *string          `json:"thinking,omitempty"`
	Signature *string          `json:"signature,omitempty"`
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Input     *json.RawMessage `json:"input,omitempty"`
}

type anDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

// anEvent is every streaming event; unused fields are omitted.
type anEvent struct {
	Type         string     `json:"type"`
	Message      *anMessage `json:"message,omitempty"`
	Index        *int       `json:"index,omitempty"`
	ContentBlock *anBlock   `json:"content_block,omitempty"`
	Delta        any        `json:"delta,omitempty"`
	Usage        any        `json:"usage,omitempty"`
}

type anMessageDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// anthropicStream plays the Turn as a Messages SSE stream.
func (p *player) anthropicStream() {
	p.startSSE()
	event := func(e anEvent) {
		fmt.Fprintf(p.w, "event: %s\ndata: %s\n\n", e.Type, marshal(e))
		p.flush()
	}
	usage, hasUsage := p.usage()
	msg := anMessage{ID: fmt.Sprintf("msg_fakellm_%d", p.seq), Type: "message", Role: "assistant",
		Model: p.model, Content: []struct{}{}}
	if hasUsage {
		msg.Usage = marshal(anStartUsage{InputTokens: usage.In, OutputTokens: 1})
	}
	event(anEvent{Type: "message_start", Message: &msg})
	event(anEvent{Type: "ping"})

	index, open := -1, "" // current content block and its type
	closeBlock := func() {
		if open == "" {
			return
		}
		if open == "thinking" {
			sig := fmt.Sprintf("fakellm-signature-%d-%d", p.seq, index)
			event(anEvent{Type: "content_block_delta", Index: ptr(index),
				Delta: anDelta{Type: "signature_delta", Signature: &sig}})
		}
		event(anEvent{Type: "content_block_stop", Index: ptr(index)})
		open = ""
	}
	openBlock := func(b anBlock) {
		closeBlock()
		index++
		open = b.Type
		event(anEvent{Type: "content_block_start", Index: ptr(index), ContentBlock: &b})
	}
	delta := func(d anDelta) {
		event(anEvent{Type: "content_block_delta", Index: ptr(index), Delta: d})
	}
	for _, st := range p.turn.Steps {
		switch st.Kind {
		case KindText:
			if open != "text" {
				openBlock(anBlock{Type: "text", Text: ptr("")})
			}
			delta(anDelta{Type: "text_delta", Text: ptr(st.delta())})
		case KindReasoning:
			if open != "thinking" {
				openBlock(anBlock{Type: "thinking", Thinking: ptr(""), Signature: ptr("")})
			}
			delta(anDelta{Type: "thinking_delta", Thinking: ptr(st.delta())})
		case KindToolCall:
			openBlock(anBlock{Type: "tool_use", ID: st.ID, Name: st.Name, Input: ptr(json.RawMessage("{}"))})
			for _, a := range st.ArgsChunks {
				delta(anDelta{Type: "input_json_delta", PartialJSON: ptr(a)})
			}
			closeBlock()
		case KindStall:
			if !p.stall(st) {
				return
			}
		case KindMalformed:
			fmt.Fprintf(p.w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"text_delta\",\"text\":\"\n\n", max(index, 0))
			p.flush()
		case KindDrop:
			p.drop()
		}
	}
	closeBlock()
	stop := "end_turn"
	if p.hasToolCall() {
		stop = "tool_use"
	}
	md := anEvent{Type: "message_delta", Delta: anMessageDelta{StopReason: stop}}
	if hasUsage {
		md.Usage = map[string]int{"output_tokens": usage.Out}
	}
	event(md)
	event(anEvent{Type: "message_stop"})
}
