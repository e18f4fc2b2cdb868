package lanes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
	"lathe/runtime/lanefs"
)

// The host-side files of Ways lanes, under <data>/ways/<set>/:
//
//	base/           one frozen private copy of the checkout, taken once per
//	                set when its lanes start and never written after
//	                (lanefs.CopyBase: cp -a, .git/objects hard-linked)
//	<i>/upper       lane i's writes (overlayfs upper layer)
//	<i>/work        overlayfs's scratch directory
//	<i>/merged      the overlay base+upper: the lane's Copy, which its
//	                sandbox mounts at the Workspace's path
//
// A lane thus sees the checkout as it was at the set's start and only its
// own writes; its start does not depend on the number of lanes. Where
// overlayfs is not available (no root, or a data directory that cannot be
// an upper layer), each lane's <i>/merged is instead a whole copy of the
// checkout of its own (`cp -a`), as the log says once.
//
// A worktree Session's checkout has a .git file naming its git directory
// in the Workspace's .git; the base (or whole copy) gets a .git directory
// of its own instead, on the worktree's branch with its index
// (runtime/lanefs/worktree.go), so that no lane writes the Workspace's
// refs or the Session's index.
//
// Mounts outlive a daemon killed under them but not a reboot: every user of
// a lane's files after a restart (laneSandbox, Diff, ReconcileLanes) mounts
// it again from base and upper when it is not mounted, and a mounted one is
// left as it is. A shutdown leaves them mounted (Keep may still need a
// lane's files after a restart). Removal unmounts every lane, renames the
// set's directory into <data>/ways/.trash and deletes it in the
// background, once for all lanes; a removal a crash cut short is finished
// by the start-up sweep (sweepCopies), which also unmounts what a settled
// set left mounted.

const (
	baseDir  = "base"
	trashDir = ".trash"
)

// laneFS is the process's state of the lanes' files.
type laneFS struct {
	// noOverlay forces whole copies (tests of the fallback).
	noOverlay   bool
	overlayOnce sync.Once
	overlayErr  error

	mu    sync.Mutex
	bases map[string]*setBase
	// mounting orders the checks and mounts of lanes' overlays, so that
	// two users of an unmounted lane mount it once.
	mounting sync.Mutex
}

// setBase is one set's base copy, made once however many lanes ask;
// cancel stops a copy under way (Discard).
type setBase struct {
	once   sync.Once
	err    error
	ctx    context.Context
	cancel context.CancelFunc
}

// laneOverlay is the overlay of a lane whose Copy is <set>/<i>/merged.
func laneOverlay(l *projections.Attempt) lanefs.Overlay {
	dir := filepath.Dir(l.Copy)
	return lanefs.Overlay{Base: filepath.Join(filepath.Dir(dir), baseDir), Upper: filepath.Join(dir, "upper"),
		Work: filepath.Join(dir, "work"), Merged: l.Copy}
}

// LaneCopyPath is the Copy a set's lane records at its start.
func LaneCopyPath(waysDir, set string, index int) string {
	return filepath.Join(waysDir, set, strconv.Itoa(index), "merged")
}

// isOverlayLane reports whether the lane's files are an overlay: its upper
// layer exists (a whole copy has none).
func isOverlayLane(l *projections.Attempt) bool {
	if filepath.Base(l.Copy) != "merged" {
		return false
	}
	fi, err := os.Lstat(laneOverlay(l).Upper)
	return err == nil && fi.IsDir()
}

// LaneStore makes the lanes' files: overlays on a per-set base, or whole
// copies where overlays are not available, and the trash they go to.
type LaneStore struct {
	*core.Core
	Ways *WaysRuntime
}

// overlays reports whether lanes get overlays here, probing once; the
// first answer that they do not is logged with its reason.
func (s *LaneStore) overlays() bool {
	f := &s.Ways.fs
	f.overlayOnce.Do(func() {
		if f.noOverlay {
			f.overlayErr = errors.New("overlay lanes are turned off")
		} else {
			f.overlayErr = lanefs.Probe(s.Opts.WaysDir)
		}
		if f.overlayErr != nil {
			s.Log.Warn("Ways lanes get whole copies of the checkout each: overlay mounts are not available here",
				"dir", s.Opts.WaysDir, "err", f.overlayErr)
		}
	})
	return f.overlayErr == nil
}

// laneFiles makes a starting lane's files from the checkout at from: its
// overlay on the set's base (made by the first lane that asks), or, where
// overlays are not available, a whole copy.
func (s *LaneStore) laneFiles(ctx context.Context, set string, from lanefs.Source, l *projections.Attempt) error {
	if !s.overlays() {
		return copyCheckout(ctx, from, l.Copy)
	}
	if err := s.base(ctx, set, from); err != nil {
		return err
	}
	s.Ways.fs.mounting.Lock()
	defer s.Ways.fs.mounting.Unlock()
	return laneOverlay(l).Mount()
}

// base makes the set's base copy of from once: in a temporary directory
// renamed into place when complete, so that a base that exists is whole.
func (s *LaneStore) base(ctx context.Context, set string, from lanefs.Source) error {
	f := &s.Ways.fs
	f.mu.Lock()
	b := f.bases[set]
	if b == nil {
		b = &setBase{}
		b.ctx, b.cancel = context.WithTimeout(ctx, copyTimeout)
		f.bases[set] = b
	}
	f.mu.Unlock()
	b.once.Do(func() {
		dir := filepath.Join(s.Opts.WaysDir, set)
		final := filepath.Join(dir, baseDir)
		if _, err := os.Lstat(final); err == nil {
			return
		}
		if err := os.MkdirAll(dir, 0o711); err != nil {
			b.err = fmt.Errorf("copy the checkout: %w", err)
			return
		}
		tmp := filepath.Join(dir, baseDir+".partial")
		if err := os.RemoveAll(tmp); err != nil {
			b.err = fmt.Errorf("copy the checkout: %w", err)
			return
		}
		if err := lanefs.CopyBase(b.ctx, from, tmp); err != nil {
			if b.ctx.Err() != nil {
				err = fmt.Errorf("copy the checkout: %w", context.Cause(b.ctx))
			}
			b.err = err
			return
		}
		if err := os.Rename(tmp, final); err != nil {
			b.err = fmt.Errorf("copy the checkout: %w", err)
		}
	})
	return b.err
}

// cancelBase stops the copy of a set's base if it is under way: the set
// is discarded, no lane will use it.
func (s *LaneStore) cancelBase(set string) {
	s.Ways.fs.mu.Lock()
	if b := s.Ways.fs.bases[set]; b != nil {
		b.cancel()
	}
	s.Ways.fs.mu.Unlock()
}

// forgetBase drops the process's record of a set's base once its lanes
// are gone.
func (s *LaneStore) forgetBase(set string) {
	s.cancelBase(set)
	s.Ways.fs.mu.Lock()
	delete(s.Ways.fs.bases, set)
	s.Ways.fs.mu.Unlock()
}

// MountLane mounts a lane's overlay again when a restart or reboot left it
// unmounted; a whole copy, or a mounted overlay, needs nothing.
func (s *LaneStore) MountLane(l *projections.Attempt) error {
	if !isOverlayLane(l) {
		return nil
	}
	s.Ways.fs.mounting.Lock()
	defer s.Ways.fs.mounting.Unlock()
	if err := laneOverlay(l).Mount(); err != nil {
		return fmt.Errorf("%w: the files of lane %d: %v", core.ErrUnavailable, l.Index, err)
	}
	return nil
}

// copyCheckout copies the Workspace for a lane that has no overlay: every
// file, .git included, owners and modes kept, sharing no inode with it (a
// reflink where the filesystem has them, else a full copy).
func copyCheckout(ctx context.Context, from lanefs.Source, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o711); err != nil {
		return fmt.Errorf("copy the checkout: %w", err)
	}
	if _, err := os.Lstat(to); err == nil {
		// A copy this lane began before a restart: start it again.
		if err := os.RemoveAll(to); err != nil {
			return fmt.Errorf("copy the checkout: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", "--", from.Dir, to).CombinedOutput()
	if err != nil {
		return fmt.Errorf("copy the checkout: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := lanefs.Standalone(ctx, from, to); err != nil {
		return fmt.Errorf("copy the checkout: %w", err)
	}
	return nil
}

// WaysCheckout refuses a Session whose checkout Ways cannot copy: the root
// of a Git repository (.git a folder), or a worktree Session's worktree
// (whose lanes get git directories of their own: laneSource).
func WaysCheckout(ss projections.Session) error {
	if ss.Isolation == events.IsolationWorktree {
		return nil
	}
	fi, err := os.Lstat(filepath.Join(ss.WorkingDir, ".git"))
	if err == nil && !fi.IsDir() {
		err = errors.New("its .git is not a folder")
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: the checkout of session %q is not the root of a Git repository nor the Session's worktree (%v); Ways need one", core.ErrConflict, ss.ID, err)
}

// laneSource is the checkout of ss a lane copies: a worktree Session's
// with the git directories Lathe recorded for its worktree, never those
// its .git file (the sandbox's to rewrite) names.
func (s *LaneStore) laneSource(ss projections.Session) (lanefs.Source, error) {
	src := lanefs.Source{Dir: ss.WorkingDir}
	if ss.Isolation != events.IsolationWorktree {
		return src, nil
	}
	w, ok := s.Store.Workspace(ss.WorkspaceID)
	if !ok {
		return src, fmt.Errorf("%w: workspace %q", core.ErrNotFound, ss.WorkspaceID)
	}
	src.Own, src.Common = git.WorktreeGitDirs(w.Path, ss.WorkingDir)
	return src, nil
}

// trashSet unmounts every lane of the set and moves its directory into the
// trash, whose removal runs in the background (trashed); the set's files
// are gone from their place when it returns.
func (s *LaneStore) trashSet(set string) error {
	dir := filepath.Join(s.Opts.WaysDir, set)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		s.forgetBase(set)
		return nil
	}
	if err := lanefs.UnmountUnder(dir); err != nil {
		return fmt.Errorf("unmount the lanes of set %s: %w", set, err)
	}
	trash := filepath.Join(s.Opts.WaysDir, trashDir)
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return fmt.Errorf("remove the lanes' files: %w", err)
	}
	if err := os.Rename(dir, filepath.Join(trash, set+"-"+ulid.Make().String())); err != nil {
		return fmt.Errorf("remove the lanes' files: %w", err)
	}
	s.forgetBase(set)
	s.emptyTrash()
	return nil
}

// emptyTrash removes the trash in the background, one removal at a time;
// Drain waits for it at shutdown, and what a crash leaves the start-up
// sweep removes.
func (s *LaneStore) emptyTrash() {
	s.Ways.Cleanup.Add(1)
	go func() {
		defer s.Ways.Cleanup.Done()
		s.Ways.trash.Lock()
		defer s.Ways.trash.Unlock()
		trash := filepath.Join(s.Opts.WaysDir, trashDir)
		entries, err := os.ReadDir(trash)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.Log.Warn("remove removed Ways lanes' files", "err", err)
		}
		for _, e := range entries {
			if err := removeUnmounted(filepath.Join(trash, e.Name())); err != nil {
				s.Log.Warn("remove removed Ways lanes' files", "dir", e.Name(), "err", err)
			}
		}
	}()
}

// removeUnmounted removes dir after unmounting whatever is mounted under
// it, so that the removal never reaches through a mount.
func removeUnmounted(dir string) error {
	if err := lanefs.UnmountUnder(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
