package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"lathe/runtime/sandbox"
)

// Host-side git (docs/design/git.md, "Host-side git"). A Workspace's
// repository is written by its Sessions' sandboxes too: a shared Session's
// sandbox has the whole Workspace folder, .git included, and a worktree
// Session's has the Workspace's .git (but its config, hooks, HEAD and
// index) and its own worktree, .git file included. Git on the host obeys
// what it finds there, so a config a sandbox wrote could make it run a
// program (a filter, a merge driver, an fsmonitor, a hook) as the daemon's
// user, and a .git file, commondir or symbolic link could point it at a
// repository or a file of the sandbox's choosing. Host git therefore:
//
//   - finds the repository only where Lathe recorded it (layout): GIT_DIR
//     and GIT_COMMON_DIR name the Workspace's own .git, or its
//     .git/worktrees/<name> for a worktree, so no .git file, commondir or
//     gitdir file is ever followed; before each process (pinned.Exec) the
//     directories must still be directories and the entries git writes
//     through no symbolic links, and a repository that borrows objects
//     (objects/info/alternates) is refused;
//   - runs git and nothing else, with only PATH and HOME=/nonexistent of
//     the daemon's environment, no system or global config or attributes,
//     no replace refs, and the command-line config of Env and hostConfig,
//     which outranks every file;
//   - runs the commands that read or write file content (checkout-index,
//     read-tree -u, status, add, merge-tree, diff-tree, commit-tree,
//     write-tree, bundle unbundle) not in the repository but in a scratch
//     git directory of Lathe's own (content) that borrows only the
//     repository's objects (GIT_OBJECT_DIRECTORY) and a copy of an index:
//     its config is Lathe's, so no filter, merge driver, diff driver,
//     include or other name a sandbox configured exists there, and the
//     .gitattributes that name them name nothing;
//   - runs the commands of refs and of the worktree registry (rev-parse,
//     update-ref, symbolic-ref, for-each-ref, rev-list, worktree, bundle
//     create, config --get) in the repository, whose config they read, but
//     none of them runs a filter or a driver, and the knobs that do run a
//     program there (hooks, fsmonitor, transports, credential helpers,
//     automatic gc) are off at command-line scope;
//   - writes the index, and removes or reads the files of a checkout,
//     itself, through os.Root (confined to the repository's folder, no
//     symbolic link out of it), never through a path git would resolve.

// Host is an Execer that starts processes on the host. The operations that
// span a Workspace and its worktrees (adding a worktree, merging a
// Session's branch home, a remote Session's seed and bring-home), which no
// one Session's sandbox sees whole, run git through it, pinned to a
// layout (pinned); tests also use it to stand in for a sandbox.
//
// It gives each process only PATH, HOME and the caller's environment: no
// system or global git config (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL).
// Run as root for a Workspace another user owns, it runs git as that
// owner, so what it writes in the Workspace and its .git belongs to the
// owner, as the sandbox's writes do. A process dies with the daemon
// (Pdeathsig): a merge cut off by kill -9 stops where it was, and the next
// start finishes or undoes it.
type Host struct {
	// UID and GID run the process as another user; AsUser enables them.
	UID, GID uint32
	AsUser   bool
}

// HostFor is the Host that runs git as the owner of dir: itself unless
// the daemon is root and dir belongs to another user.
func HostFor(dir string) (Host, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return Host{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Host{}, fmt.Errorf("%s: no owner", dir)
	}
	if os.Geteuid() != 0 || st.Uid == 0 {
		return Host{}, nil
	}
	return Host{UID: st.Uid, GID: st.Gid, AsUser: true}, nil
}

// Exec starts the process on the host.
func (h Host) Exec(_ context.Context, spec sandbox.ExecSpec) (sandbox.Process, error) {
	return h.start(spec, nil)
}

// start starts the process, in the jail j when it is not nil (jail.go).
func (h Host) start(spec sandbox.ExecSpec, j *jail) (sandbox.Process, error) {
	if len(spec.Args) == 0 {
		return nil, errors.New("no command")
	}
	cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=/nonexistent",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
	}, spec.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if h.AsUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: h.UID, Gid: h.GID, NoSetGroups: true}
	}
	p := &hostProcess{cmd: cmd, done: make(chan struct{})}
	// Pdeathsig fires when the thread that started the process ends, and
	// a jail is the thread's for good, so its goroutine keeps the thread
	// locked until it ends, which ends the thread. Every process starts
	// that way, jailed or not, on a thread of its own that waits for it
	// there: started on a pooled thread, a process would be killed when a
	// jail's goroutine later locked that thread and ended it.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if j != nil {
			if err := j.enter(); err != nil {
				started <- err
				return
			}
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// chown gives f to the user h runs git as.
func (h Host) chown(f *os.File) error {
	if !h.AsUser {
		return nil
	}
	return f.Chown(int(h.UID), int(h.GID))
}

type hostProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *hostProcess) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	if p.err != nil {
		return -1, p.err
	}
	return 0, nil
}

func (p *hostProcess) Signal(_ context.Context, sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

func (p *hostProcess) Resize(context.Context, uint16, uint16) error {
	return errors.New("a host git process has no terminal")
}

// ErrUnsafeRepository: the repository on the host is no longer laid out
// as Lathe recorded it (a git directory replaced by a symbolic link, an
// entry git would write through that is one, borrowed objects), so host
// git does not touch it.
var ErrUnsafeRepository = errors.New("the repository is not as Lathe recorded it")

// hostConfig is applied, after safeConfig, to every host git process at
// command-line scope: the knobs that run a program in the commands host
// git runs in the repository itself (the content commands run in a
// scratch git directory, where no repository config counts).
var hostConfig = [][2]string{
	{"protocol.allow", "never"},          // no transport at all: no ssh (core.sshCommand), no ext::, no url.*.insteadOf target
	{"credential.helper", ""},            // an empty value clears the helpers any config lists
	{"core.alternateRefsCommand", ""},    // run for a repository with alternates
	{"core.attributesFile", "/dev/null"}, // no global attributes
	{"fetch.recurseSubmodules", "false"}, //
	{"log.showSignature", "false"},       // gpg.program verifying signatures
}

// hostEnv is the environment of every host git process whose worktree is
// work: Env's, hostConfig, no replace refs and no system attributes.
func hostEnv(work string) []string {
	return append(envWith(work, append(slices.Clone(safeConfig), hostConfig...)),
		"GIT_NO_REPLACE_OBJECTS=1", "GIT_ATTR_NOSYSTEM=1")
}

// layout is a repository on the host as Lathe recorded it: the common git
// directory (refs, objects, config), the checkout's own git directory
// (HEAD, index: the common one, or common/worktrees/<name>) and its work
// tree. Host git is pinned to it, never finding a repository itself.
type layout struct {
	common, gitDir, work string
}

// guardedCommon are the entries of the common git directory that host git
// writes or reads through; a symbolic link there could send a write (a
// ref, a reflog line, an object, a registration) anywhere on the host.
// Beneath refs and logs, and among the object folders, none may be one
// either (check).
var guardedCommon = []string{"objects", "objects/info", "objects/pack", "refs", "packed-refs", "logs", "worktrees", "info", "shallow"}

// guardedOwn are those of the checkout's own git directory.
var guardedOwn = []string{"HEAD", "index", "logs"}

// noJail runs host git without its jail: the tests of the other defences
// on their own.
var noJail bool

// check reports whether the layout is still as recorded: its git
// directories directories, not symbolic links, and nothing host git
// writes through a symbolic link (the guarded entries, every ref and
// reflog, every object folder, every worktree registration);
// objects/info/alternates, which would make host git read objects from
// any path, must not exist. The jail (jail.go) holds where a sandbox
// plants a link between this check and git's write.
func (l layout) check() error {
	for _, d := range []string{l.common, l.gitDir, filepath.Join(l.common, "objects")} {
		fi, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s is gone", ErrNotRepository, d)
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: %s is not a directory", ErrUnsafeRepository, d)
		}
	}
	link := func(p string) error {
		return fmt.Errorf("%w: %s is a symbolic link", ErrUnsafeRepository, p)
	}
	for dir, names := range map[string][]string{l.common: guardedCommon, l.gitDir: guardedOwn} {
		for _, n := range names {
			if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return link(filepath.Join(dir, n))
			}
		}
	}
	// Beneath refs and logs every entry; of objects and worktrees, the
	// folders git writes into or removes whole (git worktree prune opens
	// a broken registration as a folder and removes what it holds).
	for _, root := range []string{filepath.Join(l.common, "refs"), filepath.Join(l.common, "logs"), filepath.Join(l.gitDir, "logs")} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink != 0 {
				return link(p)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, dir := range []string{filepath.Join(l.common, "objects"), filepath.Join(l.common, "worktrees")} {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			if e.Type()&fs.ModeSymlink != 0 {
				return link(filepath.Join(dir, e.Name()))
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(l.common, "objects", "info", "alternates")); err == nil {
		return fmt.Errorf("%w: it borrows objects from elsewhere (objects/info/alternates), which host git does not follow", ErrUnsafeRepository)
	}
	return nil
}

// refEnv is the environment of the ref commands: the repository pinned.
// The reflog lines they write name Lathe, not an identity from config.
func (l layout) refEnv() []string {
	return append(hostEnv(l.work), "GIT_DIR="+l.gitDir, "GIT_COMMON_DIR="+l.common,
		"GIT_COMMITTER_NAME=Lathe", "GIT_COMMITTER_EMAIL=lathe@localhost")
}

// root opens the folder that holds the common git directory, and names
// path inside it: the confinement of Lathe's own reads and writes in the
// repository, which refuses a symbolic link out of it.
func (l layout) root(path string) (*os.Root, string, error) {
	top := filepath.Dir(l.common)
	rel, err := filepath.Rel(top, path)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, "", fmt.Errorf("%w: %s is outside %s", ErrUnsafeRepository, path, top)
	}
	r, err := os.OpenRoot(top)
	return r, rel, err
}

// readConfined reads the regular file at path, inside the repository's
// folder, at most max bytes.
func (l layout) readConfined(path string, max int64) ([]byte, error) {
	root, rel, err := l.root(path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafeRepository, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%w: %s is larger than %d MiB", ErrTooLarge, path, max>>20)
	}
	return b, err
}

// pinned is the Execer of one repository's host git: git only, in the
// layout, checked before each process, and in a jail (jail.go) that lets
// it write only beneath the layout's directories, those its environment
// names (a scratch git directory, its index, a work tree) and also.
type pinned struct {
	host Host
	l    layout
	also []string
}

func (p pinned) Exec(_ context.Context, spec sandbox.ExecSpec) (sandbox.Process, error) {
	if len(spec.Args) == 0 || spec.Args[0] != "git" {
		return nil, fmt.Errorf("host git runs git only, not %q", spec.Args)
	}
	if err := p.l.check(); err != nil {
		return nil, err
	}
	if noJail || HostJail() != nil {
		return p.host.start(spec, nil)
	}
	j := &jail{write: append([]string{p.l.common, p.l.gitDir, p.l.work}, p.also...)}
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY":
			j.write = append(j.write, v)
		case "GIT_INDEX_FILE":
			j.write = append(j.write, filepath.Dir(v))
		}
	}
	return p.host.start(spec, j)
}

// copiedConfig are the repository's settings a scratch git directory
// takes over, with the values each may have: how the checkout's files
// compare with the index, none of them a program or a path.
var copiedConfig = map[string][]string{
	"core.filemode":           boolValues,
	"core.symlinks":           boolValues,
	"core.ignorecase":         boolValues,
	"core.precomposeunicode":  boolValues,
	"core.trustctime":         boolValues,
	"core.autocrlf":           append([]string{"input"}, boolValues...),
	"core.safecrlf":           append([]string{"warn"}, boolValues...),
	"core.eol":                {"lf", "crlf", "native"},
	"core.checkstat":          {"default", "minimal"},
	"extensions.objectformat": {"sha1", "sha256"},
}

var boolValues = []string{"true", "false", "yes", "no", "on", "off", "1", "0"}

// scratchConfig is the config of a scratch git directory: a format the
// repository's objects fit, and the copied settings it has.
func (h *Home) scratchConfig(ctx context.Context) ([]byte, error) {
	h.cfgOnce.Do(func() {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range copiedConfig {
				if !yield(k) {
					return
				}
			}
		})
		pattern := "^(" + strings.ReplaceAll(strings.Join(keys, "|"), ".", `\.`) + ")$"
		res, err := h.r.run(ctx, maxSmallOutput, nil, "config", "-z", "--get-regexp", pattern)
		out, err := res.ok("config", err, 1) // 1: none set
		if err != nil {
			h.cfgErr = err
			return
		}
		got := map[string]string{}
		for _, e := range splitNul(out) {
			k, v, _ := strings.Cut(e, "\n")
			v = strings.ToLower(v)
			if slices.Contains(copiedConfig[k], v) {
				got[k] = v
			}
		}
		var b bytes.Buffer
		version := "0"
		if got["extensions.objectformat"] == "sha256" {
			version = "1"
		}
		fmt.Fprintf(&b, "[core]\n\trepositoryformatversion = %s\n\tbare = false\n", version)
		for _, k := range keys {
			if name, ok := strings.CutPrefix(k, "core."); ok && got[k] != "" {
				fmt.Fprintf(&b, "\t%s = %s\n", name, got[k])
			}
		}
		if version == "1" {
			b.WriteString("[extensions]\n\tobjectformat = sha256\n")
		}
		h.cfg = b.Bytes()
	})
	return h.cfg, h.cfgErr
}

// scratchSpec is what a content step's scratch git directory holds.
type scratchSpec struct {
	// work is the work tree (the checkout's folder, or a base's).
	work string
	// head is the commit HEAD names there, detached; "" leaves it unborn.
	head string
	// index is the index git uses, a file Lathe owns; "" for the
	// scratch directory's own.
	index string
	// copyIndex is a checkout's index (in the repository) that the
	// scratch directory's own starts as a copy of, read confined, with
	// its modification time (git's racy-clean check compares it); a
	// missing one leaves it empty.
	copyIndex string
}

// maxIndex bounds the index a content step copies.
const maxIndex = 1 << 30

// content runs fn with a Repo whose git directory is a scratch one of
// Lathe's own, in a new temporary folder removed afterwards: Lathe's
// config (scratchConfig), HEAD as spec says, no refs, the repository's
// info/exclude copied, and the repository's objects. index is the index
// file git uses there.
func (h *Home) content(ctx context.Context, spec scratchSpec, fn func(r *Repo, index string) error) error {
	cfg, err := h.scratchConfig(ctx)
	if err != nil {
		return err
	}
	if err := h.l.check(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "lathe-git-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	head := "ref: refs/heads/lathe-scratch\n"
	if spec.head != "" {
		if err := objectIDs(spec.head); err != nil {
			return err
		}
		head = spec.head + "\n"
	}
	files := map[string][]byte{"config": cfg, "HEAD": []byte(head)}
	if b, err := h.l.readConfined(filepath.Join(h.l.common, "info", "exclude"), maxSmallOutput); err == nil {
		files["info/exclude"] = b
	}
	for _, d := range []string{"refs", "info"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	index := spec.index
	if index == "" {
		index = filepath.Join(dir, "index")
		if spec.copyIndex != "" {
			if err := h.copyIndexOut(spec.copyIndex, index); err != nil {
				return err
			}
		}
	}
	if h.host.AsUser {
		err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(h.host.UID), int(h.host.GID))
		})
		if err != nil {
			return err
		}
	}
	env := append(hostEnv(spec.work), "GIT_DIR="+dir, "GIT_COMMON_DIR="+dir,
		"GIT_OBJECT_DIRECTORY="+filepath.Join(h.l.common, "objects"), "GIT_INDEX_FILE="+index)
	return fn(&Repo{ex: pinned{host: h.host, l: h.l}, root: spec.work, env: env}, index)
}

// copyIndexOut copies the index at from (in the repository, confined) to
// the new file to, with its modification time; a missing one is no error.
func (h *Home) copyIndexOut(from, to string) error {
	root, rel, err := h.l.root(from)
	if err != nil {
		return err
	}
	defer root.Close()
	src, err := root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrUnsafeRepository, from)
	}
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, io.LimitReader(src, maxIndex))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(to, fi.ModTime(), fi.ModTime())
	}
	return err
}

// placeFile writes the content of the file from (Lathe's) to the path to
// in the repository, confined: in a temporary file beside it renamed over
// it, owned by the user git runs as.
func (h *Home) placeFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	root, rel, err := h.l.root(to)
	if err != nil {
		return err
	}
	defer root.Close()
	tmp := rel + ".lathe-tmp"
	_ = root.Remove(tmp)
	dst, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Sync()
	}
	if err == nil {
		err = h.host.chown(dst)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// homeConfig is what a Home reads once of the repository's config.
type homeConfig struct {
	cfgOnce sync.Once
	cfg     []byte
	cfgErr  error
}
