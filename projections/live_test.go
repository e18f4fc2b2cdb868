package projections

import (
	"reflect"
	"testing"

	"lathe/journal/events"
)

func TestCoalesceLiveDeltas(t *testing.T) {
	d := func(turn, kind, text string, n uint64) events.LiveDelta {
		return events.LiveDelta{Session: "S", TurnID: turn, Agent: "a", Kind: kind, Delta: text, N: n}
	}
	chat := func(id, kind, text string) events.LiveDelta {
		return events.LiveDelta{Chat: id, TurnID: "t", Agent: "a", Kind: kind, Delta: text}
	}
	const tok, rsn = events.DeltaToken, events.DeltaReasoning
	const start, ctok, tool, end = events.DeltaChatStart, events.DeltaChatToken, events.DeltaChatToolStart, events.DeltaChatEnd
	for _, c := range []struct {
		name     string
		in, want []events.LiveDelta
	}{
		{"one", []events.LiveDelta{d("t", tok, "a", 1)}, []events.LiveDelta{d("t", tok, "a", 1)}},
		{"adjacent merge", []events.LiveDelta{d("t", tok, "a", 1), d("t", tok, "b", 2), d("t", tok, "c", 3)},
			[]events.LiveDelta{d("t", tok, "abc", 3)}},
		{"kinds keep their order", []events.LiveDelta{d("t", rsn, "r1", 1), d("t", tok, "a", 2), d("t", rsn, "r2", 3), d("t", rsn, "r3", 4)},
			[]events.LiveDelta{d("t", rsn, "r1", 1), d("t", tok, "a", 2), d("t", rsn, "r2r3", 4)}},
		{"turns interleaved merge apart", []events.LiveDelta{d("x", tok, "1", 1), d("y", tok, "A", 1), d("x", tok, "2", 2), d("y", tok, "B", 2)},
			[]events.LiveDelta{d("x", tok, "12", 2), d("y", tok, "AB", 2)}},
		{"chat steps stay apart and in order",
			[]events.LiveDelta{chat("C", start, ""), chat("C", start, ""), chat("C", ctok, "a"), chat("C", ctok, "b"), chat("C", tool, ""), chat("C", tool, ""), chat("C", end, "")},
			[]events.LiveDelta{chat("C", start, ""), chat("C", start, ""), chat("C", ctok, "ab"), chat("C", tool, ""), chat("C", tool, ""), chat("C", end, "")}},
		{"chats of one turn id merge apart", []events.LiveDelta{chat("C", ctok, "1"), chat("D", ctok, "A"), chat("C", ctok, "2")},
			[]events.LiveDelta{chat("C", ctok, "12"), chat("D", ctok, "A")}},
	} {
		if got := coalesce(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}
