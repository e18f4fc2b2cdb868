package projections

import (
	"cmp"
	"slices"
	"time"

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

func (s *Store) foldApproval(id string, at time.Time, p events.Payload) {
	switch e := p.(type) {
	case events.ApprovalRequested:
		s.approvals[id] = &Approval{ApprovalID: id, ApprovalRequested: e, RequestedAt: at, Version: 1}
		s.relate(e.Session, id) // in the Session's audit trail
	case events.ApprovalResolved:
		a := s.approvals[id]
		delete(s.approvals, id)
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
		s.permissions[perm.key()] = &perm
	case events.PermissionsRevoked:
		for k, perm := range s.permissions {
			if perm.matches(e.Server, e.AgentID, e.Tool) {
				delete(s.permissions, k)
			}
		}
	}
}

// PendingApprovals lists the pending approvals, oldest first.
func (s *Store) PendingApprovals() []Approval {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pendingLocked()
}

func (s *Store) pendingLocked() []Approval {
	out := make([]Approval, 0, len(s.approvals))
	for _, a := range s.approvals {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b Approval) int {
		return cmp.Or(a.RequestedAt.Compare(b.RequestedAt), cmp.Compare(a.ApprovalID, b.ApprovalID))
	})
	return out
}

// PendingApproval returns one pending approval.
func (s *Store) PendingApproval(id string) (Approval, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.approvals[id]
	if !ok {
		return Approval{}, false
	}
	return *a, true
}

// Permissions lists the saved decisions, by server, scope, Agent and tool.
func (s *Store) Permissions() []Permission {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Permission, 0, len(s.permissions))
	for _, p := range s.permissions {
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
func (s *Store) SavedDecision(agent, server, tool string) (Permission, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, scope := range []string{events.PersistAgentTool, events.PersistAgentServer, events.PersistAnyAgentServer} {
		for _, p := range s.permissions {
			if p.Scope == scope && p.covers(agent, server, tool) {
				return *p, true
			}
		}
	}
	return Permission{}, false
}

// CountPermissions counts the saved decisions the revocation filters match.
func (s *Store) CountPermissions(server, agent, tool string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, p := range s.permissions {
		if p.matches(server, agent, tool) {
			n++
		}
	}
	return n
}
