// Package git reads and changes the Git repository at a Session's root:
// status, per-path diffs and their hunks, staging whole paths or single
// hunks, discarding, checkout, commit, branches, and worktree snapshots,
// by running git inside the Session's sandbox (Open with the sandbox as
// the Execer); and, on the host, what spans a Workspace and its worktrees
// (Home: adding and removing worktrees, merging a branch home, a remote
// Session's seed and bring-home), under rules of its own (host.go).
//
// The parsers (ParseStatus, ParseDiff, ParseBranches) and the one-hunk patch
// builder (FileDiff.Patch) are pure and fuzzed. Repo runs git through an
// Execer, which a sandbox.Sandbox is.
//
// A repository may be hostile: the Agent, or whoever wrote it, controls its
// config. Every git process gets command-line-scope config (through
// GIT_CONFIG_COUNT, which outranks the repository's) that runs no hook, no
// fsmonitor, no signing program, no automatic gc and no pager; diffs run
// with --no-ext-diff and --no-textconv. The worktree is pinned to the
// Session root (GIT_WORK_TREE, which outranks core.worktree), discovery
// stops at the root (GIT_CEILING_DIRECTORIES), bare repositories are never
// discovered, and pathspecs are literal (GIT_LITERAL_PATHSPECS), so a path
// like ":(top)x" or "*.go" names only itself. Paths go to git as argv
// entries or NUL-separated on stdin (--pathspec-from-file), patches and
// commit messages on stdin; none is ever spliced into a script.
//
// Inside a sandbox, clean and smudge filters (and merge drivers, textconv)
// that the repository's config and .gitattributes name still run: they run
// in the sandbox, which is the boundary. On the host nothing the
// repository names runs: host git finds the repository only where Lathe
// recorded it, and every command that reads or writes file content runs in
// a scratch git directory of Lathe's own that borrows only the objects
// (host.go, docs/design/git.md "Host-side git").
package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"lathe/runtime/sandbox"
)

// Execer starts processes where the repository lives. A sandbox.Sandbox is
// one.
type Execer interface {
	Exec(ctx context.Context, spec sandbox.ExecSpec) (sandbox.Process, error)
}

// Repo is the repository at a Session's root, as seen through an Execer.
type Repo struct {
	ex   Execer
	root string
	env  []string
}

// Open returns the repository whose worktree is root, an absolute path as
// the Execer sees it. Nothing runs until a method is called.
func Open(ex Execer, root string) *Repo {
	return &Repo{ex: ex, root: root, env: Env(root)}
}

// safeConfig is applied to every git process at command-line scope.
var safeConfig = [][2]string{
	{"core.hooksPath", "/dev/null"},     // no hook runs
	{"core.fsmonitor", "false"},         // a configured fsmonitor is a program
	{"commit.gpgSign", "false"},         // gpg.program is a program
	{"tag.gpgSign", "false"},            //
	{"gc.auto", "0"},                    // no background gc after a commit
	{"maintenance.auto", "false"},       //
	{"submodule.recurse", "false"},      // checkout never updates (fetches) submodules
	{"safe.directory", "*"},             // the root may be owned by another uid than the sandbox's
	{"safe.bareRepository", "explicit"}, // never discover a bare repository planted in the root
	{"core.quotePath", "false"},         // diff headers keep UTF-8 names readable
	{"core.pager", "cat"},               //
	{"color.ui", "false"},               //
	{"advice.detachedHead", "false"},    //
	{"advice.addIgnoredFile", "false"},  //
	{"diff.noprefix", "false"},          // the a/ b/ prefixes FileDiff.Patch needs
	{"diff.mnemonicPrefix", "false"},    //
	{"diff.submodule", "short"},         // submodule changes as patch lines
	{"core.untrackedCache", "true"},     // status reuses the untracked scan an index write kept
	{"apply.whitespace", "nowarn"},      // a hunk applies as it is
}

// Env is the environment of every git process in a repository at root.
func Env(root string) []string { return envWith(root, safeConfig) }

// envWith is Env with config at command-line scope.
func envWith(root string, config [][2]string) []string {
	env := []string{
		"GIT_WORK_TREE=" + root,
		"GIT_CEILING_DIRECTORIES=" + path.Dir(root),
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_EDITOR=:",
		"GIT_PAGER=cat",
		"GIT_ASKPASS=",
		"LC_ALL=C",
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(config)),
	}
	for i, kv := range config {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env
}

// Errors. Repo methods wrap them; test with errors.Is.
var (
	// ErrNotRepository: the root is not (the top of) a Git worktree.
	ErrNotRepository = errors.New("not a git repository")
	// ErrNoMatch: a path matches no file git knows or sees.
	ErrNoMatch = errors.New("path matches no file")
	// ErrUnknownRef: checkout named no branch, tag or commit.
	ErrUnknownRef = errors.New("unknown ref")
	// ErrNoHunk: the hunk index is out of range.
	ErrNoHunk = errors.New("no such hunk")
	// ErrBinary: a binary change has no hunks; it moves only as a whole path.
	ErrBinary = errors.New("binary file: it has no hunks; stage, unstage or discard the whole path")
	// ErrHunkChanged: the hunk at the index is not the one the caller saw.
	ErrHunkChanged = errors.New("the hunk changed since it was listed")
	// ErrUntrackedDir: a diff or hunk of an untracked directory, which has
	// no content of its own.
	ErrUntrackedDir = errors.New("untracked directory: ask for one of its files")
	// ErrNothingToCommit: the index equals HEAD.
	ErrNothingToCommit = errors.New("nothing to commit")
	// ErrStatusChanged: the checkout no longer matches a status token.
	ErrStatusChanged = errors.New("the checkout changed since its status was read")
	// ErrTooLarge: git printed more than the operation accepts.
	ErrTooLarge = errors.New("git output too large")
)

// Error is a git command that exited non-zero.
type Error struct {
	Op     string // the git subcommand
	Code   int
	Stderr string // the end of what it printed on stderr
}

func (e *Error) Error() string {
	msg := e.Stderr
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("git %s failed (exit %d): %s", e.Op, e.Code, msg)
}

// Output bounds.
const (
	maxStatusOutput = 64 << 20
	// MaxDiffOutput bounds the patch of one path.
	MaxDiffOutput  = 16 << 20
	maxSmallOutput = 1 << 20
	maxStderr      = 4 << 10
	killWait       = 5 * time.Second
)

// result is a finished git process.
type result struct {
	out    []byte
	code   int
	stderr string
}

// run runs git args with stdin (nil for none), its stdout bounded by limit.
func (r *Repo) run(ctx context.Context, limit int, stdin []byte, args ...string) (result, error) {
	return r.exec(ctx, limit, stdin, opName(args), append([]string{"git"}, args...))
}

// script runs a constant bash script with args as its positional
// parameters ($1…), for steps that take several git commands.
func (r *Repo) script(ctx context.Context, op string, limit int, stdin []byte, body string, args ...string) (result, error) {
	return r.exec(ctx, limit, stdin, op, append([]string{"bash", "-c", "set -u\n" + body, "lathe-git-" + op}, args...))
}

func (r *Repo) exec(ctx context.Context, limit int, stdin []byte, op string, argv []string) (result, error) {
	out, errb := &limited{max: limit}, &limited{max: maxStderr}
	es := sandbox.ExecSpec{Args: argv, Dir: r.root, Env: r.env, Stdout: out, Stderr: errb}
	if stdin != nil {
		es.Stdin = bytes.NewReader(stdin)
	}
	p, err := r.ex.Exec(ctx, es)
	if err != nil {
		return result{}, fmt.Errorf("start git %s: %w", op, err)
	}
	code, err := wait(ctx, p) // bundle.go
	if err != nil {
		return result{}, fmt.Errorf("git %s: %w", op, err)
	}
	res := result{out: out.buf, code: code, stderr: strings.TrimSpace(errb.String())}
	if (code == 128 || code == 129) && strings.Contains(strings.ToLower(res.stderr), "not a git repository") {
		return res, fmt.Errorf("%w: %s", ErrNotRepository, r.root)
	}
	if out.over {
		return res, fmt.Errorf("%w: git %s printed more than %d MiB", ErrTooLarge, op, limit>>20)
	}
	return res, nil
}

// ok turns a non-zero exit into an *Error, classifying the failures the
// callers answer differently.
func (res result) ok(op string, err error, codes ...int) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if res.code == 0 {
		return res.out, nil
	}
	for _, c := range codes {
		if res.code == c {
			return res.out, nil
		}
	}
	e := &Error{Op: op, Code: res.code, Stderr: res.stderr}
	switch {
	case strings.Contains(res.stderr, "did not match any file"):
		return nil, fmt.Errorf("%w: %w", ErrNoMatch, e)
	case strings.Contains(res.stderr, "invalid reference: "):
		return nil, fmt.Errorf("%w: %w", ErrUnknownRef, e)
	}
	return nil, e
}

// opName is the git subcommand of args, after any "-c k=v" options.
func opName(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-c":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return args[i]
		}
	}
	return "git"
}

// limited keeps the first max bytes written to it (or, with keepTail, the
// last max), and drains the rest so the writer never blocks.
type limited struct {
	max      int
	keepTail bool
	buf      []byte
	over     bool
}

func (l *limited) Write(p []byte) (int, error) {
	switch {
	case l.keepTail:
		l.buf = append(l.buf, p...)
		if n := len(l.buf) - l.max; n > 0 {
			l.buf, l.over = append(l.buf[:0], l.buf[n:]...), true
		}
	case len(l.buf)+len(p) > l.max:
		l.buf, l.over = append(l.buf, p[:l.max-len(l.buf)]...), true
	default:
		l.buf = append(l.buf, p...)
	}
	return len(p), nil
}

func (l *limited) String() string { return strings.ToValidUTF8(string(l.buf), "\uFFFD") }

// nulList joins paths for --pathspec-from-file=- --pathspec-file-nul.
func nulList(paths []string) []byte {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// splitNul splits NUL-terminated fields.
func splitNul(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			i = len(b)
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i]))
		b = b[i+1:]
	}
	return out
}

var _ io.Writer = (*limited)(nil)
