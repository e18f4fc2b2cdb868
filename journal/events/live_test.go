package events

import (
	"strings"
	"testing"
)

// TestLiveDeltaKnownKind: the live subscription keeps the kinds it makes
// frames of, a Chat step only with the Chat and the fields its frame needs,
// and drops every other.
func TestLiveDeltaKnownKind(t *testing.T) {
	tool, end := &ChatTool{CallID: "k", Name: "n"}, &ChatEnd{Outcome: ChatDone}
	for _, c := range []struct {
		d    LiveDelta
		want bool
	}{
		{LiveDelta{Session: "S", Kind: DeltaToken}, true},
		{LiveDelta{Session: "S", Kind: DeltaReasoning}, true},
		{LiveDelta{Session: "S", Kind: DeltaCheckout}, true},
		{LiveDelta{Session: "S", Kind: "tool"}, false},
		{LiveDelta{Chat: "C", Kind: DeltaChatStart}, true},
		{LiveDelta{Chat: "C", Kind: DeltaChatToken}, true},
		{LiveDelta{Chat: "C", Kind: DeltaChatReasoning}, true},
		{LiveDelta{Session: "S", Kind: DeltaChatToken}, false},
		{LiveDelta{Chat: "C", Kind: DeltaChatToolStart, Tool: tool}, true},
		{LiveDelta{Chat: "C", Kind: DeltaChatToolResult, Tool: tool}, true},
		{LiveDelta{Chat: "C", Kind: DeltaChatToolStart}, false},
		{LiveDelta{Chat: "C", Kind: DeltaChatEnd, ChatEnd: end}, true},
		{LiveDelta{Chat: "C", Kind: DeltaChatEnd}, false},
		{LiveDelta{Chat: "C", Kind: DeltaChatEnd + "x", ChatEnd: end}, false},
	} {
		if got := c.d.KnownKind(); got != c.want {
			t.Errorf("%+v: KnownKind %v, want %v", c.d, got, c.want)
		}
	}
	if s := ChatLiveSubject("C"); !strings.HasPrefix(s, strings.TrimSuffix(LiveSubjectAll, ">")) || s == LiveSubject("C") {
		t.Errorf("ChatLiveSubject %q: not a live subject of its own", s)
	}
}
