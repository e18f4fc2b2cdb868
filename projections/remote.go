package projections

import (
	"encoding/json"
	"slices"
	"time"

	"lathe/journal/events"
)

// RemoteRuntime is what the remote sandbox provider adds to a Session's
// environment (CONTRACT.md "The remote sandbox provider"): the engine's
// container of the latest provisioning attempt (RuntimeID once the engine
// made it) and its creation token, while it is bound or retained; the
// runtimes Lathe could not remove, awaiting the operator's cleanup; and
// the last time the clone's work was brought home; and the archives of
// clones whose work could not come home before their runtime was removed.
type RemoteRuntime struct {
	RuntimeID     string `json:"runtime_id,omitempty"`
	CreationToken string `json:"creation_token,omitempty"`
	// Retained is true while any runtime awaits the operator's cleanup
	// (POST /environment/confirm-runtime-cleanup).
	Retained         bool              `json:"retained,omitempty"`
	RetainedRuntimes []RetainedRuntime `json:"retained_runtimes,omitempty"`
	Synced           *SyncedBranch     `json:"synced,omitempty"`
	Rescued          []RescuedWork     `json:"rescued,omitempty"`
}

// RescuedWork is one clone's working tree, .git included, kept as a tar
// archive on the daemon's host (events.WorkRescued).
type RescuedWork struct {
	Generation uint64          `json:"generation"`
	SHA256     string          `json:"sha256"`
	Size       int64           `json:"size"`
	Path       string          `json:"path"`
	Evidence   events.Evidence `json:"evidence"`
	At         time.Time       `json:"at"`
}

// RetainedRuntime is one runtime Lathe could not remove: what to delete by
// hand, and why it is left.
type RetainedRuntime struct {
	RuntimeID     string          `json:"runtime_id,omitempty"`
	CreationToken string          `json:"creation_token"`
	Generation    uint64          `json:"generation"`
	Evidence      events.Evidence `json:"evidence"`
}

// SyncedBranch is the clone's work last brought home.
type SyncedBranch struct {
	Branch      string    `json:"branch"`
	Commit      string    `json:"commit"`
	Uncommitted bool      `json:"uncommitted,omitempty"`
	At          time.Time `json:"at"`
}

// foldRemote applies a remote runtime event of Session id.
func (m *SessionModel) foldRemote(id string, at time.Time, p events.Payload) error {
	return m.update(id, at, func(ss *Session) {
		r := &ss.Environment.RemoteRuntime
		switch e := p.(type) {
		case events.RuntimeProvisioning:
			r.RuntimeID, r.CreationToken = "", e.CreationToken
		case events.RuntimeBound:
			r.RuntimeID, r.CreationToken = e.RuntimeID, e.CreationToken
		case events.RuntimeReleased:
			r.RuntimeID, r.CreationToken = "", ""
		case events.RuntimeRetained:
			r.RuntimeID, r.CreationToken = e.RuntimeID, e.CreationToken
			r.RetainedRuntimes = append(slices.Clone(r.RetainedRuntimes), RetainedRuntime{
				RuntimeID: e.RuntimeID, CreationToken: e.CreationToken, Generation: e.Generation, Evidence: e.Evidence})
		case events.RuntimeCleanupConfirmed:
			r.RetainedRuntimes = slices.DeleteFunc(slices.Clone(r.RetainedRuntimes), func(rr RetainedRuntime) bool {
				return rr.CreationToken == e.CreationToken
			})
			if r.CreationToken == e.CreationToken {
				r.RuntimeID, r.CreationToken = "", ""
			}
		case events.SessionSynced:
			r.Synced = &SyncedBranch{Branch: e.Branch, Commit: e.Commit, Uncommitted: e.Uncommitted, At: at}
		case events.WorkRescued:
			r.Rescued = append(slices.Clone(r.Rescued), RescuedWork{
				Generation: e.Generation, SHA256: e.SHA256, Size: e.Size, Path: e.Path, Evidence: e.Evidence, At: at})
		}
		r.Retained = len(r.RetainedRuntimes) > 0
	})
}

// RetainedMatch is the retained runtime of ss that a cleanup confirmation
// names: by its runtime ID, or by its creation token.
func (ss Session) RetainedMatch(runtimeID, token string) (RetainedRuntime, bool) {
	for _, rr := range ss.Environment.RetainedRuntimes {
		if (runtimeID != "" && rr.RuntimeID == runtimeID) || (token != "" && rr.CreationToken == token) {
			return rr, true
		}
	}
	return RetainedRuntime{}, false
}

// encode is the checkpoint's form of r (checkpoint.go): nothing for the
// local provider's zero value, JSON otherwise (rare, and small).
func (r RemoteRuntime) encode() []byte {
	if r.RuntimeID == "" && r.CreationToken == "" && !r.Retained && len(r.RetainedRuntimes) == 0 && r.Synced == nil && len(r.Rescued) == 0 {
		return nil
	}
	b, _ := json.Marshal(r) // strings, numbers, a time: always encodes
	return b
}

// decode is encode's inverse.
func (r *RemoteRuntime) decode(b []byte) error {
	*r = RemoteRuntime{}
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, r)
}
