package scm

// The Session's Git: reads (status, diff, hunks, branches) and changes
// (stage, unstage, one hunk, discard, checkout, commit), all run by
// runtime/git inside the Session's Ready sandbox. Every change is recorded,
// after git made it, as an event on the Session with its outcome, so the
// Session's journal is the audit trail of who staged, discarded or committed
// what, and when.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"lathe/commands/core"
	"lathe/commands/environments"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
)

// Git bounds and defaults.
const (
	// GitTimeout bounds one Git request's git processes.
	GitTimeout = 2 * time.Minute
	// MaxStatusFiles bounds the files one status lists; the counts cover all.
	MaxStatusFiles = 10_000
	maxRefLen      = 1024
	// maxCommitMessage bounds a commit message.
	maxCommitMessage = 64 << 10
)

// GitIdentity is the answer of GET /api/sessions/{id}/git/identity: who a
// commit made now is signed by. Source is "repository" when the checkout
// (or its sandbox) names a user.name or user.email of its own, else "config"
// (git.author) or "host" (the daemon user's global git config); Known is
// false when neither names both, and then a commit is refused and Fix says
// how to set one.
type GitIdentity struct {
	Name   string `json:"name"`
	Email  string `json:"email"`
	Source string `json:"source"`
	Known  bool   `json:"known"`
	Fix    string `json:"fix,omitempty"`
}

// IdentityFix names the ways to give the daemon a commit identity.
const IdentityFix = "set git.author {name, email} in the daemon's config file, or run `git config --global user.name \"Your Name\"` and `git config --global user.email you@example.org` as the user the daemon runs as, then restart the daemon; or set user.name and user.email in the repository itself"

// Identity resolves the commit identity in r (a Session's checkout, or a
// Workspace's repository on the host): the repository's own fields win
// over the daemon's, field by field, as git itself applies them.
func (s *Git) Identity(ctx context.Context, r interface {
	ConfiguredIdentity(context.Context) (git.Identity, error)
}) (GitIdentity, error) {
	own, err := r.ConfiguredIdentity(ctx)
	if err != nil {
		return GitIdentity{}, err
	}
	out := GitIdentity{Name: own.Name, Email: own.Email, Source: "repository"}
	if own.Name == "" || own.Email == "" {
		if own == (git.Identity{}) {
			out.Source = s.Opts.GitAuthorSource
		}
		out.Name = cmp.Or(own.Name, s.Opts.GitAuthor.Name)
		out.Email = cmp.Or(own.Email, s.Opts.GitAuthor.Email)
	}
	out.Known = out.Name != "" && out.Email != ""
	if !out.Known {
		out.Source, out.Fix = "", IdentityFix
	}
	return out, nil
}

// GitIdentity reports who a commit made now in the Session is signed by.
func (s *Git) GitIdentity(ctx context.Context, id string) (GitIdentity, error) {
	return GitRead(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo, _ projections.Session) (GitIdentity, error) {
		return s.Identity(ctx, r)
	})
}

// GitStatus is the answer of GET /api/sessions/{id}/git/status.
type GitStatus struct {
	Branch git.Branch `json:"branch"`
	// Files are the changed, unmerged and untracked paths, untracked files
	// one by one; at most 10,000 (Truncated), while the counts cover all.
	Files     []git.File `json:"files"`
	Truncated bool       `json:"truncated"`
	Total     int        `json:"total"`
	Staged    int        `json:"staged"`
	Unstaged  int        `json:"unstaged"`
	Conflicts int        `json:"conflicts"`
	// LastTurnKnown says whether the files' last_turn flags are complete:
	// false when the last turn has no change record (its Workspace was not
	// a Git repository then, or git failed) or listed only its first paths.
	LastTurnKnown bool `json:"last_turn_known"`
	// Token names the checkout state this status describes (paths, states
	// and the content behind them; git.Repo.StatusToken). A commit that
	// sends it back as status_token commits only if it still holds.
	Token string `json:"token"`
	// Worktree is a worktree Session's way home (commands/worktrees/worktree.go).
	Worktree *WorktreeStatus `json:"worktree,omitempty"`
	// Sync is a remote Session's way home (commands/environments/remotesync.go).
	Sync *environments.SyncStatus `json:"sync,omitempty"`
}

// GitDiff is the answer of GET /api/sessions/{id}/git/diff: one path's
// patch, unstaged (worktree against index) unless Staged. A binary change
// is only named ("Binary files … differ"), never shown.
type GitDiff struct {
	Path      string `json:"path"`
	Staged    bool   `json:"staged"`
	Untracked bool   `json:"untracked"`
	Binary    bool   `json:"binary"`
	Diff      string `json:"diff"`
	// Lossy marks a text diff that is not valid UTF-8: JSON shows its
	// invalid bytes as U+FFFD. Hunk staging still uses the exact bytes.
	Lossy bool `json:"lossy,omitempty"`
}

// GitHunks is the answer of GET /api/sessions/{id}/git/hunks: one path's
// hunks, numbered across its file diffs (a type change has two).
type GitHunks struct {
	Path      string    `json:"path"`
	Staged    bool      `json:"staged"`
	Untracked bool      `json:"untracked"`
	Binary    bool      `json:"binary"`
	NewFile   bool      `json:"new_file"`
	Deleted   bool      `json:"deleted"`
	Renamed   bool      `json:"renamed"`
	Hunks     []GitHunk `json:"hunks"`
}

// GitHunk is one hunk: Lines as git printed them (' ', '+', '-' or '\'
// first), without their newlines; a CRLF file's lines keep their "\r".
type GitHunk struct {
	Index    int      `json:"index"`
	Header   string   `json:"header"`
	OldStart int      `json:"old_start"`
	OldLines int      `json:"old_lines"`
	NewStart int      `json:"new_start"`
	NewLines int      `json:"new_lines"`
	Lines    []string `json:"lines"`
}

// GitBranches is the answer of GET /api/sessions/{id}/git/branches.
type GitBranches struct {
	// Current is the checked-out branch, "" when detached.
	Current  string          `json:"current"`
	Detached bool            `json:"detached"`
	Commit   string          `json:"commit"`
	Branches []git.BranchRef `json:"branches"`
}

// GitHunkRequest is the body of POST /git/hunk and /git/hunk/discard.
// Header, when given, must still be the hunk's "@@" line.
type GitHunkRequest struct {
	Path   string `json:"path" required:"true" minLength:"1"`
	Index  *int   `json:"index"`
	Stage  *bool  `json:"stage"`
	Header string `json:"header"`
}

// GitCommitRequest is the body of POST /git/commit.
type GitCommitRequest struct {
	Message  string `json:"message"`
	StageAll bool   `json:"stage_all"`
	// StatusToken, when given, is the token of the status the client
	// showed: the commit is refused (ErrConflict) and nothing is committed
	// if the checkout changed since.
	StatusToken string `json:"status_token,omitempty"`
}

// GitRead runs a read in the Session's repository, bounded by gitTimeout.
func GitRead[T any](ctx context.Context, s *environments.Sandboxes, id string, read func(context.Context, *git.Repo, projections.Session) (T, error)) (T, error) {
	r, ss, err := s.Repo(id)
	if err != nil {
		var zero T
		return zero, err
	}
	ctx, cancel := context.WithTimeout(ctx, GitTimeout)
	defer cancel()
	out, err := read(ctx, r, ss)
	return out, GitError(id, err)
}

// gitChange runs a change in the Session's repository under its lifecycle
// lock (so its event is ordered with the environment brackets and no
// teardown starts under it) and records the event it returns, also when it
// returns an error with it (a change that stopped midway records what it
// did); nil records nothing. The change runs to its end even if the client
// goes away, so what git did is always recorded.
func gitChange[T events.Payload](ctx context.Context, s *environments.Sandboxes, id string, change func(context.Context, *git.Repo) (*T, error)) (T, error) {
	var zero T
	release, err := s.OwnReady(ctx, id)
	if err != nil {
		return zero, err
	}
	defer release()
	r, _, err := s.Repo(id)
	if err != nil {
		return zero, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), GitTimeout)
	defer cancel()
	// Recorded, then acted (commands/startup/effects.go).
	fx, err := s.Intend(ctx, events.EffectGit, id, zero.EventType(), "")
	if err != nil {
		return zero, err
	}
	p, err := change(ctx, r)
	if p == nil {
		if serr := fx.Settle(ctx, err); serr != nil {
			return zero, errors.Join(GitError(id, err), serr)
		}
		return zero, GitError(id, err)
	}
	if aerr := fx.Settle(ctx, err, events.New(id, *p)); aerr != nil {
		return zero, errors.Join(GitError(id, err), aerr)
	}
	return *p, GitError(id, err)
}

// GitError maps runtime/git's and the sandbox's errors to command classes.
func GitError(id string, err error) error {
	var gerr *git.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, git.ErrNotRepository):
		return fmt.Errorf("%w: the root of session %q is not a git repository (run `git init` there first)", core.ErrConflict, id)
	case errors.Is(err, git.ErrNoMatch), errors.Is(err, git.ErrNoHunk), errors.Is(err, git.ErrUnknownRef):
		return fmt.Errorf("%w: %v", core.ErrNotFound, err)
	case errors.Is(err, git.ErrUntrackedDir):
		return fmt.Errorf("%w: %v", core.ErrInvalid, err)
	case errors.Is(err, git.ErrBinary), errors.Is(err, git.ErrHunkChanged), errors.Is(err, git.ErrNothingToCommit):
		return fmt.Errorf("%w: %v", core.ErrConflict, err)
	case errors.Is(err, git.ErrStatusChanged):
		return fmt.Errorf("%w: %v (a file was written, staged or removed); nothing was committed; refresh the status, review it and commit again", core.ErrConflict, err)
	case errors.Is(err, git.ErrTooLarge):
		return fmt.Errorf("%w: %v", core.ErrTooLarge, err)
	case errors.As(err, &gerr):
		return fmt.Errorf("%w: %v", core.ErrConflict, err)
	}
	return environments.SandboxError(id, err)
}

// gitPath confines one client path as the file commands do (CleanPath:
// relative, no "..", no NUL; "." is the root) and refuses one whose leading
// directories resolve outside the Session root through a symlink
// (ErrForbidden) before git sees it. git itself never follows a symlink in
// a path it stages, restores or applies to.
func (s *Git) gitPath(id, p string) (string, error) {
	out, err := s.GitPaths(id, []string{p})
	if err != nil {
		return "", err
	}
	return out[0], nil
}

// GitStatus reports the branch and the changed files of a Session whose
// environment is Ready, each flagged when the Session's last turn changed it.
func (s *Git) GitStatus(ctx context.Context, id string) (GitStatus, error) {
	return GitRead(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo, ss projections.Session) (GitStatus, error) {
		// What a sync brings is read first: a commit it lists was made
		// before the status is read, so the files shown are never from
		// before that commit (two reads, one consistent answer).
		sync := s.Remote().SyncStatus(ctx, r, ss)
		st, token, err := r.StatusToken(ctx)
		if err != nil {
			return GitStatus{}, err
		}
		last, known, err := s.lastTurnPaths(ctx, r, ss)
		if err != nil {
			return GitStatus{}, err
		}
		out := GitStatus{Branch: st.Branch, Files: []git.File{}, Total: len(st.Entries), LastTurnKnown: known, Token: token}
		for _, e := range st.Entries {
			f := e.File()
			f.LastTurn = last[f.Path] || f.OrigPath != "" && last[f.OrigPath]
			switch {
			case f.Conflict != "":
				out.Conflicts++
			default:
				if f.Staged != "" {
					out.Staged++
				}
				if f.Unstaged != "" {
					out.Unstaged++
				}
			}
			if len(out.Files) < MaxStatusFiles {
				out.Files = append(out.Files, f)
			}
		}
		out.Truncated = len(out.Files) < out.Total
		out.Worktree = worktreeStatus(ctx, s.Core, ss)
		out.Sync = sync
		return out, nil
	})
}

// lastTurnPaths returns the paths (relative to the Session root) that the
// Session's last ended turn changed, and whether that is known: turns in a
// Git Workspace record their changes (commands/turns/turns.go recordChanges).
// Before any turn, nothing was changed by one.
func (s *Git) lastTurnPaths(_ context.Context, _ *git.Repo, ss projections.Session) (map[string]bool, bool, error) {
	turns := s.Store.Turns(ss.ID)
	for i := len(turns) - 1; i >= 0; i-- {
		t := turns[i]
		if t.Live() {
			continue
		}
		if !t.ChangesKnown {
			return nil, false, nil
		}
		set := make(map[string]bool, len(t.ChangedPaths))
		for _, p := range t.ChangedPaths {
			set[p] = true
		}
		return set, !t.ChangesTruncated, nil
	}
	return map[string]bool{}, true, nil
}

// GitDiff returns one path's patch, unstaged (an untracked file as its
// creation) or staged.
func (s *Git) GitDiff(ctx context.Context, id, p string, staged bool) (GitDiff, error) {
	p, err := s.gitPath(id, p)
	if err != nil {
		return GitDiff{}, err
	}
	return GitRead(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo, _ projections.Session) (GitDiff, error) {
		c, err := r.Changes(ctx, p, staged)
		if err != nil {
			return GitDiff{}, err
		}
		out := GitDiff{Path: p, Staged: staged, Untracked: c.Untracked, Diff: string(c.Raw), Lossy: !utf8.Valid(c.Raw)}
		for _, fd := range c.Files {
			out.Binary = out.Binary || fd.Binary
		}
		return out, nil
	})
}

// GitHunks returns one path's hunks, unstaged or staged.
func (s *Git) GitHunks(ctx context.Context, id, p string, staged bool) (GitHunks, error) {
	p, err := s.gitPath(id, p)
	if err != nil {
		return GitHunks{}, err
	}
	return GitRead(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo, _ projections.Session) (GitHunks, error) {
		c, err := r.Changes(ctx, p, staged)
		if err != nil {
			return GitHunks{}, err
		}
		out := GitHunks{Path: p, Staged: staged, Untracked: c.Untracked, Hunks: []GitHunk{}}
		for _, fd := range c.Files {
			out.Binary = out.Binary || fd.Binary
			out.NewFile = out.NewFile || fd.NewFile
			out.Deleted = out.Deleted || fd.Deleted
			out.Renamed = out.Renamed || fd.Renamed
			for _, h := range fd.Hunks {
				out.Hunks = append(out.Hunks, GitHunk{Index: len(out.Hunks), Header: h.Header, OldStart: h.OldStart, OldLines: h.OldLines,
					NewStart: h.NewStart, NewLines: h.NewLines, Lines: h.Lines})
			}
		}
		return out, nil
	})
}

// GitBranches lists the local and remote-tracking branches and HEAD.
func (s *Git) GitBranches(ctx context.Context, id string) (GitBranches, error) {
	return GitRead(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo, _ projections.Session) (GitBranches, error) {
		refs, h, err := r.Branches(ctx)
		return GitBranches{Current: h.Branch, Detached: h.Detached, Commit: h.Commit, Branches: refs}, err
	})
}

// GitStage stages paths as they are in the worktree; none stages every change.
func (s *Git) GitStage(ctx context.Context, id string, paths []string) (events.GitStaged, error) {
	return gitPathsChange(ctx, s.Sandboxes, id, paths, (*git.Repo).Stage, func(p []string, all bool) events.GitStaged { return events.GitStaged{Paths: p, All: all} })
}

// GitUnstage resets paths in the index; none unstages everything.
func (s *Git) GitUnstage(ctx context.Context, id string, paths []string) (events.GitUnstaged, error) {
	return gitPathsChange(ctx, s.Sandboxes, id, paths, (*git.Repo).Unstage, func(p []string, all bool) events.GitUnstaged { return events.GitUnstaged{Paths: p, All: all} })
}

// gitPathsChange runs a whole-path change and records event(paths, all).
func gitPathsChange[E events.Payload](ctx context.Context, s *environments.Sandboxes, id string, paths []string,
	change func(*git.Repo, context.Context, []string) error, event func(paths []string, all bool) E) (E, error) {
	paths, err := s.GitPaths(id, paths)
	if err != nil {
		var zero E
		return zero, err
	}
	return gitChange(ctx, s, id, func(ctx context.Context, r *git.Repo) (*E, error) {
		if err := change(r, ctx, paths); err != nil {
			return nil, err
		}
		e := event(NonNilPaths(paths), len(paths) == 0)
		return &e, nil
	})
}

func NonNilPaths(p []string) []string {
	if p == nil {
		return []string{}
	}
	return p
}

// checkHunk validates a hunk request.
func (s *Git) checkHunk(id string, req *GitHunkRequest) error {
	var err error
	if req.Path, err = s.gitPath(id, req.Path); err != nil {
		return err
	}
	if req.Path == "." {
		return fmt.Errorf("%w: path must name a file, not the session root", core.ErrInvalid)
	}
	if req.Index == nil || *req.Index < 0 {
		return fmt.Errorf("%w: index is required and must be 0 or more", core.ErrInvalid)
	}
	if len(req.Header) > 4096 || !utf8.ValidString(req.Header) || req.Header != "" && !strings.HasPrefix(req.Header, "@@ ") {
		return fmt.Errorf("%w: header must be a hunk's \"@@ … @@\" line", core.ErrInvalid)
	}
	return nil
}

// GitHunk stages (req.Stage, the default) or unstages one hunk of a path.
func (s *Git) GitHunk(ctx context.Context, id string, req GitHunkRequest) (events.GitHunk, error) {
	if err := s.checkHunk(id, &req); err != nil {
		return events.GitHunk{}, err
	}
	if req.Stage == nil || *req.Stage {
		p, err := applyHunk[events.GitHunkStaged](ctx, s.Sandboxes, id, req, git.HunkStage)
		return p.GitHunk, err
	}
	p, err := applyHunk[events.GitHunkUnstaged](ctx, s.Sandboxes, id, req, git.HunkUnstage)
	return p.GitHunk, err
}

// GitDiscardHunk throws away one unstaged hunk of a path.
func (s *Git) GitDiscardHunk(ctx context.Context, id string, req GitHunkRequest) (events.GitHunk, error) {
	if err := s.checkHunk(id, &req); err != nil {
		return events.GitHunk{}, err
	}
	if req.Stage != nil {
		return events.GitHunk{}, fmt.Errorf("%w: stage does not apply to a discard", core.ErrInvalid)
	}
	p, err := applyHunk[events.GitHunkDiscarded](ctx, s.Sandboxes, id, req, git.HunkDiscard)
	return p.GitHunk, err
}

// applyHunk applies one hunk and records event E (one of the hunk events).
func applyHunk[E interface {
	events.Payload
	events.GitHunkStaged | events.GitHunkUnstaged | events.GitHunkDiscarded
}](ctx context.Context, s *environments.Sandboxes, id string, req GitHunkRequest, action string) (E, error) {
	return gitChange(ctx, s, id, func(ctx context.Context, r *git.Repo) (*E, error) {
		h, err := r.ApplyHunk(ctx, req.Path, *req.Index, req.Header, action)
		if err != nil {
			return nil, err
		}
		e := E{GitHunk: events.GitHunk{Path: req.Path, Index: *req.Index, Header: h.Header}}
		return &e, nil
	})
}

// GitDiscard throws away the unstaged changes of p ("" for all of them):
// tracked files return to their staged content, untracked files are
// deleted. It records what it discarded; discarding nothing records nothing.
func (s *Git) GitDiscard(ctx context.Context, id, p string) (events.GitDiscarded, error) {
	if p != "" {
		var err error
		if p, err = s.gitPath(id, p); err != nil {
			return events.GitDiscarded{}, err
		}
		if p == "." {
			p = ""
		}
	}
	ev, err := gitChange(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo) (*events.GitDiscarded, error) {
		paths, err := r.Discard(ctx, p)
		if len(paths) == 0 {
			return nil, err
		}
		e := events.GitDiscarded{Path: p}
		e.Paths, e.More = CapPaths(paths)
		return &e, err
	})
	if err == nil && ev.Paths == nil {
		ev = events.GitDiscarded{Path: p, Paths: []string{}} // nothing to discard
	}
	return ev, err
}

func CapPaths(p []string) ([]string, int) {
	if len(p) > events.MaxEventPaths {
		return p[:events.MaxEventPaths], len(p) - events.MaxEventPaths
	}
	return p, 0
}

// GitCheckout checks out ref: a branch, or anything naming a commit
// (detaching HEAD). Local changes it would overwrite make it refuse.
func (s *Git) GitCheckout(ctx context.Context, id, ref string) (events.GitCheckedOut, error) {
	switch {
	case ref == "":
		return events.GitCheckedOut{}, fmt.Errorf("%w: ref is required", core.ErrInvalid)
	case len(ref) > maxRefLen:
		return events.GitCheckedOut{}, fmt.Errorf("%w: ref is longer than %d bytes", core.ErrInvalid, maxRefLen)
	case !utf8.ValidString(ref) || strings.IndexFunc(ref, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return events.GitCheckedOut{}, fmt.Errorf("%w: ref %q must not contain spaces or control characters", core.ErrInvalid, ref)
	case strings.HasPrefix(ref, "-"):
		return events.GitCheckedOut{}, fmt.Errorf("%w: ref %q must not start with \"-\"", core.ErrInvalid, ref)
	}
	return gitChange(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo) (*events.GitCheckedOut, error) {
		h, err := r.Checkout(ctx, ref)
		if err != nil {
			return nil, err
		}
		return &events.GitCheckedOut{Ref: ref, Commit: h.Commit, Branch: h.Branch, Detached: h.Detached}, nil
	})
}

// GitCommit commits the index (after staging every change when StageAll)
// with the message, or one naming what changed.
func (s *Git) GitCommit(ctx context.Context, id string, req GitCommitRequest) (events.GitCommitted, error) {
	switch {
	case len(req.Message) > maxCommitMessage:
		return events.GitCommitted{}, fmt.Errorf("%w: message is longer than %d bytes", core.ErrInvalid, maxCommitMessage)
	case !utf8.ValidString(req.Message) || strings.IndexByte(req.Message, 0) >= 0:
		return events.GitCommitted{}, fmt.Errorf("%w: message must be valid UTF-8 without NUL bytes", core.ErrInvalid)
	case len(req.StatusToken) > 128:
		return events.GitCommitted{}, fmt.Errorf("%w: status_token is not a token GET git/status answered", core.ErrInvalid)
	}
	return gitChange(ctx, s.Sandboxes, id, func(ctx context.Context, r *git.Repo) (*events.GitCommitted, error) {
		who, err := s.Identity(ctx, r)
		if err != nil {
			return nil, err
		}
		if !who.Known {
			return nil, fmt.Errorf("%w: no commit identity is known, so nothing was committed: %s", core.ErrConflict, IdentityFix)
		}
		stageAll := req.StageAll
		if req.StatusToken != "" {
			// Under the lifecycle lock, so no other Lathe change runs
			// between this check and the commit; with stage_all, the staged
			// index must then be exactly the worktree the token covers, so
			// a write from a terminal meanwhile is refused too.
			tree, err := r.CheckStatusToken(ctx, req.StatusToken)
			if err == nil && stageAll {
				err, stageAll = r.StageAllExactly(ctx, tree), false
			}
			if err != nil {
				return nil, err
			}
		}
		c, err := r.Commit(ctx, req.Message, stageAll, git.Identity{Name: who.Name, Email: who.Email})
		if err != nil {
			return nil, err
		}
		e := events.GitCommitted{Commit: c.Commit, Branch: c.Branch, Subject: c.Subject, StageAll: req.StageAll, Author: who.Name + " <" + who.Email + ">"}
		e.Paths, e.More = CapPaths(c.Paths)
		return &e, nil
	})
}

// Git runs a Session's Git operations and its Check (commands/scm/git.go,
// commands/scm/check.go).
type Git struct {
	*environments.Sandboxes
	checks sync.Map // session id → its Check's runs (commands/scm/check.go)
}

// NewGit returns the Source Control commands.
func NewGit(sb *environments.Sandboxes) *Git { return &Git{Sandboxes: sb} }
