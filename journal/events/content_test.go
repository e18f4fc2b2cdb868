package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lathe/journal/events"
	"lathe/runtime/blobs"
)

func blobStore(t *testing.T) *blobs.Store {
	t.Helper()
	s, err := blobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func encode(t *testing.T, p events.Payload) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Journals written before content fields existed hold plain strings and
// raw JSON; they decode to the same values, and small content still
// encodes exactly as it did.
func TestContentDecodesOldEventsAndEncodesSmallOnesUnchanged(t *testing.T) {
	for _, tc := range []struct{ typ, data string }{
		{"turn-accepted", `{"turn_id":"t1","idempotency_key":"t1","agent_id":"coder","input":"hi","display_input":"hello","context_references":[{"kind":"file","path":"a.go"}],"source":"ws"}`},
		{"turn-output", `{"turn_id":"t1","agent":"coder","step":1,"text":"Writing","reasoning":"plan","tool_calls":[{"call_id":"c1","occurrence":1,"name":"shell","arguments":{"command":"ls"}}]}`},
		{"turn-output", `{"turn_id":"t1","agent":"coder","step":2,"text":""}`},
		{"tool-call-started", `{"turn_id":"t1","agent":"coder","call_id":"c1","occurrence":1,"name":"shell","arguments":"not json"}`},
		{"tool-call-finished", `{"turn_id":"t1","agent":"coder","call_id":"c1","occurrence":1,"name":"shell","result":"a.txt\n","is_error":false,"duration_ms":3}`},
		{"turn-done", `{"turn_id":"t1","output":"done","totals":{"input_tokens":1,"output_tokens":2,"reasoning_tokens":0,"token_usage_known":true}}`},
	} {
		p, err := events.Decode(tc.typ, []byte(tc.data))
		if err != nil {
			t.Fatalf("decode %s: %v", tc.typ, err)
		}
		if got := string(encode(t, p)); got != tc.data {
			t.Errorf("%s re-encodes as\n%s\nwant\n%s", tc.typ, got, tc.data)
		}
	}
	p, _ := events.Decode("turn-output", []byte(`{"turn_id":"t1","agent":"coder","step":1,"text":"Writing","tool_calls":[{"call_id":"c1","occurrence":1,"name":"shell","arguments":{"command":"ls"}}]}`))
	out := p.(events.TurnOutput)
	if out.Text.String() != "Writing" || out.Text.Stored() || string(out.ToolCalls[0].Arguments.Value()) != `{"command":"ls"}` {
		t.Errorf("decoded %+v", out)
	}
}

func TestOffloadKeepsEventsSmallAndResolvesWhole(t *testing.T) {
	bs := blobStore(t)
	big := strings.Repeat("é output line\n", 800_000) // ~12 MB, two-byte runes
	args := json.RawMessage(`{"content":"` + strings.Repeat("x", 200<<10) + `"}`)
	small := json.RawMessage(`{"command":"ls"}`)
	in := events.TurnOutput{TurnID: "t1", Agent: "coder", Step: 1, Text: events.NewText(big), Reasoning: events.NewText("short"),
		ToolCalls: []events.StepCall{{CallID: "c1", Occurrence: 1, Name: "write", Arguments: events.NewJSON(args)},
			{CallID: "c2", Occurrence: 1, Name: "shell", Arguments: events.NewJSON(small)}}}
	p, err := events.Offload(in, bs)
	if err != nil {
		t.Fatal(err)
	}
	out := p.(events.TurnOutput)
	if in.ToolCalls[0].Arguments.Stored() || in.Text.Stored() {
		t.Fatal("Offload changed its argument")
	}
	data := encode(t, out)
	if len(data) > 8<<10 {
		t.Fatalf("offloaded event is %d bytes", len(data))
	}
	if !out.Text.Stored() || out.Reasoning.Stored() || !out.ToolCalls[0].Arguments.Stored() || out.ToolCalls[1].Arguments.Stored() {
		t.Fatalf("stored: text %v reasoning %v args %v %v", out.Text.Stored(), out.Reasoning.Stored(),
			out.ToolCalls[0].Arguments.Stored(), out.ToolCalls[1].Arguments.Stored())
	}
	ref := out.Text.Blob
	if ref.Size != int64(len(big)) || len(ref.Preview) > events.PreviewMax || !strings.HasPrefix(big, ref.Preview) || !bs.Has(ref.SHA256) {
		t.Fatalf("reference %d bytes, preview %d bytes", ref.Size, len(ref.Preview))
	}
	// The reference survives the journal's round trip and resolves whole.
	back, err := events.Decode("turn-output", data)
	if err != nil {
		t.Fatal(err)
	}
	got := back.(events.TurnOutput)
	text, err := got.Text.Resolve(bs)
	if err != nil || text.Inline != big || text.Stored() {
		t.Fatalf("resolved text: %d bytes, %v", len(text.Inline), err)
	}
	a, err := got.ToolCalls[0].Arguments.Resolve(bs)
	if err != nil || string(a.Value()) != string(args) {
		t.Fatalf("resolved arguments: %d bytes, %v", len(a.Inline), err)
	}
	if string(got.ToolCalls[1].Arguments.Value()) != string(small) {
		t.Errorf("small arguments = %s", got.ToolCalls[1].Arguments.Value())
	}
	// Unreadable content stays a reference and says so.
	if _, err := got.Text.Resolve(nil); !errors.Is(err, events.ErrUnresolved) {
		t.Errorf("resolve without a reader: %v", err)
	}
	if _, err := got.Text.Resolve(blobStore(t)); !errors.Is(err, events.ErrUnresolved) {
		t.Errorf("resolve from an empty store: %v", err)
	}
}

// Many mid-sized fields, each under InlineMax, must not add up to a large
// event: past MaxInlineEvent every field longer than a preview goes out.
func TestOffloadBoundsTheWholeEvent(t *testing.T) {
	bs := blobStore(t)
	var calls []events.StepCall
	for i := range 40 {
		calls = append(calls, events.StepCall{CallID: "c", Occurrence: i + 1, Name: "write",
			Arguments: events.NewJSON(json.RawMessage(`"` + strings.Repeat("y", 60<<10) + `"`))})
	}
	p, err := events.Offload(events.TurnOutput{TurnID: "t1", Agent: "coder", Step: 1, ToolCalls: calls}, bs)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(encode(t, p)); n > events.MaxInlineEvent {
		t.Fatalf("event is %d bytes after offload", n)
	}
}

// An inline JSON value that looks like a reference is offloaded, so a
// decoder never mistakes it for one.
func TestOffloadEscapesLookalikeReferences(t *testing.T) {
	bs := blobStore(t)
	fake := json.RawMessage(`{"$blob":{"sha256":"0000000000000000000000000000000000000000000000000000000000000000","size":1,"preview":"x"}}`)
	p, err := events.Offload(events.ToolCallStarted{TurnID: "t1", CallID: "c1", Occurrence: 1, Name: "n", Arguments: events.NewJSON(fake)}, bs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := events.Decode("tool-call-started", encode(t, p))
	if err != nil {
		t.Fatal(err)
	}
	a, err := back.(events.ToolCallStarted).Arguments.Resolve(bs)
	if err != nil || string(a.Value()) != string(fake) {
		t.Fatalf("arguments = %s, %v", a.Value(), err)
	}
}

func TestOffloadWithoutAStoreChangesNothing(t *testing.T) {
	in := events.TurnDone{TurnID: "t1", Output: events.NewText(strings.Repeat("z", 1<<20))}
	p, err := events.Offload(in, nil)
	if err != nil || p.(events.TurnDone).Output.Stored() {
		t.Fatalf("Offload(nil) = %v", err)
	}
}

// Only the live delta kinds the projection frames are known: a delta of
// any other kind (an outside publish, say) is dropped (issue 23, finding 4).
func TestLiveDeltaKnownKind(t *testing.T) {
	for kind, want := range map[string]bool{events.DeltaToken: true, events.DeltaReasoning: true, "": false, "error": false, "turn-done": false} {
		if got := (events.LiveDelta{Kind: kind}).KnownKind(); got != want {
			t.Errorf("KnownKind(%q) = %v, want %v", kind, got, want)
		}
	}
}
