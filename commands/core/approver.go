package core

import (
	"context"
	"encoding/json"
)

// Approver parks a tool call that needs a decision until it has one: a
// saved decision at once, or an operator's allow or deny once durable
// (Approvals). Any run's tools reach it through the core, not knowing the
// approvals' own state.
type Approver interface {
	Park(ctx context.Context, req ApprovalRequest) (decision string, err error)
}

// ApprovalRequest is one MCP tool call that may need a decision.
type ApprovalRequest struct {
	// Run, Session and TurnID name the run making the call; all empty for
	// a call no run makes.
	Run, Session, TurnID string
	AgentID, Server      string
	Tool                 string
	Arguments            json.RawMessage
	// Reason is why the call is asked about, when a hook asked
	// (permissionDecisionReason); the prompt shows it.
	Reason string
}

// ParkOrStop is a.Park whose wait a Stop (stop closed) ends too: the
// approval then resolves as cancelled.
func ParkOrStop(ctx context.Context, a Approver, req ApprovalRequest, stop <-chan struct{}) (string, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-pctx.Done():
		}
	}()
	return a.Park(pctx, req)
}
