package events

func init() {
	register[GitStaged]()
	register[GitUnstaged]()
	register[GitHunkStaged]()
	register[GitHunkUnstaged]()
	register[GitHunkDiscarded]()
	register[GitDiscarded]()
	register[GitCheckedOut]()
	register[GitCommitted]()
	register[CheckSet]()
	register[CheckRan]()
}

// The Session's Git changes, each recorded after git made it, with what it
// did: the audit trail of who staged, discarded or committed what, and
// when. Paths are relative to the Session root.

// GitStaged: paths were staged as they were in the worktree; All means
// every change under the root.
type GitStaged struct {
	Paths []string `json:"paths"`
	All   bool     `json:"all"`
}

// GitUnstaged: paths were reset in the index to HEAD; All means every path.
type GitUnstaged struct {
	Paths []string `json:"paths"`
	All   bool     `json:"all"`
}

// GitHunk names one hunk of a path's diff: its index in the listing and
// its "@@" header.
type GitHunk struct {
	Path   string `json:"path"`
	Index  int    `json:"index"`
	Header string `json:"header"`
}

// GitHunkStaged: one unstaged hunk was applied to the index.
type GitHunkStaged struct{ GitHunk }

// GitHunkUnstaged: one staged hunk was reverted in the index.
type GitHunkUnstaged struct{ GitHunk }

// GitHunkDiscarded: one unstaged hunk was reverted in the worktree.
type GitHunkDiscarded struct{ GitHunk }

// GitDiscarded: unstaged changes were thrown away under Path ("" for the
// whole root): Paths are the files restored or deleted, at most the first
// MaxEventPaths, with More counting the rest.
type GitDiscarded struct {
	Path  string   `json:"path"`
	Paths []string `json:"paths"`
	More  int      `json:"more,omitempty"`
}

// GitCheckedOut: Ref was checked out; HEAD is now Commit, on Branch or
// detached.
type GitCheckedOut struct {
	Ref      string `json:"ref"`
	Commit   string `json:"commit"`
	Branch   string `json:"branch"`
	Detached bool   `json:"detached"`
}

// GitCommitted: a commit was made from the index (after staging every
// change when StageAll). Paths are what it changed, capped like
// GitDiscarded's.
type GitCommitted struct {
	Commit   string   `json:"commit"`
	Branch   string   `json:"branch"`
	Subject  string   `json:"subject"`
	StageAll bool     `json:"stage_all"`
	Paths    []string `json:"paths"`
	More     int      `json:"more,omitempty"`
	// Author is the identity the commit was signed with, "Name <email>"
	// (absent in commits recorded before it was kept).
	Author string `json:"author,omitempty"`
}

// MaxEventPaths bounds the path lists an event keeps.
const MaxEventPaths = 1000

// CheckSet: the Session's Check command was set; nil clears it.
type CheckSet struct {
	CheckCommand *string `json:"check_command"`
}

// CheckRan: the Check command ran in the Session's sandbox.
type CheckRan struct {
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"` // -1 when it did not finish
	OutputTail string `json:"output_tail"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	Error      string `json:"error,omitempty"`
}

func (GitStaged) EventType() string        { return "session-git-staged" }
func (GitUnstaged) EventType() string      { return "session-git-unstaged" }
func (GitHunkStaged) EventType() string    { return "session-git-hunk-staged" }
func (GitHunkUnstaged) EventType() string  { return "session-git-hunk-unstaged" }
func (GitHunkDiscarded) EventType() string { return "session-git-hunk-discarded" }
func (GitDiscarded) EventType() string     { return "session-git-discarded" }
func (GitCheckedOut) EventType() string    { return "session-git-checked-out" }
func (GitCommitted) EventType() string     { return "session-git-committed" }
func (CheckSet) EventType() string         { return "session-check-set" }
func (CheckRan) EventType() string         { return "session-check-ran" }

func (GitStaged) Aggregate() string        { return Session }
func (GitUnstaged) Aggregate() string      { return Session }
func (GitHunkStaged) Aggregate() string    { return Session }
func (GitHunkUnstaged) Aggregate() string  { return Session }
func (GitHunkDiscarded) Aggregate() string { return Session }
func (GitDiscarded) Aggregate() string     { return Session }
func (GitCheckedOut) Aggregate() string    { return Session }
func (GitCommitted) Aggregate() string     { return Session }
func (CheckSet) Aggregate() string         { return Session }
func (CheckRan) Aggregate() string         { return Session }
