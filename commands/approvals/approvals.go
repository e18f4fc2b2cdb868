package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
)

// Approvals parks MCP tool calls until an operator decides, resolves them,
// and revokes saved decisions. Every step is an event: approval-requested,
// approval-resolved (allow, deny, cancelled or expired; a persist other than
// once saves the decision), mcp-permissions-revoked. The projection folds the
// pending approvals and the saved decisions from them; a parked call is
// dispatched only after its allow is durable.
type Approvals struct {
	*core.Core
	waiters *approvalWaiters
}

// approvalWaiters wakes the parked calls when their approval resolves.
type approvalWaiters struct {
	mu sync.Mutex
	ch map[string]chan string
}

func (w *approvalWaiters) add(id string) chan string {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := make(chan string, 1)
	w.ch[id] = c
	return c
}

func (w *approvalWaiters) done(id, decision string) {
	w.mu.Lock()
	c := w.ch[id]
	delete(w.ch, id)
	w.mu.Unlock()
	if c != nil {
		c <- decision
	}
}

// PreviewBytes bounds an approval's arguments preview; ReasonBytes the
// reason a hook gave for asking, shown in its tool_display.
const (
	PreviewBytes = 1024
	ReasonBytes  = 256
)

// Park decides whether a call may go to its server. A saved decision
// answers at once; otherwise the call is parked (approval-requested, which
// every client sees) until an operator's allow or deny is durable. When ctx
// ends first (the turn was stopped), the approval resolves as cancelled
// and Park answers DecisionCancelled.
func (s *Approvals) Park(ctx context.Context, req core.ApprovalRequest) (string, error) {
	if p, ok := s.Store.SavedDecision(req.AgentID, req.Server, req.Tool); ok {
		return p.Decision, nil
	}
	id := ulid.Make().String()
	wait := s.waiters.add(id)
	display := req.Tool + " on " + req.Server
	if r := strings.TrimSpace(req.Reason); r != "" {
		display += ": " + clipRunes(r, ReasonBytes)
	}
	ev := events.ApprovalRequested{Run: req.Run, Session: req.Session, TurnID: req.TurnID, AgentID: req.AgentID,
		Server: req.Server, Tool: req.Tool, ToolDisplay: display, ArgumentsPreview: ArgumentsPreview(req.Arguments)}
	if err := s.Append(ctx, []journal.Event{events.New(id, ev)}, journal.Expectation{AggregateID: id, Version: 0}); err != nil {
		s.waiters.done(id, "")
		return "", err
	}
	select {
	case d := <-wait:
		return d, nil
	case <-ctx.Done():
		err := s.resolve(context.WithoutCancel(ctx), id, events.ApprovalResolved{Decision: events.DecisionCancelled})
		if errors.Is(err, core.ErrNotFound) {
			// An operator's decision won the race: it stands.
			return <-wait, nil
		}
		return events.DecisionCancelled, err
	}
}

// ArgumentsPreview renders arguments compactly, cut at previewBytes.
func ArgumentsPreview(args json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, args); err != nil {
		b.Reset()
		b.Write(args)
	}
	return clipRunes(b.String(), PreviewBytes)
}

// clipRunes cuts s at max bytes, on a rune boundary, marked with "…".
func clipRunes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Resolve records an operator's decision on a pending approval: decision
// allow or deny, persist once, agent_tool, agent_server or any_agent_server.
// An unknown or already resolved ID is ErrNotFound; of two operators racing
// on one ID, exactly one decision is recorded and the other is ErrNotFound.
func (s *Approvals) Resolve(ctx context.Context, id, decision, persist string) error {
	switch decision {
	case events.DecisionAllow, events.DecisionDeny:
	default:
		return fmt.Errorf("%w: decision must be %q or %q, not %q", core.ErrInvalid, events.DecisionAllow, events.DecisionDeny, decision)
	}
	switch persist {
	case events.PersistOnce, events.PersistAgentTool, events.PersistAgentServer, events.PersistAnyAgentServer:
	default:
		return fmt.Errorf("%w: persist must be one of once, agent_tool, agent_server, any_agent_server, not %q", core.ErrInvalid, persist)
	}
	return s.resolve(ctx, id, events.ApprovalResolved{Decision: decision, Persist: persist})
}

func (s *Approvals) resolve(ctx context.Context, id string, ev events.ApprovalResolved) error {
	a, ok := s.Store.PendingApproval(id)
	if !ok {
		return fmt.Errorf("%w: approval %q is unknown or already resolved", core.ErrNotFound, id)
	}
	err := s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(id, ev)}, journal.Expectation{AggregateID: id, Version: a.Version})
	if errors.Is(err, core.ErrConflict) {
		return fmt.Errorf("%w: approval %q was resolved meanwhile", core.ErrNotFound, id)
	}
	if err != nil {
		return err
	}
	s.waiters.done(id, ev.Decision)
	return nil
}

// Revoke revokes the saved decisions for server that match agentID and
// tool (empty filters match every value) and answers how many it revoked.
func (s *Approvals) Revoke(ctx context.Context, server, agentID, tool string) (int, error) {
	if server == "" {
		return 0, fmt.Errorf("%w: server is required", core.ErrInvalid)
	}
	var n int
	err := s.Retry(ctx, func() error {
		n = s.Store.CountPermissions(server, agentID, tool)
		if n == 0 {
			return nil
		}
		v, _ := s.Journal.Version(events.PermissionsID)
		return s.AppendExpecting(ctx, events.PermissionsID, v, events.PermissionsRevoked{Server: server, AgentID: agentID, Tool: tool, Count: n})
	})
	return n, err
}

// ExpireInterrupted resolves, at start, every pending approval whose run
// the stop interrupted: its turn ended, so nobody waits for the decision.
// An approval no run made stays pending and actionable.
func (s *Approvals) ExpireInterrupted(ctx context.Context) error {
	for _, a := range s.Store.PendingApprovals() {
		if a.Run == "" {
			continue
		}
		if err := s.resolve(ctx, a.ApprovalID, events.ApprovalResolved{Decision: events.DecisionExpired}); err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
	}
	return nil
}

// NewApprovals returns the approvals of c and makes them its Approver.
func NewApprovals(c *core.Core) *Approvals {
	a := &Approvals{Core: c, waiters: &approvalWaiters{ch: map[string]chan string{}}}
	c.Approver = a
	return a
}
