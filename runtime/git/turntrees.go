package git

// A turn's code: the two worktree snapshots (Snapshot) a turn took before
// and after it, kept alive by refs so that gc never prunes them, read as a
// list of changed paths or one path's patch, and written back into the
// worktree without touching the index or HEAD.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
)

// Tree change statuses.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
	Renamed  = "renamed"
)

// TreeChange is one path that differs between two snapshots. From is the
// source of a rename.
type TreeChange struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	From   string `json:"from,omitempty"`
}

// ParseNameStatus parses `git diff-tree -r -z --name-status` output: a
// status field, then one path (two for a rename or copy), each
// NUL-terminated. A copy is reported as the addition of its destination; a
// type change as a modification.
func ParseNameStatus(data []byte) ([]TreeChange, error) {
	f := splitNul(data)
	out := []TreeChange{}
	for i := 0; i < len(f); {
		st := f[i]
		if st == "" {
			return nil, fmt.Errorf("%w: an empty status field", ErrMalformedDiff)
		}
		two := st[0] == 'R' || st[0] == 'C'
		n := 2
		if two {
			n = 3
		}
		if i+n > len(f) {
			return nil, fmt.Errorf("%w: status %q without its path", ErrMalformedDiff, clip(st))
		}
		c := TreeChange{Path: f[i+1]}
		switch st[0] {
		case 'A':
			c.Status = Added
		case 'M', 'T':
			c.Status = Modified
		case 'D':
			c.Status = Deleted
		case 'R':
			c.Status, c.From, c.Path = Renamed, f[i+1], f[i+2]
		case 'C':
			c.Status, c.Path = Added, f[i+2]
		default:
			return nil, fmt.Errorf("%w: unknown status %q", ErrMalformedDiff, clip(st))
		}
		if c.Path == "" || two && c.From == "" && st[0] == 'R' {
			return nil, fmt.Errorf("%w: status %q with an empty path", ErrMalformedDiff, clip(st))
		}
		out = append(out, c)
		i += n
	}
	return out, nil
}

// TreeChanges lists what differs between two snapshots (tree or commit IDs),
// renames detected when renames is true, else each side of a rename as
// its own deletion and addition.
func (r *Repo) TreeChanges(ctx context.Context, from, to string, renames bool) ([]TreeChange, error) {
	if err := objectIDs(from, to); err != nil {
		return nil, err
	}
	rename := "--no-renames"
	if renames {
		rename = "-M"
	}
	res, err := r.run(ctx, maxStatusOutput, nil, "diff-tree", "-r", "-z", "--name-status", "--no-ext-diff", rename, from, to)
	out, err := res.ok("diff-tree", err)
	if err != nil {
		return nil, snapshotGone(err)
	}
	return ParseNameStatus(out)
}

// TreeDiff is one path's patch between two snapshots, renames not followed
// (a renamed path shows as its deletion or creation).
func (r *Repo) TreeDiff(ctx context.Context, from, to, p string) (Changes, error) {
	if err := objectIDs(from, to); err != nil {
		return Changes{}, err
	}
	c := Changes{Path: p}
	var err error
	if c.Raw, err = r.diff(ctx, "--no-renames", from, to, "--", p); err != nil {
		return Changes{}, snapshotGone(err)
	}
	c.Files, err = ParseDiff(c.Raw)
	return c, err
}

// ErrSnapshotGone: a snapshot is no longer in the repository (taken before
// refs kept snapshots, and pruned by gc since; or the repository was
// replaced).
var ErrSnapshotGone = errors.New("the snapshot is no longer in the repository")

// snapshotGone classifies git's complaint about a missing object.
func snapshotGone(err error) error {
	var e *Error
	if errors.As(err, &e) && (strings.Contains(e.Stderr, "bad object") || strings.Contains(e.Stderr, "failed to unpack tree object")) {
		return fmt.Errorf("%w: %w", ErrSnapshotGone, err)
	}
	return err
}

func objectIDs(ids ...string) error {
	for _, id := range ids {
		if !objectID.MatchString(id) {
			return fmt.Errorf("snapshots must be object IDs, not %q", clip(id))
		}
	}
	return nil
}

// RefValue is a ref and the object it names.
type RefValue struct{ Ref, Object string }

// CreateRefs creates every ref in one transaction, or none: it fails when
// any of them exists already. Names must be valid full ref names (the
// caller builds them; git check-ref-format's rules).
func (r *Repo) CreateRefs(ctx context.Context, refs []RefValue) error {
	return r.updateRefs(ctx, "create", refs)
}

// SetRefs points every ref at its object in one transaction, whatever it
// named before.
func (r *Repo) SetRefs(ctx context.Context, refs []RefValue) error {
	return r.updateRefs(ctx, "update", refs)
}

// DeleteRefs deletes each ref that still names the object given, in one
// transaction; a ref that is gone or names another object is left alone.
func (r *Repo) DeleteRefs(ctx context.Context, refs []RefValue) error {
	if len(refs) == 0 {
		return nil
	}
	now, err := r.refValues(ctx, refs)
	if err != nil {
		return err
	}
	var del []RefValue
	for _, rv := range refs {
		if now[rv.Ref] == rv.Object {
			del = append(del, rv)
		}
	}
	return r.updateRefs(ctx, "delete", del)
}

// refValues reads what each of refs names now (absent: not in the map).
func (r *Repo) refValues(ctx context.Context, refs []RefValue) (map[string]string, error) {
	args := []string{"for-each-ref", "--format=%(refname)%00%(objectname)"}
	for _, rv := range refs {
		args = append(args, rv.Ref)
	}
	res, err := r.run(ctx, maxStatusOutput, nil, args...)
	out, err := res.ok("for-each-ref", err)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range splitLines(out) {
		if ref, obj, ok := strings.Cut(l, "\x00"); ok {
			m[ref] = obj
		}
	}
	return m, nil
}

// updateRefs runs one `git update-ref --stdin -z` transaction of verb
// (create, update or delete) over refs.
func (r *Repo) updateRefs(ctx context.Context, verb string, refs []RefValue) error {
	if len(refs) == 0 {
		return nil
	}
	var b bytes.Buffer
	for _, rv := range refs {
		if !strings.HasPrefix(rv.Ref, "refs/") || strings.ContainsAny(rv.Ref, "\x00\n") {
			return fmt.Errorf("%q is not a full ref name", clip(rv.Ref))
		}
		if err := objectIDs(rv.Object); err != nil {
			return err
		}
		b.WriteString(verb + " " + rv.Ref)
		b.WriteByte(0)
		b.WriteString(rv.Object)
		b.WriteByte(0)
		if verb == "update" {
			b.WriteByte(0) // no old value: whatever the ref names
		}
	}
	res, err := r.run(ctx, maxSmallOutput, b.Bytes(), "update-ref", "--stdin", "-z")
	_, err = res.ok("update-ref", err)
	return err
}

// WriteFromTree writes paths into the worktree as tree holds them (content
// and mode), through a temporary index, so the real index and HEAD stay as
// they were; git refuses to write through a symlinked leading directory.
// Every path must be a file in tree. remove are deleted from the worktree
// (a missing one is no error).
func (r *Repo) WriteFromTree(ctx context.Context, tree string, write, remove []string) error {
	if err := objectIDs(tree); err != nil {
		return err
	}
	if len(write) > 0 {
		res, err := r.script(ctx, "checkout-index", maxSmallOutput, nulList(write), `set -e
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
rm -f "$tmp"
GIT_INDEX_FILE=$tmp git read-tree "$1"
GIT_INDEX_FILE=$tmp git checkout-index -f -z --stdin
`, tree)
		if _, err := res.ok("checkout-index", err); err != nil {
			return snapshotGone(err)
		}
	}
	if len(remove) > 0 {
		res, err := r.script(ctx, "rm", maxSmallOutput, nulList(remove), `xargs -0 -r rm -f --`)
		if _, err := res.ok("rm", err); err != nil {
			return err
		}
	}
	return nil
}
