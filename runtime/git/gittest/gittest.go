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
	var b strings.Builder
	b.WriteString(Run(tb, dir, "rev-parse", "HEAD"))
	b.WriteString(Run(tb, dir, "ls-files", "-s"))
	b.WriteString(Run(tb, dir, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"))
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
	if err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// LargeWorkspace makes dir a Git repository of n committed small files
// (dNNN/eNN/fNNNNN.txt, 50 to a folder), then changes 10 of them and adds
// 10 untracked ones: a large Workspace with uncommitted work, as the seed
// benchmarks take it.
func LargeWorkspace(tb testing.TB, dir string, n int) {
	tb.Helper()
	write := func(rel, body string) {
		full := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range n {
		write(fmt.Sprintf("d%03d/e%02d/f%05d.txt", i/500, i%500/50, i), fmt.Sprintf("file %d\n", i))
	}
	Run(tb, dir, "init", "-q", "-b", "main")
	Run(tb, dir, "add", "-A")
	Run(tb, dir, "commit", "-q", "-m", fmt.Sprintf("%d files", n))
	for i := range 10 {
		write(fmt.Sprintf("d%03d/e00/f%05d.txt", i*n/10/500, i*n/10/500*500), "changed\n")
		write(fmt.Sprintf("new/n%d.txt", i), "new\n")
	}
}
