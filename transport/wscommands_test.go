package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gobwas/ws"
)

// TestWSCommandFields: a /ws command's fields are decoded by the strict
// decoder's rules, as an HTTP body's are. Names match exactly, so a field
// spelled in another letter case cannot stand in for the one named (with a
// case-insensitive match the last of "id" and "ID" would win), and a field
// of the wrong type is an error frame that names it.
func TestWSCommandFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		call string // the command the fake saw; "" for none
		args []any
		err  string // in the error frame; "" for none
	}{
		{name: "session-stop", raw: `{"cmd":"session-stop","id":"S","turn_id":"T1"}`, call: "StopTurn", args: []any{"S", "T1"}},
		{name: "session-stop, id in another case too", raw: `{"cmd":"session-stop","id":"S","ID":"X","turn_id":"T1"}`, call: "StopTurn", args: []any{"S", "T1"}},
		{name: "session-stop, only ID", raw: `{"cmd":"session-stop","ID":"S","turn_id":"T1"}`, err: `"id" and "turn_id" are required`},
		{name: "session-stop, id a number", raw: `{"cmd":"session-stop","id":7,"turn_id":"T1"}`, err: `malformed session-stop command: field "id" must be a string, not number`},
		{name: "mcp-approve, approval_id in another case too", raw: `{"cmd":"mcp-approve","approval_id":"A","Approval_ID":"B","decision":"allow","persist":"once"}`,
			call: "Resolve", args: []any{"A", "allow", "once"}},
		{name: "mcp-approve, decision a list", raw: `{"cmd":"mcp-approve","approval_id":"A","decision":["allow"]}`, err: `malformed mcp-approve command: field "decision" must be a string, not array`},
		{name: "session, a reference not a list", raw: `{"cmd":"session","id":"S","context_references":{}}`, err: `malformed session command: field "context_references" must be an array, not object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{}
			h := &handlers{
				live:      &turnLiveRoutes{cmds: f, accepts: newAcceptPool()},
				approvals: &approvalRoutes{cmds: f},
			}
			hub := NewHub(HubOptions{Snapshot: func(context.Context) ([]byte, Cursor, error) { return nil, Cursor{}, nil }})
			for _, c := range h.wsCommands() {
				hub.Handle(c.Name, c.Handle)
			}
			c := &Client{hub: hub, queue: make(chan queuedFrame, hubSendBuffer), gone: make(chan struct{})}
			hub.add(c)
			hub.dispatch(context.Background(), c, []byte(tc.raw))

			if f.call != tc.call || (tc.call != "" && !reflect.DeepEqual(f.args, tc.args)) {
				t.Errorf("call %s%v, want %s%v", f.call, f.args, tc.call, tc.args)
			}
			var errs []string
			for len(c.queue) > 0 {
				fr, err := ws.ReadFrame(bytes.NewReader((<-c.queue).wire))
				var reply struct{ Kind, Message string }
				if err != nil || json.Unmarshal(fr.Payload, &reply) != nil {
					t.Fatalf("reply %q: %v", fr.Payload, err)
				}
				if reply.Kind == "error" {
					errs = append(errs, reply.Message)
				}
			}
			switch {
			case tc.err == "" && len(errs) > 0:
				t.Errorf("error frames %q", errs)
			case tc.err != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.err)):
				t.Errorf("error frames %q, want one with %q", errs, tc.err)
			}
		})
	}
}
