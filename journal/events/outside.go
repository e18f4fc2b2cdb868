package events

import "strings"

func init() {
	register[OutsideSessionOpened]()
}

// OutsideSession is the aggregate of an outside Agent's own sessions for
// one Lathe Session, by OutsideSessionID: a stream of its own, so that
// recording one never races the Session's turn.
const OutsideSession = "outside-session"

// OutsideSessionID is the OutsideSession aggregate ID of Lathe Session id.
func OutsideSessionID(session string) string { return "acp-" + session }

// OutsideSessionOf is the Lathe Session of an OutsideSession aggregate ID.
func OutsideSessionOf(id string) string { return strings.TrimPrefix(id, "acp-") }

// OutsideSessionOpened: an outside Agent's process opened its own session
// for a Lathe Session (ACP session/new), so that a later process, after a
// Stop or a restart of the daemon, resumes it with session/load.
type OutsideSessionOpened struct {
	Agent string `json:"agent"`
	// ACPSession is the agent's own session ID, as it answered (bounded
	// by the runner).
	ACPSession string `json:"acp_session"`
}

func (OutsideSessionOpened) EventType() string { return "session-outside-agent-opened" }
func (OutsideSessionOpened) Aggregate() string { return OutsideSession }
