package turns

// A turn's code (issue 14): in a Git Workspace every turn snapshots the
// worktree before and after it (turns.go recordChanges). Refs under
// refs/lathe/turns/ keep both trees from git's gc for as long as the
// Session lives; the routes here list what a turn changed, show one file's
// diff, and restore a turn's files into the worktree as uncommitted
// changes (journaled as session-turn-restored). Replay (replay.go) reads a
// turn's events back from the journal.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/scm"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
)

// TurnCode reads and restores the code of a Session's turns.
type TurnCode struct{ *environments.Sandboxes }

// turnRefRoot is where a turn's refs live: <root><turn>/before and /after.
const turnRefRoot = "refs/lathe/turns/"

// plainRefTurn is a turn ID that is its own ref component: ULIDs and UUIDs
// are. It starts with a letter or digit, so it never meets the hashed
// names, which start with "_".
var plainRefTurn = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$`)

// turnRefPrefixes are the names a turn's refs may take: plain is the turn
// ID itself when it is a safe ref component ("" otherwise: a client picks
// turn IDs, and one is never spliced into a ref name unchecked); hashed is
// "_" and the hex SHA-256 of the Session and turn IDs, unique to this
// Session, used when the turn ID is not safe or another Session sharing
// the repository (one Workspace) already holds the plain name.
func turnRefPrefixes(session, turn string) (plain, hashed string) {
	sum := sha256.Sum256([]byte(session + "\x00" + turn))
	hashed = turnRefRoot + "_" + hex.EncodeToString(sum[:20])
	if plainRefTurn.MatchString(turn) {
		plain = turnRefRoot + turn
	}
	return plain, hashed
}

func turnRefs(prefix, before, after string) []git.RefValue {
	return []git.RefValue{{Ref: prefix + "/before", Object: before}, {Ref: prefix + "/after", Object: after}}
}

// ProtectTurn points a turn's refs at its two snapshots and returns their
// prefix, "" when git refused (the change record is kept all the same;
// only gc protection is lost).
func (s *TurnCode) ProtectTurn(ctx context.Context, t projections.Turn, repo *git.Repo, before, after string) string {
	plain, hashed := turnRefPrefixes(t.SessionID, t.TurnID)
	if plain != "" && repo.CreateRefs(ctx, turnRefs(plain, before, after)) == nil {
		return plain
	}
	if err := repo.SetRefs(ctx, turnRefs(hashed, before, after)); err != nil {
		s.Log.Warn("turn refs", "session", t.SessionID, "turn", t.TurnID, "err", err)
		return ""
	}
	return hashed
}

// DropTurnRefs deletes the refs of every turn of a Session that is being
// deleted, each only while it still names the turn's tree. git never runs
// on the host, so it needs a live sandbox on the repository: the Session's
// own, else a Ready Session of the same Workspace (which shares the
// checkout). With neither, the refs stay (reported in the log); they keep
// two trees per turn alive and nothing else.
func (s *TurnCode) DropTurnRefs(ctx context.Context, id string) {
	ss, ok := s.Store.Session(id)
	if !ok {
		return
	}
	sb := s.LiveSandbox(id)
	if sb == nil || sb.Generation() != ss.Environment.Generation {
		sb = nil
		for _, sib := range s.Store.Sessions(ss.WorkspaceID) {
			if sib.ID == id || sib.WorkingDir != ss.WorkingDir {
				continue
			}
			if sb, _, _ = s.ReadySandbox(sib.ID); sb != nil {
				break
			}
		}
	}
	var refs []git.RefValue
	for _, tt := range s.Store.TurnTrees(id) {
		if tt.Ref != "" {
			refs = append(refs, turnRefs(tt.Ref, tt.Before, tt.After)...)
		}
	}
	if len(refs) == 0 {
		return
	}
	if sb == nil {
		s.Log.Warn("turn refs left: no live sandbox on the repository to delete them", "session", id, "refs", len(refs))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scm.GitTimeout)
	defer cancel()
	repo := git.Open(sb, ss.WorkingDir)
	for chunk := range slices.Chunk(refs, 500) {
		if err := repo.DeleteRefs(ctx, chunk); err != nil {
			s.Log.Warn("delete turn refs", "session", id, "err", err)
			return
		}
	}
}

// codeError is gitError with a turn's vanished snapshots as ErrNotFound.
func codeError(id, turnID string, err error) error {
	if errors.Is(err, git.ErrSnapshotGone) {
		return fmt.Errorf("%w: the snapshots of turn %q are no longer in the repository (pruned before refs kept them, or the repository was replaced): %v", core.ErrNotFound, turnID, err)
	}
	return scm.GitError(id, err)
}

// codeTurn returns an ended turn that has a change record.
func (s *TurnCode) codeTurn(id, turnID string) (projections.Turn, error) {
	if _, ok := s.Store.Session(id); !ok {
		return projections.Turn{}, fmt.Errorf("%w: session %q", core.ErrNotFound, id)
	}
	t, ok := s.Store.Turn(id, turnID)
	switch {
	case !ok:
		return t, fmt.Errorf("%w: session %q has no turn %q", core.ErrNotFound, id, turnID)
	case t.Live():
		return t, fmt.Errorf("%w: turn %q is still running; its changes are known once it ends", core.ErrConflict, turnID)
	case !t.ChangesKnown || t.ChangesBefore == "" || t.ChangesAfter == "":
		return t, fmt.Errorf("%w: turn %q has no code record (its Workspace was not a Git repository then, or git failed)", core.ErrNotFound, turnID)
	}
	return t, nil
}

// TurnChangeList is the answer of GET /api/sessions/{id}/turns/{turn_id}/changes.
type TurnChangeList struct {
	TurnID string `json:"turn_id"`
	// Before and After are the snapshots (git tree IDs) compared.
	Before string           `json:"before"`
	After  string           `json:"after"`
	Files  []git.TreeChange `json:"files"`
	// Total counts every changed path; Files lists at most 10,000.
	Total     int  `json:"total"`
	Truncated bool `json:"truncated"`
}

// TurnChanges lists what a turn changed, renames detected, from its two
// snapshots. Git runs in the sandbox, so the Session must be Ready.
func (s *TurnCode) TurnChanges(ctx context.Context, id, turnID string) (TurnChangeList, error) {
	t, err := s.codeTurn(id, turnID)
	if err != nil {
		return TurnChangeList{}, err
	}
	return scm.GitRead(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo, _ projections.Session) (TurnChangeList, error) {
		files, err := r.TreeChanges(ctx, t.ChangesBefore, t.ChangesAfter, true)
		if err != nil {
			return TurnChangeList{}, codeError(id, turnID, err)
		}
		out := TurnChangeList{TurnID: t.TurnID, Before: t.ChangesBefore, After: t.ChangesAfter, Files: files, Total: len(files)}
		if len(files) > scm.MaxStatusFiles {
			out.Files, out.Truncated = files[:scm.MaxStatusFiles], true
		}
		return out, nil
	})
}

// TurnDiff is the answer of GET …/turns/{turn_id}/changes/diff?path=: one
// file's patch from before the turn to after it. A binary change is only
// named.
type TurnDiff struct {
	TurnID string `json:"turn_id"`
	Path   string `json:"path"`
	Status string `json:"status"`
	Binary bool   `json:"binary"`
	Diff   string `json:"diff"`
	Lossy  bool   `json:"lossy,omitempty"`
}

// TurnFileDiff returns one file's diff across a turn; a path the turn did
// not change is ErrNotFound.
func (s *TurnCode) TurnFileDiff(ctx context.Context, id, turnID, p string) (TurnDiff, error) {
	t, err := s.codeTurn(id, turnID)
	if err != nil {
		return TurnDiff{}, err
	}
	if p, err = core.CleanPath(p); err != nil {
		return TurnDiff{}, err
	}
	return scm.GitRead(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo, _ projections.Session) (TurnDiff, error) {
		changed, err := turnPathChanges(ctx, r, t)
		if err != nil {
			return TurnDiff{}, codeError(id, turnID, err)
		}
		st, ok := changed[p]
		if !ok {
			return TurnDiff{}, fmt.Errorf("%w: turn %q did not change %q", core.ErrNotFound, turnID, p)
		}
		c, err := r.TreeDiff(ctx, t.ChangesBefore, t.ChangesAfter, p)
		if err != nil {
			return TurnDiff{}, codeError(id, turnID, err)
		}
		out := TurnDiff{TurnID: t.TurnID, Path: p, Status: st, Diff: string(c.Raw), Lossy: !utf8.Valid(c.Raw)}
		for _, fd := range c.Files {
			out.Binary = out.Binary || fd.Binary
		}
		return out, nil
	})
}

// turnPathChanges maps each path a turn changed to its status, renames
// split into a deletion and an addition (each path's own before and after).
func turnPathChanges(ctx context.Context, r *git.Repo, t projections.Turn) (map[string]string, error) {
	files, err := r.TreeChanges(ctx, t.ChangesBefore, t.ChangesAfter, false)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(files))
	for _, f := range files {
		m[f.Path] = f.Status
	}
	return m, nil
}

// Restore sides.
const (
	SideBefore = "before"
	SideAfter  = "after"
)

// RestoreRequest is the body of POST …/turns/{turn_id}/restore. No Paths
// restores every file the turn changed.
type RestoreRequest struct {
	Paths []string `json:"paths"`
	Side  string   `json:"side"`
	Force bool     `json:"force"`
}

// RestoreConflict is the 409 of a restore over files the worktree changed
// after the turn: Paths lists them. It is an ErrConflict.
type RestoreConflict struct {
	TurnID string
	Paths  []string
}

func (e *RestoreConflict) Error() string {
	return fmt.Sprintf("%v: %d of the files to restore changed after turn %q; send force: true to overwrite them", core.ErrConflict, len(e.Paths), e.TurnID)
}

func (e *RestoreConflict) Unwrap() error { return core.ErrConflict }

// RestoreTurn writes files as they were before (or after) a turn into the
// worktree, as uncommitted changes: the index and HEAD stay as they are.
// It runs under the Session's lifecycle lock, the way every primary
// checkout write does (ownReady: Files and Source Control), so whatever
// gates those writes gates a restore too; a live turn refuses it. Files
// the worktree changed after the turn (their content differs from the
// turn's after-snapshot) refuse it with a *RestoreConflict unless Force.
// It journals session-turn-restored.
func (s *TurnCode) RestoreTurn(ctx context.Context, id, turnID string, req RestoreRequest) (events.TurnRestored, error) {
	if req.Side != SideBefore && req.Side != SideAfter {
		return events.TurnRestored{}, fmt.Errorf("%w: side must be %q or %q", core.ErrInvalid, SideBefore, SideAfter)
	}
	if len(req.Paths) > environments.MaxGitPaths {
		return events.TurnRestored{}, fmt.Errorf("%w: %d paths in one request, over the limit of %d", core.ErrInvalid, len(req.Paths), environments.MaxGitPaths)
	}
	for _, p := range req.Paths {
		if _, err := core.CleanPath(p); err != nil || p == "" {
			return events.TurnRestored{}, fmt.Errorf("%w: path %q is not a path below the session root", core.ErrInvalid, p)
		}
	}
	t, err := s.codeTurn(id, turnID)
	if err != nil {
		return events.TurnRestored{}, err
	}
	release, err := s.OwnReady(ctx, id)
	if err != nil {
		return events.TurnRestored{}, err
	}
	defer release()
	if err := s.RefuseLiveTurn(id); err != nil {
		return events.TurnRestored{}, err
	}
	r, _, err := s.Repo(id)
	if err != nil {
		return events.TurnRestored{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scm.GitTimeout)
	defer cancel()
	// Recorded, then acted (commands/startup/effects.go).
	fx, err := s.Intend(ctx, events.EffectGit, id, events.TurnRestored{}.EventType(), "")
	if err != nil {
		return events.TurnRestored{}, err
	}
	ev, err := s.restore(ctx, r, t, req)
	var outcome []journal.Event
	if err == nil && len(ev.Paths) > 0 { // a turn that changed nothing restores nothing
		outcome = append(outcome, events.New(id, ev))
	}
	if serr := fx.Settle(ctx, err, outcome...); serr != nil {
		return events.TurnRestored{}, serr
	}
	if err != nil {
		return events.TurnRestored{}, codeError(id, turnID, err)
	}
	return ev, nil
}

func (s *TurnCode) restore(ctx context.Context, r *git.Repo, t projections.Turn, req RestoreRequest) (events.TurnRestored, error) {
	changed, err := turnPathChanges(ctx, r, t)
	if err != nil {
		return events.TurnRestored{}, err
	}
	paths := req.Paths
	if len(paths) == 0 {
		for p := range changed {
			paths = append(paths, p)
		}
	}
	for i, p := range paths {
		paths[i], _ = core.CleanPath(p)
		if _, ok := changed[paths[i]]; !ok {
			return events.TurnRestored{}, fmt.Errorf("%w: turn %q did not change %q", core.ErrInvalid, t.TurnID, p)
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	// Leading directories that are symlinks out of the root are refused
	// before git runs (gitPaths), in chunks of its limit.
	for chunk := range slices.Chunk(paths, environments.MaxGitPaths) {
		if _, err := s.GitPaths(t.SessionID, chunk); err != nil {
			return events.TurnRestored{}, err
		}
	}
	if !req.Force {
		now, err := r.Snapshot(ctx)
		if err != nil {
			return events.TurnRestored{}, err
		}
		since, err := r.ChangedPaths(ctx, t.ChangesAfter, now)
		if err != nil {
			return events.TurnRestored{}, err
		}
		var conflicts []string
		for _, p := range since {
			if _, found := slices.BinarySearch(paths, p); found {
				conflicts = append(conflicts, p)
			}
		}
		if len(conflicts) > 0 {
			return events.TurnRestored{}, &RestoreConflict{TurnID: t.TurnID, Paths: conflicts}
		}
	}
	// A path absent on the chosen side (added by the turn, for "before";
	// deleted by it, for "after") is removed; the others are written.
	absent := git.Added
	tree := t.ChangesBefore
	if req.Side == SideAfter {
		absent, tree = git.Deleted, t.ChangesAfter
	}
	var write, remove []string
	for _, p := range paths {
		if changed[p] == absent {
			remove = append(remove, p)
		} else {
			write = append(write, p)
		}
	}
	if err := r.WriteFromTree(ctx, tree, write, remove); err != nil {
		return events.TurnRestored{}, err
	}
	ev := events.TurnRestored{TurnID: t.TurnID, Side: req.Side, Forced: req.Force}
	ev.Paths, ev.More = scm.CapPaths(scm.NonNilPaths(paths))
	return ev, nil
}

const SnapshotTimeout = time.Minute

const MaxChangedPaths = 2000

// Snapshot records the worktree of a Git Workspace; ok is false when the
// Workspace is not a repository (or git failed): the turn then has no
// change record.
func Snapshot(ctx context.Context, repo *git.Repo) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, SnapshotTimeout)
	defer cancel()
	tree, err := repo.Snapshot(ctx)
	return tree, err == nil
}
