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
// are copied. The worktree and .git are copied side by side.
func CopyBase(ctx context.Context, from, to string) error {
	if err := mkdirLike(from, to); err != nil {
		return err
	}
	git := filepath.Join(from, ".git")
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = copyEntries(ctx, from, to, ".git") })
	wg.Go(func() {
		if err := mkdirLike(git, filepath.Join(to, ".git")); err != nil {
			errs[1] = err
			return
		}
		if errs[1] = copyEntries(ctx, git, filepath.Join(to, ".git"), "objects"); errs[1] != nil {
			return
		}
		objects := filepath.Join(git, "objects")
		if _, err := os.Lstat(objects); errors.Is(err, fs.ErrNotExist) {
			return
		}
		if cp(ctx, from, "-al", "--", objects, filepath.Join(to, ".git")) == nil {
			return
		}
		if err := os.RemoveAll(filepath.Join(to, ".git", "objects")); err != nil {
			errs[1] = err
			return
		}
		errs[1] = cp(ctx, from, "-a", "--", objects, filepath.Join(to, ".git"))
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("copy the checkout: %w", err)
	}
	// The directories made here get their times last: their entries set them.
	for _, d := range []string{".git", "."} {
		if _, err := os.Lstat(filepath.Join(from, d)); err == nil {
			if err := copyTimes(filepath.Join(from, d), filepath.Join(to, d)); err != nil {
				return fmt.Errorf("copy the checkout: %w", err)
			}
		}
	}
	return nil
}

// copyEntries copies every entry of the directory from but skip into the
// existing directory to, in batches of entries per `cp -a`.
func copyEntries(ctx context.Context, from, to, skip string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	const batch = 512
	args := []string{}
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		err := cp(ctx, from, append([]string{"-a", "-t", to, "--"}, args...)...)
		args = args[:0]
		return err
	}
	for _, e := range entries {
		if e.Name() == skip {
			continue
		}
		args = append(args, "./"+e.Name())
		if len(args) == batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
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

// Probe reports why dir's filesystem cannot hold lane overlays, or nil
// when it can: it mounts a small overlay under dir and unmounts it.
func Probe(dir string) error {
	if os.Geteuid() != 0 {
		return errors.New("overlay mounts need root")
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".overlay-probe-")
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
