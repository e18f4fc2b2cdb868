package agentrun

import (
	"bytes"
	"encoding/json"
	"strings"

	"lathe/projections"
)

// Bounds of the transcript a hook reads (transcript_path).
const (
	// MaxTranscript bounds the whole file: the lines past it are left out.
	MaxTranscript = 1 << 20
	// MaxTranscriptText bounds one text or tool result in it.
	MaxTranscriptText = 64 << 10
)

// transcriptLine is one line of a hook's transcript, in the shape of
// Claude Code's transcript files (JSON Lines): a user or assistant message
// whose content is text or content blocks (text, tool_use, tool_result).
type transcriptLine struct {
	Type      string         `json:"type"`
	SessionID string         `json:"sessionId"`
	Message   transcriptTurn `json:"message"`
}

type transcriptTurn struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type transcriptBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// hookTranscript is turn t so far as a transcript a hook can read: its
// prompt, then each finished inference's text and calls, and each call's
// result once it has one. Offloaded content reads as its preview.
func hookTranscript(t projections.Turn) []byte {
	var b bytes.Buffer
	add := func(role string, content any) bool {
		line, err := json.Marshal(transcriptLine{Type: role, SessionID: t.SessionID, Message: transcriptTurn{Role: role, Content: content}})
		if err != nil || b.Len()+len(line)+1 > MaxTranscript {
			return false
		}
		b.Write(line)
		b.WriteByte('\n')
		return true
	}
	if !add("user", clipText(t.Input.String())) {
		return b.Bytes()
	}
	for _, st := range t.Steps {
		if st.Partial {
			continue
		}
		var blocks []transcriptBlock
		if text := st.Text.String(); text != "" {
			blocks = append(blocks, transcriptBlock{Type: "text", Text: clipText(text)})
		}
		for _, c := range st.ToolCalls {
			input := json.RawMessage(c.Arguments.Value())
			if !json.Valid(input) || len(input) > MaxTranscriptText {
				input = json.RawMessage(`{}`)
			}
			blocks = append(blocks, transcriptBlock{Type: "tool_use", ID: c.CallID, Name: c.Name, Input: input})
		}
		if len(blocks) == 0 {
			continue
		}
		if !add("assistant", blocks) {
			return b.Bytes()
		}
		var results []transcriptBlock
		for _, c := range st.ToolCalls {
			for _, tc := range t.ToolCalls {
				if tc.CallID == c.CallID && tc.Occurrence == c.Occurrence && (t.Lattice == nil || tc.Agent == st.Agent) && tc.Finished {
					results = append(results, transcriptBlock{Type: "tool_result", ToolUseID: c.CallID, Content: clipText(tc.Result.String()), IsError: tc.IsError})
				}
			}
		}
		if len(results) > 0 && !add("user", results) {
			return b.Bytes()
		}
	}
	return b.Bytes()
}

func clipText(s string) string {
	if len(s) <= MaxTranscriptText {
		return s
	}
	return strings.ToValidUTF8(s[:MaxTranscriptText], "") + "\n[… truncated …]"
}
