package fakellm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI Chat Completions wire types, in the field order the real API uses.

type oaChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []oaChoice      `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

type oaChoice struct {
	Index        int       `json:"index"`
	Delta        oaDelta   `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type oaDelta struct {
	Role             string            `json:"role,omitempty"`
	Content          *string           `json:"content,omitempty"`
	ReasoningContent *string           `json:"reasoning_content,omitempty"`
	Reasoning        *string           `json:"reasoning,omitempty"`
	ToolCalls        []oaToolCallDelta `json:"tool_calls,omitempty"`
}

type oaToolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function oaFunc `json:"function"`
}

type oaFunc struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type oaUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	TotalTokens             int `json:"total_tokens"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func oaUsageOf(st Step) oaUsage {
	u := oaUsage{PromptTokens: st.In, CompletionTokens: st.Out, TotalTokens: st.In + st.Out}
	u.CompletionTokensDetails.ReasoningTokens = st.Reasoning
	return u
}

func (p *player) oaID() string { return fmt.Sprintf("chatcmpl-fakellm-%d", p.seq) }

func (p *player) finishReason() string {
	if p.hasToolCall() {
		return "tool_calls"
	}
	return "stop"
}

func ptr[T any](v T) *T { return &v }

// openAIStream plays the Turn as a chat.completion.chunk SSE stream.
func (p *player) openAIStream(includeUsage bool) {
	p.startSSE()
	var nullUsage json.RawMessage
	if includeUsage {
		nullUsage = json.RawMessage("null")
	}
	send := func(d oaDelta, finish *string) {
		c := oaChunk{ID: p.oaID(), Object: "chat.completion.chunk", Created: Created, Model: p.model,
			SystemFingerprint: "fp_fakellm", Usage: nullUsage,
			Choices: []oaChoice{{Index: 0, Delta: d, FinishReason: finish}}}
		fmt.Fprintf(p.w, "data: %s\n\n", marshal(c))
		p.flush()
	}
	send(oaDelta{Role: "assistant", Content: ptr("")}, nil)
	tool := 0
	for _, st := range p.turn.Steps {
		switch st.Kind {
		case KindText:
			send(oaDelta{Content: ptr(st.delta())}, nil)
		case KindReasoning:
			if p.turn.ReasoningKey == "reasoning" {
				send(oaDelta{Reasoning: ptr(st.delta())}, nil)
			} else {
				send(oaDelta{ReasoningContent: ptr(st.delta())}, nil)
			}
		case KindToolCall:
			send(oaDelta{ToolCalls: []oaToolCallDelta{{Index: tool, ID: st.ID, Type: "function",
				Function: oaFunc{Name: st.Name}}}}, nil)
			for _, a := range st.ArgsChunks {
				send(oaDelta{ToolCalls: []oaToolCallDelta{{Index: tool, Function: oaFunc{Arguments: a}}}}, nil)
			}
			tool++
		case KindStall:
			if !p.stall(st) {
				return
			}
		case KindMalformed:
			fmt.Fprintf(p.w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\n\n", p.oaID())
			p.flush()
		case KindDrop:
			p.drop()
		}
	}
	send(oaDelta{}, ptr(p.finishReason()))
	if st, ok := p.usage(); ok && includeUsage {
		c := oaChunk{ID: p.oaID(), Object: "chat.completion.chunk", Created: Created, Model: p.model,
			SystemFingerprint: "fp_fakellm", Choices: []oaChoice{}, Usage: marshal(oaUsageOf(st))}
		fmt.Fprintf(p.w, "data: %s\n\n", marshal(c))
	}
	fmt.Fprint(p.w, "data: [DONE]\n\n")
	p.flush()
}

// openAIComplete plays the Turn as one chat.completion response. Stall
// delays it; Malformed and Drop spoil it.
func (p *player) openAIComplete() {
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function oaFunc `json:"function"`
	}
	type message struct {
		Role             string     `json:"role"`
		Content          *string    `json:"content"`
		ReasoningContent *string    `json:"reasoning_content,omitempty"`
		Reasoning        *string    `json:"reasoning,omitempty"`
		ToolCalls        []toolCall `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int       `json:"index"`
		Message      message   `json:"message"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
	}
	type completion struct {
		ID                string   `json:"id"`
		Object            string   `json:"object"`
		Created           int64    `json:"created"`
		Model             string   `json:"model"`
		SystemFingerprint string   `json:"system_fingerprint"`
		Choices           []choice `json:"choices"`
		Usage             *oaUsage `json:"usage,omitempty"`
	}
	var text, reasoning strings.Builder
	var hasText, hasReasoning bool
	msg := message{Role: "assistant"}
	for _, st := range p.turn.Steps {
		switch st.Kind {
		case KindText:
			text.WriteString(st.delta())
			hasText = true
		case KindReasoning:
			reasoning.WriteString(st.delta())
			hasReasoning = true
		case KindToolCall:
			msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: st.ID, Type: "function",
				Function: oaFunc{Name: st.Name, Arguments: strings.Join(st.ArgsChunks, "")}})
		case KindStall:
			if !p.stall(st) {
				return
			}
		case KindMalformed:
			p.w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(p.w, "{\"id\":%q,\"object\":\"chat.completion\",\"choices\":[", p.oaID())
			return
		case KindDrop:
			p.w.Header().Set("Content-Type", "application/json")
			p.w.WriteHeader(200)
			fmt.Fprintf(p.w, "{\"id\":%q,", p.oaID())
			p.drop()
		}
	}
	if hasText || len(msg.ToolCalls) == 0 {
		msg.Content = ptr(text.String())
	}
	if hasReasoning {
		if p.turn.ReasoningKey == "reasoning" {
			msg.Reasoning = ptr(reasoning.String())
		} else {
			msg.ReasoningContent = ptr(reasoning.String())
		}
	}
	out := completion{ID: p.oaID(), Object: "chat.completion", Created: Created, Model: p.model,
		SystemFingerprint: "fp_fakellm", Choices: []choice{{Index: 0, Message: msg, FinishReason: p.finishReason()}}}
	if st, ok := p.usage(); ok {
		out.Usage = ptr(oaUsageOf(st))
	}
	p.w.Header().Set("Content-Type", "application/json")
	writeJSON(p.w, out)
}
