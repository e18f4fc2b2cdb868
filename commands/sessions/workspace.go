package sessions

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
)

// CanonicalDir resolves an absolute directory path the way Workspace paths
// are stored: cleaned, with every symlink resolved. It must exist.
func CanonicalDir(path string) (string, error) {
	switch {
	case path == "":
		return "", fmt.Errorf("%w: path is required", core.ErrInvalid)
	case strings.ContainsRune(path, 0):
		return "", fmt.Errorf("%w: path contains a NUL byte", core.ErrInvalid)
	case !filepath.IsAbs(path):
		return "", fmt.Errorf("%w: path %q must be absolute", core.ErrInvalid, path)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(path))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: path %q does not exist", core.ErrInvalid, path)
	}
	if err != nil {
		return "", fmt.Errorf("%w: path %q: %v", core.ErrInvalid, path, err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%w: path %q: %v", core.ErrInvalid, path, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%w: path %q is not a directory", core.ErrInvalid, path)
	}
	return real, nil
}

// checkDataDir refuses a Workspace at real (a canonical path) that
// equals, lies inside or contains the data dir: its sandbox would read the
// cookie secret and write the journal. Both sides are compared with every
// symlink resolved.
func checkDataDir(dataDir, real string) error {
	if dataDir == "" {
		return nil
	}
	data, err := filepath.EvalSymlinks(filepath.Clean(dataDir))
	if err != nil {
		return fmt.Errorf("%w: the data dir %q: %v", core.ErrUnavailable, dataDir, err)
	}
	if core.Within(data, real) || core.Within(real, data) {
		return fmt.Errorf("%w: path %q is, lies inside or contains the daemon's data dir %q: a sandbox there would reach the journal and the cookie secret", core.ErrInvalid, real, data)
	}
	return nil
}

// RegisterWorkspace registers the directory at path, or returns the
// Workspace already registered there (created reports which). A name renames
// an existing Workspace; an omitted name keeps its label.
func (s *Sessions) RegisterWorkspace(ctx context.Context, path string, name *string) (w projections.Workspace, created bool, err error) {
	real, err := CanonicalDir(path)
	if err != nil {
		return w, false, err
	}
	if err := checkDataDir(s.Opts.DataDir, real); err != nil {
		return w, false, err
	}
	label := filepath.Base(real)
	if name != nil {
		if label, err = core.CleanName("name", *name); err != nil {
			return w, false, err
		}
	}
	s.Membership.Lock()
	defer s.Membership.Unlock()
	if w, ok := s.Store.WorkspaceByPath(real); ok {
		if name == nil || w.Name == label {
			return w, false, nil
		}
		w, err = s.RenameWorkspace(ctx, w.ID, label)
		return w, false, err
	}
	id := ulid.Make().String()
	err = s.Append(ctx, []journal.Event{events.New(id, events.WorkspaceRegistered{Path: real, Name: label})},
		journal.Expectation{AggregateID: id})
	if err != nil {
		return w, false, err
	}
	w, _ = s.Store.Workspace(id)
	return w, true, nil
}

// RenameWorkspace changes a Workspace's display label.
func (s *Sessions) RenameWorkspace(ctx context.Context, id, name string) (projections.Workspace, error) {
	name, err := core.CleanName("name", name)
	if err != nil {
		return projections.Workspace{}, err
	}
	var w projections.Workspace
	err = s.Retry(ctx, func() error {
		var ok bool
		if w, ok = s.Store.Workspace(id); !ok {
			return fmt.Errorf("%w: workspace %q", core.ErrNotFound, id)
		}
		if w.Name == name {
			return nil
		}
		return s.AppendExpecting(ctx, id, w.Version, events.WorkspaceRenamed{Name: name})
	})
	if err != nil {
		return projections.Workspace{}, err
	}
	w, _ = s.Store.Workspace(id)
	return w, nil
}

// RemoveWorkspace unregisters a Workspace that has no Sessions. The
// directory is never touched.
func (s *Sessions) RemoveWorkspace(ctx context.Context, id string) error {
	s.Membership.Lock()
	defer s.Membership.Unlock()
	return s.Retry(ctx, func() error {
		w, ok := s.Store.Workspace(id)
		if !ok {
			return fmt.Errorf("%w: workspace %q", core.ErrNotFound, id)
		}
		if n := s.Store.SessionCount(id); n > 0 {
			return fmt.Errorf("%w: workspace %q still has %d sessions; delete them first", core.ErrConflict, id, n)
		}
		return s.AppendExpecting(ctx, id, w.Version, events.WorkspaceRemoved{})
	})
}
