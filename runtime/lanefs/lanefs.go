// Package lanefs makes the host-side files of Ways lanes: one frozen
// private copy of a checkout per set (CopyBase, the base), and per lane an
// overlayfs mount whose lower layer is that base and whose upper layer
// holds only the lane's writes (Overlay). Lanes then share the one copy,
// a lane's start does not depend on how many lanes there are, and neither
// the Workspace's later writes nor another lane's reach a lane.
//
// A lane's mount survives a restart of the daemon but not a reboot of the
// host: every user of a lane's files calls Overlay.Mount first, which
// mounts it again from base and upper when it is not mounted (mountinfo),
// and does nothing when it is.
package lanefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// CopyBase copies the checkout at from to base, which must not exist: a
// repository's whole directory (`cp -a`: modes, owners, times, links,
// extended attributes), except that the files under .git/objects are
// hard-linked rather than copied. Git writes an object file once and never
// changes it in place (a new object is a new file renamed into place, gc
// deletes whole files), so the link shares nothing that changes, and a
// large pack is not copied. Only a copy no one writes may link them (an
// overlay's lower layer): a process writing through a link would write the
// checkout's object. Where a link fails (another filesystem) the objects
// are copied. Several `cp` share the worktree while .git is copied beside
// them. A worktree's .git file becomes a git directory of its own, made
// from the git directories from records (Source), never from the file.
func CopyBase(ctx context.Context, src Source, to string) error {
	from := src.Dir
	if err := mkdirLike(from, to); err != nil {
		return err
	}
	k := copiers()
	items, dirs, err := spread(from, to, ".git", 8*k)
	if err != nil {
		return fmt.Errorf("copy the checkout: %w", err)
	}
	errs := make([]error, k+1)
	var wg sync.WaitGroup
	for i := range k {
		var part []string
		for j := i; j < len(items); j += k {
			part = append(part, items[j])
		}
		wg.Go(func() { errs[i] = copyItems(ctx, from, to, part) })
	}
	wg.Go(func() { errs[k] = copyGit(ctx, src, to) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("copy the checkout: %w", err)
	}
	// The directories made here get their times last: their entries set them.
	for _, d := range append(dirs, ".git", ".") {
		if _, err := os.Lstat(filepath.Join(to, d)); err == nil {
			if err := copyTimes(filepath.Join(from, d), filepath.Join(to, d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("copy the checkout: %w", err)
			}
		}
	}
	return nil
}

// copiers is how many `cp` share the worktree: a copy waits on the
// filesystem as much as on the CPU.
func copiers() int { return min(max(runtime.NumCPU(), 2), 4) }

// spread lists the entries of the directory from (relative paths, skip
// left out) that the copies take whole: while there are fewer than want,
// directories are split into their entries (made in to with their owner
// and mode, listed in dirs), a few levels down at most, so that one large
// directory does not leave a single copy with all the work.
func spread(from, to, skip string, want int) (items, dirs []string, err error) {
	items, err = names(from, ".", skip)
	for level := 0; err == nil && len(items) < want && level < 3; level++ {
		var next []string
		for _, it := range items {
			fi, lerr := os.Lstat(filepath.Join(from, it))
			if lerr != nil || !fi.IsDir() {
				next = append(next, it)
				continue
			}
			if err = mkdirLike(filepath.Join(from, it), filepath.Join(to, it)); err != nil {
				return nil, nil, err
			}
			dirs = append(dirs, it)
			children, err := names(from, it)
			if err != nil {
				return nil, nil, err
			}
			next = append(next, children...)
		}
		if len(next) == len(items) {
			break // no directory left to split
		}
		items = next
	}
	return items, dirs, err
}

// names lists the entries of from/dir as paths relative to from, those
// named in skip left out.
func names(from, dir string, skip ...string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(from, dir))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if !slices.Contains(skip, e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// copyItems copies the entries items of from (relative paths) to the same
// paths under to, whose parents exist, in batches per `cp -a`.
func copyItems(ctx context.Context, from, to string, items []string) error {
	const batch = 512
	for len(items) > 0 {
		n := min(len(items), batch)
		if err := cp(ctx, from, append([]string{"-a", "--parents", "-t", to, "--"}, items[:n]...)...); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}

// copyGit copies src's .git to to/.git, its object files hard-linked
// where the filesystem lets them be. A worktree's .git file becomes a
// directory of its own (copyWorktreeGit).
func copyGit(ctx context.Context, src Source, to string) error {
	git := filepath.Join(src.Dir, ".git")
	fi, err := os.Lstat(git)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode().IsRegular():
		return copyWorktreeGit(ctx, src, to, true)
	case !fi.IsDir():
		return fmt.Errorf("%s is neither a folder nor a file (a symbolic link is never followed)", git)
	}
	if err := mkdirLike(git, filepath.Join(to, ".git")); err != nil {
		return err
	}
	items, err := names(git, ".", "objects")
	if err != nil {
		return err
	}
	if err := copyItems(ctx, git, filepath.Join(to, ".git"), items); err != nil {
		return err
	}
	return copyObjects(ctx, git, filepath.Join(to, ".git"), true)
}

// copyObjects copies the directory objects of the git directory from to
// the git directory to: hard-linked when link is set and the filesystem
// lets it be, else copied.
func copyObjects(ctx context.Context, from, to string, link bool) error {
	objects := filepath.Join(from, "objects")
	if _, err := os.Lstat(objects); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if link && cp(ctx, from, "-al", "--", objects, to) == nil {
		return nil
	}
	if err := os.RemoveAll(filepath.Join(to, "objects")); err != nil {
		return err
	}
	return cp(ctx, from, "-a", "--", objects, to)
}

func cp(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "cp", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mkdirLike makes the directory to with from's owner and mode.
func mkdirLike(from, to string) error {
	fi, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", from)
	}
	if err := os.Mkdir(to, 0o700); err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Lchown(to, int(st.Uid), int(st.Gid)); err != nil && os.Geteuid() == 0 {
		return err
	}
	return os.Chmod(to, fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid))
}

// copyTimes gives to from's access and modification times.
func copyTimes(from, to string) error {
	fi, err := os.Lstat(from)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	ts := []unix.Timespec{unix.NsecToTimespec(st.Atim.Nano()), unix.NsecToTimespec(st.Mtim.Nano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, to, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// Overlay is one lane's files: Merged shows Base with Upper over it; the
// lane's writes land in Upper (Work is overlayfs's scratch directory on
// Upper's filesystem). Base is never written.
type Overlay struct {
	Base, Upper, Work, Merged string
}

// Mount mounts the overlay at Merged, making Upper, Work and Merged when
// they are missing; when Merged is already mounted it does nothing. A new
// Upper gets the owner and mode of Base's root, which Merged's root shows.
func (o Overlay) Mount() error {
	if on, err := Mounted(o.Merged); err != nil || on {
		return err
	}
	fi, err := os.Stat(o.Base)
	if err != nil {
		return fmt.Errorf("mount a lane: its base: %w", err)
	}
	if _, err := os.Lstat(o.Upper); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(o.Upper), 0o700); err != nil {
			return fmt.Errorf("mount a lane: %w", err)
		}
		if err := os.Mkdir(o.Upper, 0o700); err != nil {
			return fmt.Errorf("mount a lane: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if err := os.Chown(o.Upper, int(st.Uid), int(st.Gid)); err != nil && os.Geteuid() == 0 {
			return fmt.Errorf("mount a lane: %w", err)
		}
		if err := os.Chmod(o.Upper, fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid)); err != nil {
			return fmt.Errorf("mount a lane: %w", err)
		}
	}
	for _, d := range []string{o.Work, o.Merged} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("mount a lane: %w", err)
		}
	}
	m := mount.Mount{Type: "overlay", Source: "overlay", Options: []string{
		"lowerdir=" + o.Base, "upperdir=" + o.Upper, "workdir=" + o.Work, "nosuid", "nodev",
	}}
	if err := m.Mount(o.Merged); err != nil {
		return fmt.Errorf("mount a lane's overlay: %w", err)
	}
	return nil
}

// Unmount unmounts Merged (every mount stacked there); a path that is not
// mounted, or does not exist, is no error.
func (o Overlay) Unmount() error {
	if err := mount.UnmountAll(o.Merged, 0); err != nil {
		return fmt.Errorf("unmount a lane's overlay: %w", err)
	}
	return nil
}

// Mounted reports whether path is a mount point; a missing path is not.
func Mounted(path string) (bool, error) {
	on, err := mountinfo.Mounted(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return on, err
}

// MountsUnder lists the mount points at or under dir.
func MountsUnder(dir string) ([]string, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(mounts))
	for i, m := range mounts {
		out[i] = m.Mountpoint
	}
	return out, nil
}

// UnmountUnder unmounts every mount at or under dir, deepest first, so
// that dir can be removed without reaching through a mount.
func UnmountUnder(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return mount.UnmountRecursive(dir, 0)
}

// probePrefix names Probe's scratch trees in dir.
const probePrefix = ".overlay-probe-"

// SweepProbes removes what probes in dir that a kill cut short left:
// their trees, unmounting first whatever is still mounted in them.
func SweepProbes(dir string) error {
	stale, _ := filepath.Glob(filepath.Join(dir, probePrefix+"*"))
	for _, old := range stale {
		if err := UnmountUnder(old); err != nil {
			return fmt.Errorf("sweep an interrupted overlay probe: %w", err)
		}
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("sweep an interrupted overlay probe: %w", err)
		}
	}
	return nil
}

// Probe reports why dir's filesystem cannot hold lane overlays, or nil
// when it can: it mounts a small overlay under dir and unmounts it.
func Probe(dir string) error {
	if os.Geteuid() != 0 {
		return errors.New("overlay mounts need root")
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	if err := SweepProbes(dir); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, probePrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	base := filepath.Join(tmp, "base")
	if err := os.Mkdir(base, 0o700); err != nil {
		return err
	}
	o := Overlay{Base: base, Upper: filepath.Join(tmp, "upper"), Work: filepath.Join(tmp, "work"), Merged: filepath.Join(tmp, "merged")}
	if err := o.Mount(); err != nil {
		return err
	}
	return o.Unmount()
}
