package files

// The Session file tree's changes: create a file or a folder, rename or
// move, delete. Each is confined like a write (CleanPath, then os.Root,
// which refuses a path whose parents resolve outside the root), refuses
// the root itself and anything under a .git directory (git's own data is
// changed only through git), runs under the Session's lifecycle lock and is
// journaled after it is made, so the Session's journal audits the
// operator's tree changes as it audits the editor's saves.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"lathe/commands/core"
	"lathe/commands/environments"

	"lathe/journal/events"
)

// Kinds of a new entry (POST /files/create).
const (
	KindFile = "file"
	KindDir  = "dir"
)

// FileRenamed is the answer of POST /files/rename.
type FileRenamed struct {
	events.FileRenamed
	Entry TreeEntry `json:"entry"`
}

// treePath cleans a path a tree change names: below the root, and not in
// a .git directory.
func treePath(field, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: %s is required", core.ErrInvalid, field)
	}
	rel, err := core.CleanPath(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", fmt.Errorf("%w: %s must name an entry below the session root, not the root", core.ErrInvalid, field)
	}
	if err := outsideGit(field, rel); err != nil {
		return "", err
	}
	return rel, nil
}

// outsideGit is the one rule that keeps the file routes (a tree change, a
// write) out of git's data: no element of the cleaned path p is a .git
// directory, in any case (a case-insensitive filesystem opens .GIT as
// .git). Git's data is changed only through git.
func outsideGit(field, p string) error {
	for elem := range strings.SplitSeq(p, "/") {
		if strings.EqualFold(elem, ".git") {
			return fmt.Errorf("%w: %s %q is inside .git; change git's data through git (Source Control or a terminal)", core.ErrForbidden, field, p)
		}
	}
	return nil
}

// treeChange runs change on the Session root under the lifecycle lock,
// recorded then acted: change checks, calls intend (which records the
// intent, detail saying what) right before it touches the tree, and
// returns its event, appended with the intent's settlement. A change
// refused before intend records nothing. The change runs to its end even
// if the client goes away, so what it did is always recorded.
func treeChange[T any](ctx context.Context, s *environments.Sandboxes, id, detail string, change func(root environments.SessionFS, intend func() error) (T, events.Payload, error)) (T, error) {
	var zero T
	release, err := s.OwnReady(ctx, id)
	if err != nil {
		return zero, err
	}
	defer release()
	root, err := s.Root(context.WithoutCancel(ctx), id) // runs to its end
	if err != nil {
		return zero, err
	}
	defer root.Close()
	var fx *core.Effect
	intend := func() (err error) {
		fx, err = s.Intend(ctx, events.EffectFileTree, id, detail, "")
		return err
	}
	out, ev, err := change(root, intend)
	if err != nil {
		if fx == nil {
			return zero, err
		}
		if serr := fx.Settle(ctx, err); serr != nil {
			s.Log.Error("settle a refused file tree change", "session", id, "err", serr)
		}
		return zero, err
	}
	if err := fx.Settle(ctx, nil, events.New(id, ev)); err != nil {
		return zero, err
	}
	return out, nil
}

// entryOf lists rel as a tree entry.
func (s *Files) entryOf(root environments.SessionFS, rel string) (TreeEntry, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return TreeEntry{}, s.pathError(rel, err)
	}
	dir := "."
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir = rel[:i]
	}
	return newTreeEntry(dir, fi), nil
}

// exists refuses a path that already names an entry (a symlink counts,
// dangling or not).
func (s *Files) exists(root environments.SessionFS, rel string) error {
	_, err := root.Lstat(rel)
	switch {
	case err == nil:
		return fmt.Errorf("%w: %q already exists", core.ErrConflict, rel)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return s.pathError(rel, err)
}

// Create makes an empty file (KindFile) or a folder (KindDir) at rel,
// whose parent must exist; an existing entry there is a conflict.
func (s *Files) Create(ctx context.Context, id, rel, kind string) (TreeEntry, error) {
	rel, err := treePath("path", rel)
	if err != nil {
		return TreeEntry{}, err
	}
	if kind != KindFile && kind != KindDir {
		return TreeEntry{}, fmt.Errorf("%w: kind must be %q or %q, not %q", core.ErrInvalid, KindFile, KindDir, kind)
	}
	return treeChange(ctx, s.Sandboxes, id, "create "+kind+" "+rel, func(root environments.SessionFS, intend func() error) (TreeEntry, events.Payload, error) {
		return s.createEntry(root, rel, kind, intend)
	})
}

// createEntry creates the entry of Create in root.
func (s *Files) createEntry(root environments.SessionFS, rel, kind string, intend func() error) (TreeEntry, events.Payload, error) {
	if err := s.exists(root, rel); err != nil {
		return TreeEntry{}, nil, err
	}
	if err := intend(); err != nil {
		return TreeEntry{}, nil, err
	}
	var ev events.Payload
	if kind == KindDir {
		if err := root.Mkdir(rel, 0o755); err != nil {
			return TreeEntry{}, nil, s.createError(rel, err)
		}
		ev = events.FolderCreated{Path: rel}
	} else {
		if err := root.CreateFile(rel, 0o644); err != nil {
			return TreeEntry{}, nil, s.createError(rel, err)
		}
		ev = events.FileCreated{Path: rel}
	}
	e, err := s.entryOf(root, rel)
	return e, ev, err
}

// createError classes the failure to create rel: a missing parent is
// named as such, an entry made meanwhile is a conflict.
func (s *Files) createError(rel string, err error) error {
	switch {
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%w: %q already exists", core.ErrConflict, rel)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: the folder that would hold %q does not exist", core.ErrNotFound, rel)
	}
	return s.pathError(rel, err)
}

// Rename renames or moves the entry at from to to, which must not exist
// and whose parent must; a symlink is moved, not what it names.
func (s *Files) Rename(ctx context.Context, id, from, to string) (FileRenamed, error) {
	from, err := treePath("from", from)
	if err != nil {
		return FileRenamed{}, err
	}
	if to, err = treePath("to", to); err != nil {
		return FileRenamed{}, err
	}
	switch {
	case from == to:
		return FileRenamed{}, fmt.Errorf("%w: from and to name the same path %q", core.ErrInvalid, from)
	case strings.HasPrefix(to, from+"/"):
		return FileRenamed{}, fmt.Errorf("%w: %q cannot move into itself (%q)", core.ErrInvalid, from, to)
	}
	return treeChange(ctx, s.Sandboxes, id, "rename "+from+" -> "+to, func(root environments.SessionFS, intend func() error) (FileRenamed, events.Payload, error) {
		return s.renameIn(root, from, to, intend)
	})
}

// renameIn makes the move of Rename in root.
func (s *Files) renameIn(root environments.SessionFS, from, to string, intend func() error) (FileRenamed, events.Payload, error) {
	src, err := s.entryOf(root, from)
	if err != nil {
		return FileRenamed{}, nil, err
	}
	if err := s.exists(root, to); err != nil {
		return FileRenamed{}, nil, err
	}
	if err := intend(); err != nil {
		return FileRenamed{}, nil, err
	}
	if err := root.Rename(from, to); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return FileRenamed{}, nil, fmt.Errorf("%w: the folder that would hold %q does not exist", core.ErrNotFound, to)
		}
		return FileRenamed{}, nil, s.pathError(to, err)
	}
	ev := events.FileRenamed{From: from, To: to, Kind: src.Type}
	e, err := s.entryOf(root, to)
	return FileRenamed{FileRenamed: ev, Entry: e}, ev, err
}

// Delete removes the entry at rel: a file or symlink (never what it
// names), an empty folder, or with recursive a folder and everything in it.
func (s *Files) Delete(ctx context.Context, id, rel string, recursive bool) (events.FileDeleted, error) {
	rel, err := treePath("path", rel)
	if err != nil {
		return events.FileDeleted{}, err
	}
	return treeChange(ctx, s.Sandboxes, id, "delete "+rel, func(root environments.SessionFS, intend func() error) (events.FileDeleted, events.Payload, error) {
		return s.deleteIn(root, rel, recursive, intend)
	})
}

// deleteIn removes the entry of Delete in root.
func (s *Files) deleteIn(root environments.SessionFS, rel string, recursive bool, intend func() error) (events.FileDeleted, events.Payload, error) {
	e, err := s.entryOf(root, rel)
	if err != nil {
		return events.FileDeleted{}, nil, err
	}
	if e.Type == entryDir && !recursive && !emptyDir(root, rel) {
		return events.FileDeleted{}, nil, notEmpty(rel)
	}
	if err := intend(); err != nil {
		return events.FileDeleted{}, nil, err
	}
	ev := events.FileDeleted{Path: rel, Kind: e.Type}
	if e.Type == entryDir && recursive {
		ev.Recursive = true
	}
	err = root.Remove(rel, ev.Recursive)
	switch {
	case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST):
		return events.FileDeleted{}, nil, notEmpty(rel)
	case err != nil:
		return events.FileDeleted{}, nil, s.pathError(rel, err)
	}
	return ev, ev, nil
}

func notEmpty(rel string) error {
	return fmt.Errorf("%w: the folder %q is not empty; delete it with recursive to remove its contents too", core.ErrConflict, rel)
}

// emptyDir reports whether the folder rel holds nothing (an unreadable one
// counts as empty: its removal then says why).
func emptyDir(root environments.SessionFS, rel string) bool {
	names, err := root.ReadDir(rel, 0)
	return err != nil || len(names) == 0
}
