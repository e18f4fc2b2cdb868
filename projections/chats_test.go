package projections

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// applyAll folds payloads (aggregate id, payload pairs) in order.
func applyAll(t *testing.T, s *Store, evs ...any) {
	t.Helper()
	var recs []journal.Record
	seq := s.Seq()
	for i := 0; i+1 < len(evs); i += 2 {
		seq++
		p := evs[i+1].(events.Payload)
		recs = append(recs, journal.Record{Envelope: journal.Envelope{Seq: seq, ID: fmt.Sprint(seq), Type: p.EventType(), Aggregate: p.Aggregate(),
			AggregateID: evs[i].(string), At: time.Date(2026, 1, 1, 0, 0, int(seq), 0, time.UTC)}, Payload: p})
	}
	if err := s.Apply(recs); err != nil {
		t.Fatal(err)
	}
}

// A shared file is retained once a turn used it: a Chat turn that put its
// text in the context, or a Session turn whose context references cite it.
// An attached file no turn used is not.
func TestSharedFileRetention(t *testing.T) {
	s := New()
	applyAll(t, s,
		"W", events.WorkspaceRegistered{Path: "/w", Name: "w"},
		"S", events.SessionCreated{WorkspaceID: "W", Name: "s", WorkingDir: "/w", Mode: events.Mode{Kind: events.ModeSingleAgent, AgentID: "a"}},
		"F1", events.SharedFileStored{Name: "a.txt", SHA256: "1"},
		"F2", events.SharedFileStored{Name: "b.txt", SHA256: "2"},
		"F3", events.SharedFileStored{Name: "c.txt", SHA256: "3"},
		"C", events.ChatCreated{AgentID: "a", Name: "c"},
		"C", events.ChatFileAttached{FileID: "F1"},
		"C", events.ChatFileAttached{FileID: "F3"},
		"C", events.ChatTurnStarted{TurnID: "T", MessageID: "M", Content: events.NewText("q"), Files: []string{"F1"}},
		"S", events.TurnAccepted{TurnID: "U", IdempotencyKey: "U", AgentID: "a", Input: events.NewText("x"),
			ContextReferences: []events.JSON{events.NewJSON(json.RawMessage(`{"kind":"file","file_id":"F2"}`))}},
	)
	for id, want := range map[string]bool{"F1": true, "F2": true, "F3": false} {
		if f, _ := s.SharedFile(id); f.Retained != want {
			t.Errorf("%s retained %v, want %v", id, f.Retained, want)
		}
	}
	// The unpinned file the turn used is consumed; the other is not.
	c, _ := s.Chat("C")
	if !c.Attachments[0].Consumed || c.Attachments[1].Consumed {
		t.Errorf("attachments after the turn: %+v", c.Attachments)
	}
}

// Search is literal and ignores case, over names and message text; the
// list leaves messages out, starred first; a fork copies the messages
// before its point and the original keeps its own.
func TestChatSearchAndFork(t *testing.T) {
	s := New()
	starred := true
	applyAll(t, s,
		"A", events.ChatCreated{AgentID: "a", Name: "Release Notes"},
		"A", events.ChatMessageAdded{MessageID: "1", Role: events.RoleUser, Content: events.NewText("What is (x+1)*2?")},
		"A", events.ChatMessageAdded{MessageID: "2", Role: events.RoleAssistant, Content: events.NewText("Twice X PLUS two")},
		"B", events.ChatCreated{AgentID: "a", Name: "other"},
		"B", events.ChatPatched{Starred: &starred},
		"F", events.ChatCreated{AgentID: "a", Name: "fork", ForkOf: &events.ChatFork{ChatID: "A", TruncateAt: 1}},
		"F", events.ChatMessageAdded{MessageID: "3", Role: events.RoleUser, Content: events.NewText("What is x?")},
	)
	for q, want := range map[string]string{"release": "A", "(X+1)*2": "F A", "x plus": "A", "": "B F A", "what is": "F A", "nope": ""} {
		var got string
		for _, c := range s.Chats(q) {
			got += " " + c.ID
		}
		if want != "" {
			want = " " + want
		}
		if got != want {
			t.Errorf("search %q: %q, want %q", q, got, want)
		}
	}
	a, _ := s.Chat("A")
	f, _ := s.Chat("F")
	if len(a.Messages) != 2 || len(f.Messages) != 2 || f.Messages[0].Content.String() != "What is (x+1)*2?" || f.Messages[1].Content.String() != "What is x?" {
		t.Errorf("after the fork: original %+v, fork %+v", a.Messages, f.Messages)
	}
}

// A search over enough Chats to be split across cores finds exactly what
// a scan of each finds.
func TestChatSearchOfManyChats(t *testing.T) {
	s := New()
	var evs []any
	want := 0
	for i := range parallelSearch + 500 {
		id := fmt.Sprintf("C%05d", i)
		text := "nothing here"
		if i%7 == 0 {
			text, want = "a NeedLe in it", want+1
		}
		evs = append(evs, id, events.ChatCreated{AgentID: "a", Name: id}, id, events.ChatMessageAdded{MessageID: "m", Role: events.RoleUser, Content: events.NewText(text)})
	}
	applyAll(t, s, evs...)
	if got := len(s.Chats("needle")); got != want {
		t.Fatalf("found %d, want %d", got, want)
	}
	if got := len(s.Chats("")); got != parallelSearch+500 {
		t.Fatalf("listed %d", got)
	}
	if got := s.Chats("no such"); got == nil || len(got) != 0 {
		t.Fatalf("an empty search: %#v", got)
	}
}

// containsAt, which looks for the query's rarest byte first, answers what
// bytes.Contains answers, whatever the text and query.
func FuzzContainsAt(f *testing.F) {
	for _, seed := range [][2]string{{"hello world", "world"}, {"qqq", "qq"}, {"abc", "abcd"}, {"", "x"}, {"x", ""}, {"zebra quartz", "a q"}, {"ünï", "nï"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, hay, needle string) {
		if got, want := containsAt([]byte(hay), []byte(needle), rarest(needle)), strings.Contains(hay, needle); got != want {
			t.Fatalf("containsAt(%q, %q) = %v, want %v", hay, needle, got, want)
		}
	})
}

// A user message names the files its turn took, and a fork keeps them and
// its source's attachments: consumed only where a message it kept used
// them, so a fork from before that turn offers the file again.
func TestChatForkKeepsAttachments(t *testing.T) {
	for _, tc := range []struct {
		name       string
		truncateAt int
		consumed   bool // F1's one-turn attachment in the fork
		files      []string
	}{
		{name: "after the turn that used it", truncateAt: 2, consumed: true, files: []string{"F1"}},
		{name: "before that turn", truncateAt: 1, consumed: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			pinned := true
			applyAll(t, s,
				"F1", events.SharedFileStored{Name: "a.py", SHA256: "1"},
				"F2", events.SharedFileStored{Name: "b.txt", SHA256: "2"},
				"A", events.ChatCreated{AgentID: "a", Name: "src"},
				"A", events.ChatMessageAdded{MessageID: "0", Role: events.RoleUser, Content: events.NewText("hello")},
				"A", events.ChatFileAttached{FileID: "F1"},
				"A", events.ChatFileAttached{FileID: "F2", Pinned: pinned},
				"A", events.ChatTurnStarted{TurnID: "T", MessageID: "M", Content: events.NewText("read them"), Files: []string{"F1", "F2"}},
				"A", events.ChatTurnEnded{TurnID: "T", Outcome: events.ChatDone, MessageID: "R", Content: events.NewText("read")},
				"F", events.ChatCreated{AgentID: "a", Name: "fork", ForkOf: &events.ChatFork{ChatID: "A", TruncateAt: tc.truncateAt}},
			)
			a, _ := s.Chat("A")
			if got := a.Messages[1].Files; !slices.Equal(got, []string{"F1", "F2"}) {
				t.Errorf("the user message's files: %v", got)
			}
			f, _ := s.Chat("F")
			if len(f.Attachments) != 2 || f.Attachments[0].FileID != "F1" || f.Attachments[1].FileID != "F2" || !f.Attachments[1].Pinned {
				t.Fatalf("the fork's attachments: %+v", f.Attachments)
			}
			if f.Attachments[0].Consumed != tc.consumed {
				t.Errorf("F1 consumed in the fork: %v, want %v", f.Attachments[0].Consumed, tc.consumed)
			}
			if tc.files != nil && !slices.Equal(f.Messages[1].Files, []string{"F1", "F2"}) {
				t.Errorf("the fork's copy of the message: %+v", f.Messages[1])
			}
			for _, id := range []string{"F1", "F2"} {
				if sf, _ := s.SharedFile(id); !slices.Contains(sf.Chats, "F") {
					t.Errorf("%s lists Chats %v, without the fork", id, sf.Chats)
				}
			}
		})
	}
}
