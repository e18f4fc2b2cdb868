package projections

import (
	"lathe/journal"
	"lathe/journal/events"
)

// OutsideSession is the agent session an outside Agent last opened for a
// Lathe Session (events.OutsideSessionOpened).
type OutsideSession struct {
	Agent      string `json:"agent"`
	ACPSession string `json:"acp_session"`
}

// OutsideModel is the read model of the outside Agents' own sessions, by
// Lathe Session.
type OutsideModel struct {
	sh       *shared
	sessions map[string]OutsideSession
}

func init() {
	claimFor("outside", func(s *Store, env journal.Envelope, p events.Payload) error {
		e := p.(events.OutsideSessionOpened)
		s.OutsideModel.sessions[events.OutsideSessionOf(env.AggregateID)] = OutsideSession{Agent: e.Agent, ACPSession: e.ACPSession}
		return nil
	}, events.OutsideSessionOpened{})
}

// OutsideSession returns the agent session to resume for Session id.
func (m *OutsideModel) OutsideSession(id string) (OutsideSession, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	o, ok := m.sessions[id]
	return o, ok
}
