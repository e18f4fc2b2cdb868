package projections

import (
	"time"

	"lathe/journal/events"
)

// foldGit applies a Session's Git or Check event. A Git event changes no
// read model beyond the Session's version and updated_at: its record is the
// journal (the audit trail). CheckSet sets check_command; a Check's result
// is in its CheckRan event.
func (m *SessionModel) foldGit(id string, at time.Time, p events.Payload) error {
	return m.update(id, at, func(ss *Session) {
		if e, ok := p.(events.CheckSet); ok {
			ss.CheckCommand = nil
			if e.CheckCommand != nil {
				c := *e.CheckCommand
				ss.CheckCommand = &c
			}
		}
	})
}
