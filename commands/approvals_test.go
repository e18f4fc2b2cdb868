package commands

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/commands/approvals"
	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/polltest"
)

// parked starts Park in the background and waits until its approval is
// pending; it returns the approval and the channel Park answers on.
func parked(t *testing.T, s *approvals.Approvals, store *projections.Store, ctx context.Context, req core.ApprovalRequest) (projections.Approval, chan string) {
	t.Helper()
	before := len(store.PendingApprovals())
	out := make(chan string, 1)
	go func() {
		d, err := s.Park(ctx, req)
		if err != nil {
			t.Errorf("Park: %v", err)
		}
		out <- d
	}()
	var p []projections.Approval
	polltest.Until(t, "the call to be parked", func() bool {
		p = store.PendingApprovals()
		return len(p) > before
	}, polltest.Within(10*time.Second))
	return p[len(p)-1], out
}

func answer(t *testing.T, out chan string) string {
	t.Helper()
	select {
	case d := <-out:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("Park never answered")
		return ""
	}
}

func TestApprovals(t *testing.T) {
	svc, store := newTaskService(t)
	s := svc.Approvals
	ctx := context.Background()
	call := func(agent, tool string) core.ApprovalRequest {
		return core.ApprovalRequest{Run: "S1", Session: "S1", TurnID: "t1", AgentID: agent, Server: "fs", Tool: tool, Arguments: json.RawMessage(`{ "path" : "a.txt" }`)}
	}

	// Parked until an allow is durable; the pending approval is in the
	// snapshot meanwhile.
	a, out := parked(t, s, store, ctx, call("coder", "read_file"))
	if a.AgentID != "coder" || a.Server != "fs" || a.Tool != "read_file" || a.ArgumentsPreview != `{"path":"a.txt"}` || a.ToolDisplay == "" || a.Run != "S1" {
		t.Errorf("pending approval = %+v", a)
	}
	if snap := store.Snapshot(); len(snap.Approvals) != 1 || snap.Approvals[0].ApprovalID != a.ApprovalID {
		t.Errorf("snapshot approvals = %+v", snap.Approvals)
	}
	for _, bad := range [][2]string{{"maybe", "once"}, {"allow", "forever"}, {"", ""}} {
		if err := s.Resolve(ctx, a.ApprovalID, bad[0], bad[1]); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("Resolve(%q, %q) = %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
	if err := s.Resolve(ctx, a.ApprovalID, "allow", "once"); err != nil {
		t.Fatal(err)
	}
	if d := answer(t, out); d != "allow" {
		t.Errorf("Park answered %q", d)
	}
	if err := s.Resolve(ctx, a.ApprovalID, "deny", "once"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("resolving a resolved approval: %v", err)
	}
	if len(store.Permissions()) != 0 {
		t.Errorf("a once decision was saved: %+v", store.Permissions())
	}

	// A saved deny for this Agent and tool denies without asking, and
	// never covers another Agent.
	a, out = parked(t, s, store, ctx, call("coder", "write_file"))
	if err := s.Resolve(ctx, a.ApprovalID, "deny", "agent_tool"); err != nil {
		t.Fatal(err)
	}
	answer(t, out)
	seq := svc.Turns.Journal.Last()
	if d, err := s.Park(ctx, call("coder", "write_file")); err != nil || d != "deny" {
		t.Errorf("a call a saved deny covers: %q, %v", d, err)
	}
	if svc.Turns.Journal.Last() != seq {
		t.Error("a call a saved decision covers was parked anyway")
	}
	a, out = parked(t, s, store, ctx, call("reviewer", "write_file"))
	// every Agent and this server: it covers the reviewer from now on.
	if err := s.Resolve(ctx, a.ApprovalID, "allow", "any_agent_server"); err != nil {
		t.Fatal(err)
	}
	answer(t, out)
	if d, _ := s.Park(ctx, call("reviewer", "list")); d != "allow" {
		t.Errorf("a call an any_agent_server allow covers: %q", d)
	}
	// The most specific decision wins: coder's write_file stays denied.
	if d, _ := s.Park(ctx, call("coder", "write_file")); d != "deny" {
		t.Errorf("coder's write_file: %q, want its own saved deny", d)
	}
	if got := store.Permissions(); len(got) != 2 {
		t.Errorf("permissions = %+v", got)
	}

	// Revocation by filters.
	if n, err := s.Revoke(ctx, "fs", "coder", ""); err != nil || n != 1 {
		t.Errorf("Revoke(fs, coder) = %d, %v", n, err)
	}
	if n, _ := s.Revoke(ctx, "fs", "coder", ""); n != 0 {
		t.Errorf("a second revoke revoked %d", n)
	}
	if _, err := s.Revoke(ctx, "", "", ""); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("a revoke without server: %v", err)
	}
	if p, ok := store.SavedDecision("coder", "fs", "write_file"); !ok || p.Scope != "any_agent_server" || p.Decision != "allow" {
		t.Errorf("after revoking coder's: %+v %v", p, ok)
	}

	// Two operators racing on one ID: exactly one decision is recorded.
	// (Server git: no saved decision covers it.)
	git := func(agent, tool string) core.ApprovalRequest { r := call(agent, tool); r.Server = "git"; return r }
	a, out = parked(t, s, store, ctx, git("coder", "search"))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Resolve(ctx, a.ApprovalID, []string{"allow", "deny"}[i%2], "once") })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, core.ErrNotFound):
			t.Errorf("a losing racer: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d decisions won the race", won)
	}
	answer(t, out)

	// A stopped turn cancels its parked call.
	stop, cancel := context.WithCancel(ctx)
	a, out = parked(t, s, store, stop, git("coder", "move"))
	cancel()
	if d := answer(t, out); d != "cancelled" {
		t.Errorf("Park after Stop answered %q", d)
	}
	if _, ok := store.PendingApproval(a.ApprovalID); ok {
		t.Error("a cancelled approval is still pending")
	}

	// At a restart, approvals whose run was interrupted expire; one no run
	// made stays actionable.
	_, _ = parked(t, s, store, context.Background(), git("coder", "stat"))
	orphan := git("coder", "tree")
	orphan.Run, orphan.Session, orphan.TurnID = "", "", ""
	kept, _ := parked(t, s, store, context.Background(), orphan)
	if err := s.ExpireInterrupted(ctx); err != nil {
		t.Fatal(err)
	}
	if p := store.PendingApprovals(); len(p) != 1 || p[0].ApprovalID != kept.ApprovalID {
		t.Errorf("pending after expiry = %+v", p)
	}
	expired := 0
	_ = svc.Turns.Journal.Scan(ctx, 0, 0, func(_ uint64, raw []byte) error {
		if strings.Contains(string(raw), `"decision":"`+events.DecisionExpired+`"`) {
			expired++
		}
		return nil
	})
	if expired != 1 {
		t.Errorf("%d expired resolutions, want 1", expired)
	}
}

func TestPreviewIsBounded(t *testing.T) {
	long := json.RawMessage(`{"text":"` + strings.Repeat("é", 2000) + `"}`)
	p := approvals.ArgumentsPreview(long)
	if len(p) > approvals.PreviewBytes+len("…") || !strings.HasSuffix(p, "…") || !utf8Valid(p) {
		t.Errorf("preview of %d bytes: %d bytes", len(long), len(p))
	}
	if p := approvals.ArgumentsPreview(json.RawMessage(`not json`)); p != "not json" {
		t.Errorf("preview of malformed arguments: %q", p)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
