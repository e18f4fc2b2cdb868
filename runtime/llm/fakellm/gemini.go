package fakellm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Gemini generateContent wire types. The model is in the path:
// POST /v1beta/models/{model}:streamGenerateContent?alt=sse (SSE, one
// GenerateContentResponse a chunk) and :generateContent (one response).

type gmPart struct {
	Text         *string `json:"text,omitempty"`
	Thought      bool    `json:"thought,omitempty"`
	FunctionCall *gmCall `json:"functionCall,omitempty"`
}

type gmCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type gmCandidate struct {
	Content struct {
		Role  string   `json:"role"`
		Parts []gmPart `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason,omitempty"`
	Index        int    `json:"index"`
}

type gmUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount"`
	ThoughtsTokenCount   int `json:"thoughtsTokenCount,omitempty"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

type gmResponse struct {
	Candidates    []gmCandidate `json:"candidates"`
	UsageMetadata *gmUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string        `json:"modelVersion"`
	ResponseID    string        `json:"responseId"`
}

// gmUsageOf reports a usage step as Gemini counts: the candidates exclude
// the thoughts (Step.Out includes Step.Reasoning, as OpenAI counts).
func gmUsageOf(st Step) *gmUsage {
	return &gmUsage{PromptTokenCount: st.In, CandidatesTokenCount: max(st.Out-st.Reasoning, 0),
		ThoughtsTokenCount: st.Reasoning, TotalTokenCount: st.In + st.Out}
}

// geminiCall splits a Gemini model path into its model and whether the
// method streams; ok is false for a path or method fakellm does not serve.
func geminiCall(path string) (model string, stream, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		return "", false, false
	}
	model, method, _ := strings.Cut(rest, ":")
	switch method {
	case "streamGenerateContent":
		return model, true, true
	case "generateContent":
		return model, false, true
	}
	return "", false, false
}

func (p *player) gmResponse(parts []gmPart, finish string, u *gmUsage) gmResponse {
	c := gmCandidate{FinishReason: finish}
	c.Content.Role, c.Content.Parts = "model", parts
	return gmResponse{Candidates: []gmCandidate{c}, UsageMetadata: u, ModelVersion: p.model,
		ResponseID: fmt.Sprintf("fakellm-%d", p.seq)}
}

// gmPlay plays the Turn's steps as parts through emit: a delta a part, a
// tool call whole in one part (Gemini streams no partial arguments). It
// reports false when a stall ended with the client gone. A tool call whose
// arguments are not a JSON value goes to spoil, as Malformed and Drop do.
func (p *player) gmPlay(emit func(gmPart), spoil func(Kind)) bool {
	for _, st := range p.turn.Steps {
		switch st.Kind {
		case KindText:
			emit(gmPart{Text: ptr(st.delta())})
		case KindReasoning:
			emit(gmPart{Text: ptr(st.delta()), Thought: true})
		case KindToolCall:
			args := json.RawMessage(strings.Join(st.ArgsChunks, ""))
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			if !json.Valid(args) {
				spoil(KindMalformed)
				continue
			}
			emit(gmPart{FunctionCall: &gmCall{ID: st.ID, Name: st.Name, Args: args}})
		case KindStall:
			if !p.stall(st) {
				return false
			}
		case KindMalformed, KindDrop:
			spoil(st.Kind)
		}
	}
	return true
}

func (p *player) gmUsage() *gmUsage {
	if st, ok := p.usage(); ok {
		return gmUsageOf(st)
	}
	return nil
}

// geminiStream plays the Turn as a streamGenerateContent SSE stream: the
// finish reason and the usage come in the last chunk.
func (p *player) geminiStream() {
	p.startSSE()
	send := func(r gmResponse) {
		fmt.Fprintf(p.w, "data: %s\r\n\r\n", marshal(r))
		p.flush()
	}
	ok := p.gmPlay(func(part gmPart) { send(p.gmResponse([]gmPart{part}, "", nil)) }, func(k Kind) {
		if k == KindDrop {
			p.drop()
		}
		fmt.Fprint(p.w, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"\r\n\r\n")
		p.flush()
	})
	if ok {
		send(p.gmResponse([]gmPart{}, "STOP", p.gmUsage()))
	}
}

// geminiComplete plays the Turn as one generateContent response. Stall
// delays it; Malformed and Drop spoil it.
func (p *player) geminiComplete() {
	p.w.Header().Set("Content-Type", "application/json")
	parts := []gmPart{}
	spoiled := false
	ok := p.gmPlay(func(part gmPart) { parts = append(parts, part) }, func(k Kind) {
		if spoiled {
			return
		}
		spoiled = true
		p.w.WriteHeader(200)
		fmt.Fprint(p.w, `{"candidates":[{"content":{"role":"model","parts":[`)
		if k == KindDrop {
			p.drop()
		}
	})
	if !ok || spoiled {
		return
	}
	writeJSON(p.w, p.gmResponse(parts, "STOP", p.gmUsage()))
}
