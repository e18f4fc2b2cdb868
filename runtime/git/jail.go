package git

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The jail of host git (docs/design/git.md, "Host-side git"): every git
// process pinned runs under a Landlock domain of its own, which the kernel
// enforces whatever git reads in a repository. It may execute only git
// (its binary, its exec path and the ELF interpreter they need), so no
// filter, driver, hook or helper a sandbox named can run, not even one of
// a knob Lathe did not think of; it may write only beneath the
// directories of the one operation (the repository's git directories and
// work tree, a scratch git directory, a worktree being added), so a
// symbolic link a sandbox planted there, which git would write through,
// leads nowhere else; and, where the kernel can, it may open no TCP
// connection. The domain is the starting thread's (Landlock restricts a
// thread and what it starts): a goroutine locked to a thread of its own
// enters it, starts git, waits for it and ends, which ends the thread.

// jail is what one host git process may execute and write.
type jail struct {
	write []string // directories (and files) beneath which it may write
}

// Landlock access rights, by the ABI that brought them.
const (
	llWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	llFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE
)

// jailABI is the kernel's Landlock ABI, read once; jailErr says why host
// git runs without a jail (a kernel without Landlock, or one older than
// ABI 2, whose domains forbid every rename across directories).
var jailABI = sync.OnceValues(func() (int, error) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno != 0:
		return 0, fmt.Errorf("the kernel offers no Landlock (%w)", errno)
	case abi < 2:
		return int(abi), fmt.Errorf("the kernel's Landlock is ABI %d; a jail needs 2 or later", abi)
	}
	return int(abi), nil
})

// HostJail reports whether host git runs jailed here (nil), or why not:
// then only Lathe's own checks and config stand between a repository a
// sandbox wrote and the host. The daemon logs it at start.
func HostJail() error {
	if _, err := jailABI(); err != nil {
		return err
	}
	_, err := gitExecutables()
	return err
}

// gitExecutables are the files and folders host git may execute from:
// the git on PATH, its exec path (git-core, where git finds itself again
// for a subcommand) and the ELF interpreter of the git binary.
var gitExecutables = sync.OnceValues(func() ([]string, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, err
	}
	bin, err = filepath.EvalSymlinks(bin)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(bin, "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git --exec-path: %w", err)
	}
	execPath := strings.TrimSpace(string(out))
	if !filepath.IsAbs(execPath) {
		return nil, fmt.Errorf("git --exec-path printed %q", clip(execPath))
	}
	paths := []string{bin, execPath}
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("read the git binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("read the git binary's interpreter: %w", err)
		}
		paths = append(paths, strings.TrimRight(string(b), "\x00"))
	}
	return paths, nil
})

// enter puts the calling thread into the jail, for good: the caller has
// locked it (runtime.LockOSThread) and never unlocks it.
func (j jail) enter() error {
	abi, err := jailABI()
	if err != nil {
		return err
	}
	execs, err := gitExecutables()
	if err != nil {
		return err
	}
	write := uint64(llWrite | unix.LANDLOCK_ACCESS_FS_REFER)
	if abi >= 3 {
		write |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: write | unix.LANDLOCK_ACCESS_FS_EXECUTE}
	if abi >= 4 {
		attr.Handled_access_net = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP | unix.LANDLOCK_ACCESS_NET_BIND_TCP
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock: create a ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	rule := func(path string, access uint64, optional bool) error {
		pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && optional {
			return nil
		}
		if err != nil {
			return fmt.Errorf("landlock: open %s: %w", path, err)
		}
		defer unix.Close(pfd)
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return fmt.Errorf("landlock: stat %s: %w", path, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access &= llFile
		}
		pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&pb)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("landlock: a rule for %s: %w", path, errno)
		}
		return nil
	}
	for _, p := range execs {
		if err := rule(p, unix.LANDLOCK_ACCESS_FS_EXECUTE, false); err != nil {
			return err
		}
	}
	for _, p := range append([]string{os.DevNull}, j.write...) {
		if err := rule(p, write, true); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("landlock: no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock: restrict the thread: %w", errno)
	}
	return nil
}
