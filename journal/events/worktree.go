package events

import (
	"encoding/json"
	"fmt"
)

func init() {
	register[WorktreeAdded]()
	register[SessionMerged]()
	register[WorktreeRemoved]()
}

// Session isolation (SessionCreated.Isolation).
const (
	// IsolationShared: the Session works in the Workspace folder itself.
	IsolationShared = "shared"
	// IsolationWorktree: the Session works in its own git worktree of the
	// Workspace repository, on branch lathe/<session_id>.
	IsolationWorktree = "worktree"
)

// Effect kinds of a worktree Session (record, then act: commands/worktrees/worktree.go).
const (
	// EffectWorktreeAdd: `git worktree add` of the Session's worktree.
	EffectWorktreeAdd = "worktree-add"
	// EffectWorktreeMerge: a merge of the Session's branch into the
	// Workspace's current branch; Detail is the MergeIntent as JSON.
	EffectWorktreeMerge = "worktree-merge"
	// EffectWorktreeRemove: removing the worktree folder of a deleted Session.
	EffectWorktreeRemove = "worktree-remove"
)

// WorktreeAdded: the Session's worktree exists at Path on Branch, started
// from Base (a commit of the Workspace repository).
type WorktreeAdded struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
}

// MergeFile is one path a merge changed: Status is A, M, D or R (OrigPath
// then names the old path).
type MergeFile struct {
	Path     string `json:"path"`
	Status   string `json:"status"`
	OrigPath string `json:"orig_path,omitempty"`
}

// MergeIntent is what a merge is about to do, recorded before it touches
// the Workspace folder: the branch it moves from Old to Commit, and the
// paths it writes.
type MergeIntent struct {
	Strategy string      `json:"strategy"`
	Branch   string      `json:"branch"` // refs/heads/<name> of the Workspace
	Old      string      `json:"old"`
	Commit   string      `json:"commit"`
	Files    []MergeFile `json:"files"`
}

// SessionMerged: the Session's branch was merged ("merge") or squashed
// ("squash") into the Workspace's current branch as Commit, writing Count
// paths, Files (a MergeFile list: NewMergeFiles, MergeFilesOf), which goes
// to the blob store when large (a branch of 50,000 files lists megabytes).
type SessionMerged struct {
	Strategy string `json:"strategy"`
	Branch   string `json:"branch"`
	Old      string `json:"old"`
	Commit   string `json:"commit"`
	Files    JSON   `json:"files"`
	// Count is how many Files lists; 0 in events from before it, whose
	// Files are inline.
	Count int `json:"count,omitempty"`
	// Advanced: the Session's branch moved to Commit (it lacked nothing
	// of the Workspace's), so the Session goes on from the merge.
	Advanced bool `json:"advanced,omitempty"`
	// Recovered: the daemon stopped mid-merge and the next start finished it.
	Recovered bool `json:"recovered,omitempty"`
}

func (e SessionMerged) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Files)
}

// NewMergeFiles is files as SessionMerged.Files, inline until Offload.
func NewMergeFiles(files []MergeFile) JSON {
	raw, _ := json.Marshal(files)
	return NewJSON(raw)
}

// MergeFilesOf reads a SessionMerged.Files list, from r when it is in the
// blob store.
func MergeFilesOf(c JSON, r BlobReader) ([]MergeFile, error) {
	c, err := c.Resolve(r)
	if err != nil {
		return nil, err
	}
	var files []MergeFile
	if err := json.Unmarshal(c.Inline, &files); err != nil {
		return nil, fmt.Errorf("events: merged files: %w", err)
	}
	return files, nil
}

// WorktreeRemoved: the Session's worktree folder was removed. KeptBranch
// names its branch when the branch was kept (it holds commits the
// Workspace's current branch lacks); Discarded lists the uncommitted paths
// the operator confirmed were thrown away.
type WorktreeRemoved struct {
	Path       string   `json:"path"`
	KeptBranch string   `json:"kept_branch,omitempty"`
	Discarded  []string `json:"discarded,omitempty"`
}

func (WorktreeAdded) EventType() string   { return "session-worktree-added" }
func (SessionMerged) EventType() string   { return "session-merged" }
func (WorktreeRemoved) EventType() string { return "session-worktree-removed" }

func (WorktreeAdded) Aggregate() string   { return Session }
func (SessionMerged) Aggregate() string   { return Session }
func (WorktreeRemoved) Aggregate() string { return Session }
