// Package gittest holds the helpers that Git tests build their fixture
// repositories with: the host's own git, run so that nothing of the
// repository's (hooks, fsmonitor, signing) or of the machine's config takes
// part, and numbered text files to edit.
package gittest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Run runs the host's git in dir and returns its stdout; a failure fails
// the test. Commits get the author "Fixture <fixture@test>", and no gc
// runs behind them (a large fixture would otherwise start one that outlives
// the test).
func Run(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	out, err := Try(dir, args...)
	if err != nil {
		tb.Fatalf("git %q: %v", args, err)
	}
	return out
}

// Try is Run that returns the failure, with git's stderr in it.
func Try(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=Fixture", "-c", "user.email=fixture@test",
		"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "commit.gpgSign=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
		"-c", "core.autocrlf=false", "-c", "core.quotePath=false", "-c", "safe.directory=*"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}

// Write writes files (a slash path under dir: its content) under dir,
// making their folders.
func Write(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// Repo makes dir (and its parents, if missing) a repository on branch
// main whose one commit holds files, and returns that commit.
func Repo(tb testing.TB, dir string, files map[string]string) string {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	Run(tb, dir, "init", "-q", "-b", "main")
	Write(tb, dir, files)
	Run(tb, dir, "add", "-A")
	Run(tb, dir, "commit", "-qm", "fixture")
	return strings.TrimSpace(Run(tb, dir, "rev-parse", "HEAD"))
}

// Spread returns n files "d000/e00/f00000.txt" on, 50 to a folder and
// 500 to a top folder, file i holding "file i\n": the shape of a large
// Workspace in the benchmarks.
func Spread(n int) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("d%03d/e%02d/f%05d.txt", i/500, i%500/50, i)] = fmt.Sprintf("file %d\n", i)
	}
	return files
}

// Lines returns the lines "1" to "n", each ending in "\n", with the
// lines edits names replaced.
func Lines(n int, edits map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if e, ok := edits[i]; ok {
			b.WriteString(e + "\n")
		} else {
			fmt.Fprintf(&b, "%d\n", i)
		}
	}
	return b.String()
}

// State is what an operation that refuses must leave as it was in the
// worktree dir: HEAD, the index (modes and blobs), the status with
// untracked and ignored files, and every file's path and bytes outside
// .git.
func State(tb testing.TB, dir string) string {
	tb.Helper()
	s, err := TryState(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TryState is State for a poll: an error (a file that a process in the
// folder is replacing) is for the next try.
func TryState(dir string) (string, error) {
	var b strings.Builder
	for _, args := range [][]string{{"rev-parse", "HEAD"}, {"ls-files", "-s"}, {"status", "--porcelain=v1", "--untracked-files=all", "--ignored"}} {
		out, err := Try(dir, args...)
		if err != nil {
			return "", err
		}
		b.WriteString(out)
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return nil
		}
		data, err := os.ReadFile(p)
		b.WriteString(p + "\x00" + string(data) + "\x00")
		return err
	})
	return b.String(), err
}

// LargeWorkspace makes dir a Git repository of n committed small files
// (dNNN/eNN/fNNNNN.txt, 50 to a folder), then changes 10 of them and adds
// 10 untracked ones: a large Workspace with uncommitted work, as the seed
// benchmarks take it. The commit's objects are packed, as git leaves a
// user's repository: a commit that makes more than gc.auto (6,700) loose
// objects runs `git gc --auto`, which packs them, and a cloned repository
// is packed from the start. (Run turns automatic gc off, so it is done
// here by hand.)
func LargeWorkspace(tb testing.TB, dir string, n int) {
	tb.Helper()
	Repo(tb, dir, Spread(n))
	Run(tb, dir, "repack", "-adq")
	for i := range 10 {
		Write(tb, dir, map[string]string{
			fmt.Sprintf("d%03d/e00/f%05d.txt", i*n/10/500, i*n/10/500*500): "changed\n",
			fmt.Sprintf("new/n%d.txt", i):                                  "new\n",
		})
	}
}
