package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lathe/commands/core"

	"github.com/coder/websocket"
)

// nextOf reads frames until one of kind comes (event frames and the like
// pass by) and returns it.
func nextOf(t *testing.T, ctx context.Context, c *websocket.Conn, kind string) []byte {
	t.Helper()
	for {
		got, raw := readFrame(t, ctx, c)
		if got == kind {
			return raw
		}
		if strings.HasPrefix(got, "mcp-approval") {
			t.Fatalf("frame %s before %s: %s", got, kind, raw)
		}
	}
}

// An approval over /ws: the parked call reaches every client and every new
// snapshot; one operator's allow resolves it for all, the call goes on only
// then, and the loser of the race hears mcp-approval-unknown alone.
func TestMCPApprovalOverWS(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	ctx := testContext(t, 20*time.Second)
	a, b := dialWS(t, ctx, srv, nil), dialWS(t, ctx, srv, nil)
	for _, c := range []*websocket.Conn{a, b} {
		expectFrame(t, ctx, c, "ready")
		expectFrame(t, ctx, c, "snapshot")
	}

	decided := make(chan string, 1)
	go func() {
		dec, err := d.cmds.Approvals.Park(ctx, core.ApprovalRequest{Run: "R", Session: "R", TurnID: "t1", AgentID: "coder",
			Server: "fs", Tool: "write_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)})
		if err != nil {
			t.Error(err)
		}
		decided <- dec
	}()
	var req struct {
		ApprovalID       string `json:"approval_id"`
		Run, AgentID     string
		Server, Tool     string
		ArgumentsPreview string `json:"arguments_preview"`
		RequestedAt      string `json:"requested_at"`
	}
	raw := nextOf(t, ctx, a, "mcp-approval-required")
	if err := json.Unmarshal(raw, &req); err != nil || req.ApprovalID == "" || req.Server != "fs" || req.Tool != "write_file" ||
		req.ArgumentsPreview != `{"path":"a.txt"}` || req.RequestedAt == "" {
		t.Fatalf("mcp-approval-required: %s", raw)
	}
	nextOf(t, ctx, b, "mcp-approval-required")
	// A client that connects now finds it in its snapshot.
	late := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, late, "ready")
	if snap := expectFrame(t, ctx, late, "snapshot"); !strings.Contains(string(snap), `"approval_id":"`+req.ApprovalID+`"`) {
		t.Fatalf("snapshot lacks the pending approval: %s", snap)
	}
	select {
	case dec := <-decided:
		t.Fatalf("the call went on (%q) before any decision", dec)
	default:
	}

	writeText(t, ctx, a, `{"cmd":"mcp-approve","approval_id":"`+req.ApprovalID+`","decision":"sometimes","persist":"once"}`)
	if msg := nextOf(t, ctx, a, "error"); !strings.Contains(string(msg), "decision") {
		t.Errorf("a bad decision: %s", msg)
	}
	writeText(t, ctx, a, `{"cmd":"mcp-approve","approval_id":"`+req.ApprovalID+`","decision":"allow","persist":"agent_tool"}`)
	for _, c := range []*websocket.Conn{a, b, late} {
		raw := nextOf(t, ctx, c, "mcp-approval-resolved")
		if !strings.Contains(string(raw), `"decision":"allow"`) || !strings.Contains(string(raw), req.ApprovalID) {
			t.Errorf("mcp-approval-resolved: %s", raw)
		}
	}
	if dec := <-decided; dec != "allow" {
		t.Errorf("the parked call got %q", dec)
	}
	writeText(t, ctx, b, `{"cmd":"mcp-approve","approval_id":"`+req.ApprovalID+`","decision":"deny","persist":"once"}`)
	if raw := nextOf(t, ctx, b, "mcp-approval-unknown"); !strings.Contains(string(raw), req.ApprovalID) {
		t.Errorf("mcp-approval-unknown: %s", raw)
	}

	// The saved decision is listed and revocable.
	perms := call(t, srv, get, "/api/mcp/permissions", "")
	if !strings.Contains(string(perms.body), `"scope":"agent_tool"`) || !strings.Contains(string(perms.body), `"agent_id":"coder"`) {
		t.Errorf("permissions: %s", perms.body)
	}
	if r := call(t, srv, del, "/api/mcp/permissions?server=fs&tool=write_file", ""); r.status != 200 || !strings.Contains(string(r.body), `"revoked":1`) {
		t.Errorf("revoke: %d %s", r.status, r.body)
	}
	if r := call(t, srv, get, "/api/mcp/permissions", ""); strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("permissions after revoke: %s", r.body)
	}
}
