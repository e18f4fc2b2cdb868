package projections

import (
	"cmp"
	"slices"
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// The MCP approvals: pending parked calls, and the saved decisions
// (permissions) that resolved approvals with a persist other than once
// left behind, until revoked.

// Approval is a pending MCP tool-call approval, as the snapshot and the
// mcp-approval-required frame show it.
type Approval struct {
	ApprovalID string `json:"approval_id"`
	events.ApprovalRequested
	RequestedAt time.Time `json:"requested_at"`
	Version     uint64    `json:"-"`
}

// Permission is one saved decision. AgentID is empty for the scope
// any_agent_server, Tool for every scope but agent_tool.
type Permission struct {
	Server    string    `json:"server"`
	AgentID   string    `json:"agent_id,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Decision  string    `json:"decision"`
	Scope     string    `json:"scope"`
	DecidedAt time.Time `json:"decided_at"`
}

func (p Permission) key() string {
	return p.Scope + "\x00" + p.Server + "\x00" + p.AgentID + "\x00" + p.Tool
}

// covers reports whether p decides a call by agent to server's tool.
func (p Permission) covers(agent, server, tool string) bool {
	switch p.Scope {
	case events.PersistAgentTool:
		return p.Server == server && p.AgentID == agent && p.Tool == tool
	case events.PersistAgentServer:
		return p.Server == server && p.AgentID == agent
	case events.PersistAnyAgentServer:
		return p.Server == server
	}
	return false
}

// matches reports whether p is revoked by the filters (empty matches all).
func (p Permission) matches(server, agent, tool string) bool {
	return p.Server == server && (agent == "" || p.AgentID == agent) && (tool == "" || p.Tool == tool)
}

// ApprovalModel is the read model of the MCP approvals: the pending ones
// and the saved decisions.
type ApprovalModel struct {
	sh          *shared
	audit       *AuditModel // an approval is in its Session's audit trail
	approvals   map[string]*Approval
	permissions map[string]*Permission // by Permission.key
}

// The approvals' and the saved decisions' events.
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error { s.ApprovalModel.fold(env, p); return nil }
	claimFor("approvals", fold,
		events.ApprovalRequested{}, events.ApprovalResolved{}, events.PermissionsRevoked{})
}

// fold applies an approval event.
func (m *ApprovalModel) fold(env journal.Envelope, p events.Payload) {
	id, at := env.AggregateID, env.At
	switch e := p.(type) {
	case events.ApprovalRequested:
		m.approvals[id] = &Approval{ApprovalID: id, ApprovalRequested: e, RequestedAt: at, Version: 1}
		m.audit.relate(e.Session, id) // in the Session's audit trail
	case events.ApprovalResolved:
		a := m.approvals[id]
		delete(m.approvals, id)
		if a == nil || e.Persist == "" || e.Persist == events.PersistOnce {
			return
		}
		perm := Permission{Server: a.Server, Decision: e.Decision, Scope: e.Persist, DecidedAt: at}
		if e.Persist != events.PersistAnyAgentServer {
			perm.AgentID = a.AgentID
		}
		if e.Persist == events.PersistAgentTool {
			perm.Tool = a.Tool
		}
		m.permissions[perm.key()] = &perm
	case events.PermissionsRevoked:
		for k, perm := range m.permissions {
			if perm.matches(e.Server, e.AgentID, e.Tool) {
				delete(m.permissions, k)
			}
		}
	}
}

// PendingApprovals lists the pending approvals, oldest first.
func (m *ApprovalModel) PendingApprovals() []Approval {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	return m.pendingLocked()
}

func (m *ApprovalModel) pendingLocked() []Approval {
	out := make([]Approval, 0, len(m.approvals))
	for _, a := range m.approvals {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b Approval) int {
		return cmp.Or(a.RequestedAt.Compare(b.RequestedAt), cmp.Compare(a.ApprovalID, b.ApprovalID))
	})
	return out
}

// PendingApproval returns one pending approval.
func (m *ApprovalModel) PendingApproval(id string) (Approval, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	a, ok := m.approvals[id]
	if !ok {
		return Approval{}, false
	}
	return *a, true
}

// Permissions lists the saved decisions, by server, scope, Agent and tool.
func (m *ApprovalModel) Permissions() []Permission {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	out := make([]Permission, 0, len(m.permissions))
	for _, p := range m.permissions {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Permission) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.AgentID, b.AgentID), cmp.Compare(a.Tool, b.Tool))
	})
	return out
}

// SavedDecision returns the saved decision that covers a call by agent to
// server's tool, the most specific first (this tool, then this server for
// this Agent, then this server for every Agent). A decision never covers
// another Agent unless its scope is any_agent_server.
func (m *ApprovalModel) SavedDecision(agent, server, tool string) (Permission, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	for _, scope := range []string{events.PersistAgentTool, events.PersistAgentServer, events.PersistAnyAgentServer} {
		for _, p := range m.permissions {
			if p.Scope == scope && p.covers(agent, server, tool) {
				return *p, true
			}
		}
	}
	return Permission{}, false
}

// CountPermissions counts the saved decisions the revocation filters match.
func (m *ApprovalModel) CountPermissions(server, agent, tool string) int {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	n := 0
	for _, p := range m.permissions {
		if p.matches(server, agent, tool) {
			n++
		}
	}
	return n
}
