package events

func init() {
	register[ApprovalRequested]()
	register[ApprovalResolved]()
	register[PermissionsRevoked]()
}

// Aggregates of the MCP approvals.
const (
	// Approval is one parked MCP tool call, by its approval ID.
	Approval = "approval"
	// Permissions is the singleton aggregate of the saved decisions' revocations.
	Permissions = "mcp-permissions"
)

// PermissionsID is the ID of the one Permissions aggregate.
const PermissionsID = "permissions"

// Approval decisions. Allow and Deny are an operator's; Cancelled (the turn
// was stopped) and Expired (its run ended without a decision, as at a
// restart) close an approval nobody decided.
const (
	DecisionAllow     = "allow"
	DecisionDeny      = "deny"
	DecisionCancelled = "cancelled"
	DecisionExpired   = "expired"
)

// How long a decision lasts: once, or saved for this Agent and tool, this
// Agent and every tool of the server, or every Agent and the server.
const (
	PersistOnce           = "once"
	PersistAgentTool      = "agent_tool"
	PersistAgentServer    = "agent_server"
	PersistAnyAgentServer = "any_agent_server"
)

// ApprovalRequested: an MCP tool call is parked until an operator decides.
// Run, Session and TurnID name the run that made it, when one did (an
// Automation's call may have none); ArgumentsPreview is bounded.
type ApprovalRequested struct {
	Run              string `json:"run,omitempty"`
	Session          string `json:"session,omitempty"`
	TurnID           string `json:"turn_id,omitempty"`
	AgentID          string `json:"agent_id"`
	Server           string `json:"server"`
	Tool             string `json:"tool"`
	ToolDisplay      string `json:"tool_display"`
	ArgumentsPreview string `json:"arguments_preview"`
}

// ApprovalResolved: the parked call was decided. A Persist other than once
// saves the decision for the calls it covers, until revoked.
type ApprovalResolved struct {
	Decision string `json:"decision"`
	Persist  string `json:"persist,omitempty"`
}

// PermissionsRevoked: an operator revoked the saved decisions for Server
// that match AgentID and Tool (an empty filter matches every value).
type PermissionsRevoked struct {
	Server  string `json:"server"`
	AgentID string `json:"agent_id,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Count   int    `json:"count"`
}

func (ApprovalRequested) EventType() string  { return "approval-requested" }
func (ApprovalResolved) EventType() string   { return "approval-resolved" }
func (PermissionsRevoked) EventType() string { return "mcp-permissions-revoked" }

func (ApprovalRequested) Aggregate() string  { return Approval }
func (ApprovalResolved) Aggregate() string   { return Approval }
func (PermissionsRevoked) Aggregate() string { return Permissions }
