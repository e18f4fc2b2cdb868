package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"lathe/commands/core"

	"github.com/julienschmidt/httprouter"

	"lathe/journal/events"
	"lathe/projections"
)

// The MCP approval frames, the mcp-approve /ws command and the saved
// decisions' routes (commands.Approvals).
//
//	GET    /api/mcp/permissions                     → 200 [projections.Permission…]
//	DELETE /api/mcp/permissions?server=&agent_id=&tool=
//	                                                → 200 {revoked: n}; 400 without server

// approvalRequiredFrame is mcp-approval-required: a call is parked.
type approvalRequiredFrame struct {
	Kind string `json:"kind"` // "mcp-approval-required"
	projections.Approval
}

// approvalResolvedFrame is mcp-approval-resolved: it closes the prompt in
// every client.
type approvalResolvedFrame struct {
	Kind       string `json:"kind"` // "mcp-approval-resolved"
	ApprovalID string `json:"approval_id"`
	Decision   string `json:"decision"`
}

// approvalUnknownFrame goes to the client that tried to resolve an ID that
// is not pending.
type approvalUnknownFrame struct {
	Kind       string `json:"kind"` // "mcp-approval-unknown"
	ApprovalID string `json:"approval_id"`
}

// approvalRequested and approvalResolved are the live frames of the
// approval events (liveFrames).
func approvalRequested(_ *frameSource, c projections.Change, e events.ApprovalRequested) any {
	return approvalRequiredFrame{Kind: "mcp-approval-required",
		Approval: projections.Approval{ApprovalID: c.AggregateID, ApprovalRequested: e, RequestedAt: c.At}}
}

func approvalResolved(_ *frameSource, c projections.Change, e events.ApprovalResolved) any {
	return approvalResolvedFrame{Kind: "mcp-approval-resolved", ApprovalID: c.AggregateID, Decision: e.Decision}
}

// approveCommand is the mcp-approve /ws command.
type approveCommand struct {
	ApprovalID string `json:"approval_id" required:"true" minLength:"1"`
	Decision   string `json:"decision"`
	Persist    string `json:"persist"`
}

// handleApprove resolves a pending approval. A malformed command, a bad
// decision or a bad persist is an error frame; an ID that is not pending
// (unknown, resolved, or lost in a race) is mcp-approval-unknown to this
// client only. The resolution itself reaches every client from the commit
// feed.
func (s *approvalRoutes) handleApprove(ctx context.Context, c *Client, raw json.RawMessage) {
	var cmd approveCommand
	if !decodeCommand(c, "mcp-approve", raw, &cmd) {
		return
	}
	if cmd.ApprovalID == "" {
		c.Send(ErrorFrame(`malformed mcp-approve command: "approval_id" is required`))
		return
	}
	err := s.cmds.Resolve(ctx, cmd.ApprovalID, cmd.Decision, cmd.Persist)
	switch {
	case err == nil:
	case errors.Is(err, core.ErrNotFound):
		s.sendTo(c, approvalUnknownFrame{Kind: "mcp-approval-unknown", ApprovalID: cmd.ApprovalID})
	default:
		c.Send(ErrorFrame("mcp-approve: " + errorMessage(err)))
	}
}

func (s *approvalRoutes) listPermissions(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.read.Permissions())
}

func (s *approvalRoutes) revokePermissions(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		fail(w, fmt.Errorf("%w: malformed query string: %v", core.ErrInvalid, err))
		return
	}
	n, err := s.cmds.Revoke(r.Context(), q.Get("server"), q.Get("agent_id"), q.Get("tool"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, revokedBody{Revoked: n})
}

// revokedBody is DELETE /api/mcp/permissions: how many saved decisions went.
type revokedBody struct {
	Revoked int `json:"revoked"`
}
