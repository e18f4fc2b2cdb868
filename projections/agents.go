package projections

import (
	"slices"

	"lathe/journal"
	"lathe/journal/events"
)

// AgentOverlay is what operators changed of one Agent's configuration since
// the daemon started: the fields an agent-patched event set (nil stayed as
// configured) and the restarts. Patches are in memory only, so a
// daemon-started event clears every overlay, and a replay of the journal
// gives the same overlay as the live daemon holds.
type AgentOverlay struct {
	Name         *string             `json:"name,omitempty"`
	Model        *string             `json:"model,omitempty"`
	Prompt       *string             `json:"prompt,omitempty"`
	Dependencies []string            `json:"dependencies,omitempty"`
	Budget       *events.AgentBudget `json:"budget,omitempty"`
	Restarts     int                 `json:"restarts"`
	Patches      int                 `json:"patches"`
}

// AgentModel is the read model of the Agent overlays.
type AgentModel struct {
	sh     *shared
	agents map[string]*AgentOverlay // by Agent id
}

// The Agent overlays' events, and the daemon start that clears them.
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error { s.AgentModel.fold(env, p); return nil }
	claimFor("agents", fold,
		events.AgentPatched{}, events.AgentRestarted{}, events.DaemonStarted{})
}

// fold applies an Agent event, or a daemon start, which clears them all.
func (m *AgentModel) fold(env journal.Envelope, p events.Payload) {
	id := env.AggregateID
	if _, ok := p.(events.DaemonStarted); ok {
		clear(m.agents)
		return
	}
	o := m.agents[id]
	if o == nil {
		o = &AgentOverlay{}
		m.agents[id] = o
	}
	switch e := p.(type) {
	case events.AgentPatched:
		o.Patches++
		if e.Name != nil {
			o.Name = e.Name
		}
		if e.Model != nil {
			o.Model = e.Model
		}
		if e.Prompt != nil {
			o.Prompt = e.Prompt
		}
		if e.Dependencies != nil {
			o.Dependencies = slices.Clone(*e.Dependencies)
		}
		if e.Budget != nil {
			b := *e.Budget
			o.Budget = &b
		}
		if e.Restarted {
			o.Restarts++
		}
	case events.AgentRestarted:
		o.Restarts++
	}
}

// AgentOverlay returns what operators changed of an Agent since the daemon
// started; false when nothing.
func (m *AgentModel) AgentOverlay(id string) (AgentOverlay, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	o, ok := m.agents[id]
	if !ok {
		return AgentOverlay{}, false
	}
	c := *o
	c.Dependencies = slices.Clone(o.Dependencies)
	return c, true
}

// AgentPatched reports whether any Agent has an overlay.
func (m *AgentModel) AgentPatched() bool {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	return len(m.agents) > 0
}
