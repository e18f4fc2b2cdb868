package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"lathe/runtime/jsonlimit"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gobwas/ws"
)

// FuzzHubDispatch feeds arbitrary /ws command frames, nested ones among
// them, to the hub's decoding (issue 23): it never panics, and each frame
// has exactly one outcome — a registered command runs once with a frame
// that is a JSON object within the nesting bound and with no key twice, or
// one reply (pong or error) is queued, itself valid JSON.
func FuzzHubDispatch(f *testing.F) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, seed := range []string{
		`{"cmd":"ping"}`,
		`{"cmd":"echo","input":"x"}`,
		`{"cmd":"echo","context_references":[{"a":{"b":[1,{"c":null}]}}]}`,
		`{"cmd":"echo","input":` + deep(jsonlimit.MaxDepth-1) + `}`,
		`{"cmd":"echo","input":` + deep(jsonlimit.MaxDepth+1) + `}`,
		`{"cmd":"echo","x":{"k":1,"k":2}}`,
		`{"cmd":"echo","cmd":"ping"}`,
		`{"cmd":{"nested":"echo"}}`,
		`{"cmd":"nope"}`,
		`[{"cmd":"echo"}]`,
		`{"cmd":"echo","s":"\ud800"}`,
		``,
		`{"cmd":"echo"} {"cmd":"echo"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		h := NewHub(HubOptions{Snapshot: func(context.Context) ([]byte, Cursor, error) { return nil, Cursor{}, nil }})
		ran := 0
		h.Handle("echo", func(_ context.Context, _ *Client, got json.RawMessage) {
			ran++
			if !jsontext.Value(got).IsValid() || jsonlimit.Check(got, jsonlimit.Limits{Depth: jsonlimit.MaxDepth}) != nil {
				t.Fatalf("the command ran with %q", got)
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(got, &obj) != nil {
				t.Fatalf("the command ran with a frame that is no object: %q", got)
			}
		})
		c := &Client{hub: h, queue: make(chan queuedFrame, hubSendBuffer), gone: make(chan struct{})}
		h.add(c)
		h.dispatch(context.Background(), c, raw)
		replies := len(c.queue)
		if ran+replies != 1 {
			t.Fatalf("%q: the command ran %d times and %d replies were queued; want one outcome", raw, ran, replies)
		}
		if replies == 1 {
			if reply, err := ws.ReadFrame(bytes.NewReader((<-c.queue).wire)); err != nil || !json.Valid(reply.Payload) {
				t.Fatalf("reply %q (%v) is not a JSON text frame", reply.Payload, err)
			}
		}
	})
}
