package git

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
)

// hostKnobs are the settings a sandbox could write into a Workspace
// repository's config to have git run a program: each runs the planted
// script, which leaves a marker named after the knob. Host git must run
// none of them (docs/design/git.md, "Host-side git").
var hostKnobs = []string{
	"filter.pwn.clean", "filter.pwn.smudge", "filter.pwn.process",
	"merge.pwn.driver", "diff.pwn.command", "diff.pwn.textconv", "diff.external",
	"core.fsmonitor", "core.sshCommand", "core.gitProxy", "core.askPass", "credential.helper",
	"core.editor", "sequence.editor", "core.pager", "pager.status", "pager.log",
	"gpg.program", "gpg.ssh.program", "gpg.x509.program", "core.alternateRefsCommand",
	"uploadpack.packObjectsHook", "remote.origin.uploadpack", "remote.origin.receivepack",
}

// hostHooks are the hooks planted in .git/hooks and in a core.hooksPath.
var hostHooks = []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout",
	"post-merge", "pre-merge-commit", "reference-transaction", "post-index-change", "pre-auto-gc",
	"post-rewrite", "fsmonitor-watchman", "pre-push", "push-to-checkout", "post-update", "update", "pre-receive"}

// planted is where the planted scripts live (evil) and leave their
// markers (marks).
type planted struct {
	t           *testing.T
	evil, marks string
}

func newPlanted(t *testing.T) planted {
	p := planted{t: t, evil: filepath.Join(t.TempDir(), "evil"), marks: filepath.Join(t.TempDir(), "marks")}
	for _, d := range []string{p.evil, p.marks} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// script plants the script name, which leaves the marker name and copies
// its input to its output (as a filter would), and answers its path.
func (p planted) script(name string) string {
	p.t.Helper()
	s := filepath.Join(p.evil, name)
	gittest.Write(p.t, p.evil, map[string]string{name: "#!/bin/sh\ntouch '" + filepath.Join(p.marks, name) + "'\ncat\n"})
	if err := os.Chmod(s, 0o755); err != nil {
		p.t.Fatal(err)
	}
	return s
}

// plant writes every knob into the repository at dir (its common git
// directory common), after its fixture commits: from here on only Lathe's
// host git may run in it.
func plant(t *testing.T, dir, common string) planted {
	t.Helper()
	p := newPlanted(t)
	evil, script := p.evil, p.script
	cfg := map[string]string{
		"filter.pwn.required": "true", "merge.pwn.name": "pwn", "commit.gpgSign": "true", "tag.gpgSign": "true",
		"log.showSignature": "true", "protocol.ext.allow": "always", "remote.origin.url": "ext::" + script("ext"),
		"core.attributesFile": filepath.Join(evil, "attributes"), "core.hooksPath": filepath.Join(evil, "hooks"),
		"include.path": filepath.Join(evil, "included"), "includeIf.gitdir:/.path": filepath.Join(evil, "included-if"),
		"extensions.worktreeConfig": "true", "core.worktree": evil, "gc.auto": "1", "maintenance.auto": "true",
	}
	for _, k := range hostKnobs {
		cfg[k] = script(k)
	}
	for k, v := range cfg {
		gittest.Run(t, dir, "config", k, v)
	}
	attrs := "* filter=pwn diff=pwn merge=pwn\n"
	gittest.Write(t, evil, map[string]string{
		"attributes":  attrs,
		"included":    "[filter \"pwn\"]\n\tclean = " + script("include.filter.clean") + "\n",
		"included-if": "[core]\n\tfsmonitor = " + script("includeIf.core.fsmonitor") + "\n",
	})
	gittest.Write(t, common, map[string]string{"info/attributes": attrs, "config.worktree": "[core]\n\tfsmonitor = " + script("config.worktree") + "\n"})
	for _, hook := range hostHooks {
		for _, d := range []string{filepath.Join(evil, "hooks"), filepath.Join(common, "hooks")} {
			gittest.Write(t, d, map[string]string{hook: "#!/bin/sh\ntouch '" + filepath.Join(p.marks, "hook-"+hook) + "'\n"})
			if err := os.Chmod(filepath.Join(d, hook), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}

// ran lists the markers the planted scripts left.
func (p planted) ran(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(p.marks)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// jailModes runs fn with host git jailed (where the kernel can) and with
// the jail off, so that each defence holds on its own.
func jailModes(t *testing.T, fn func(t *testing.T)) {
	t.Run("jailed", func(t *testing.T) {
		if err := HostJail(); err != nil {
			t.Skip(err)
		}
		fn(t)
	})
	t.Run("unjailed", func(t *testing.T) {
		noJail = true
		t.Cleanup(func() { noJail = false })
		fn(t)
	})
}

// TestHostGitRunsNothingPlanted: in a Workspace repository whose config,
// included config, worktree config, attributes (committed, info/, and a
// core.attributesFile) and hooks name a planted script for every knob
// that runs a program, every host git operation Lathe has (adding a
// worktree, plain and on a base; its uncommitted check; the merge's plan,
// refusal checks, commit, move and recovery; the branch's removal; a
// remote Session's seed, bundle and bring-home) runs none of them, and
// does its work: the files are the commits' bytes, never a filter's.
func TestHostGitRunsNothingPlanted(t *testing.T) {
	jailModes(t, func(t *testing.T) {
		for _, overlay := range []bool{false, true} {
			t.Run(fmt.Sprint("overlay=", overlay), func(t *testing.T) {
				if overlay && os.Geteuid() != 0 {
					t.Skip("overlay mounts need root")
				}
				testHostGitRunsNothing(t, overlay)
			})
		}
	})
}

func testHostGitRunsNothing(t *testing.T, overlay bool) {
	ctx := hostCtx(t)
	dir := filepath.Join(t.TempDir(), "ws")
	gittest.Repo(t, dir, map[string]string{"a.txt": gittest.Lines(20, nil), "keep.pwn": "raw\n"})
	// The Session's branch: a .gitattributes naming the drivers, a new
	// .pwn file, and a change to a.txt that main changes elsewhere too, so
	// the merge is a three-way content merge (a merge driver's moment).
	gittest.Run(t, dir, "checkout", "-q", "-b", "lathe/S1")
	gittest.Write(t, dir, map[string]string{".gitattributes": "* filter=pwn diff=pwn merge=pwn\n", "new.pwn": "session's\n", "a.txt": gittest.Lines(20, map[int]string{18: "session"})})
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "session")
	gittest.Run(t, dir, "checkout", "-q", "main")
	gittest.Write(t, dir, map[string]string{"a.txt": gittest.Lines(20, map[int]string{2: "main"})})
	gittest.Run(t, dir, "commit", "-qam", "main")
	p := plant(t, dir, filepath.Join(dir, ".git"))

	worktrees := t.TempDir()
	t.Cleanup(func() { _ = lanefs.UnmountUnder(worktrees) })
	if !overlay {
		probe.Lock()
		if probe.answers == nil {
			probe.answers = map[string]error{}
		}
		probe.answers[worktrees] = errors.New("overlays are off in this test")
		probe.Unlock()
	}
	h, err := OpenHome(dir)
	if err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(worktrees, "S1")
	if _, err := h.AddWorktree(ctx, wt, "lathe/S1"); err != nil {
		t.Fatal(err)
	}
	if on, _ := lanefs.Mounted(wt); on != overlay {
		t.Fatalf("the worktree is an overlay: %v, want %v", on, overlay)
	}
	gittest.Write(t, filepath.Join(dir, ".git", "worktrees", "S1"), map[string]string{"config.worktree": "[filter \"pwn\"]\n\tsmudge = " + p.script("worktree.config.worktree") + "\n"})
	if b, err := os.ReadFile(filepath.Join(wt, "new.pwn")); err != nil || string(b) != "session's\n" {
		t.Errorf("new.pwn in the worktree: %q, %v", b, err)
	}
	dirty, err := h.Uncommitted(ctx, wt)
	if err != nil || len(dirty) != 0 {
		t.Errorf("Uncommitted = %v, %v; want none", dirty, err)
	}
	gittest.Write(t, wt, map[string]string{"wip.pwn": "work in progress\n"})
	if dirty, err := h.Uncommitted(ctx, wt); err != nil || !slices.Equal(dirty, []string{"wip.pwn"}) {
		t.Errorf("Uncommitted with a new file = %v, %v", dirty, err)
	}
	if err := os.Remove(filepath.Join(wt, "wip.pwn")); err != nil {
		t.Fatal(err)
	}

	plan, err := h.Plan(ctx, "lathe/S1")
	if err != nil || len(plan.Conflicts) != 0 {
		t.Fatalf("Plan = %+v, %v", plan, err)
	}
	if ref, err := h.Refusal(ctx, plan); err != nil || len(ref.Dirty)+len(ref.Untracked) != 0 {
		t.Fatalf("Refusal = %+v, %v", ref, err)
	}
	commit, err := h.Commit(ctx, plan, false, "merge", Identity{Name: "M", Email: "m@test"})
	if err != nil {
		t.Fatal(err)
	}
	// A merge cut off before it moved anything rolls back, then lands.
	if got, err := h.Recover(ctx, plan.Ref, plan.Old, commit, plan.Files); err != nil || got != RolledBack {
		t.Fatalf("Recover = %q, %v", got, err)
	}
	if err := h.Apply(ctx, plan.Ref, plan.Old, commit); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Recover(ctx, plan.Ref, plan.Old, commit, plan.Files); err != nil || got != Landed {
		t.Fatalf("Recover after the merge = %q, %v", got, err)
	}
	for name, want := range map[string]string{"new.pwn": "session's\n", "keep.pwn": "raw\n", "a.txt": gittest.Lines(20, map[int]string{2: "main", 18: "session"})} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s after the merge: %q, %v; want %q", name, b, err, want)
		}
	}

	// A remote Session's seed and bring-home, against the same repository.
	seed, err := h.SeedCommit(ctx, "refs/lathe/seed/S2", "")
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "seed.bundle")
	f, err := os.Create(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WriteBundle(ctx, seed.Ref, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := h.DropRef(ctx, seed.Ref); err != nil {
		t.Fatal(err)
	}
	if err := h.FetchBundle(ctx, bundle, seed.Ref, "lathe/S2"); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Commits(ctx, "refs/heads/lathe/S2"); err != nil || got[0] != seed.Commit {
		t.Errorf("the fetched branch: %q, %v; want %s", got, err, seed.Commit)
	}
	if got, err := h.Commits(ctx, "refs/heads/main", "refs/heads/none"); err != nil || got[0] != commit || got[1] != "" {
		t.Errorf("Commits = %q, %v", got, err)
	}

	if err := h.RemoveWorktree(ctx, wt); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteBranch(ctx, "lathe/S1", plan.Theirs); err != nil {
		t.Fatal(err)
	}
	if ran := p.ran(t); len(ran) != 0 {
		t.Errorf("host git ran what the repository planted: %v", ran)
	}
}

// oneFileHome is a repository of one commit of a.txt, opened as a Home.
func oneFileHome(t *testing.T) (string, *Home) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	gittest.Repo(t, dir, map[string]string{"a.txt": "a\n"})
	h, err := OpenHome(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, h
}

// TestUncommittedFollowsNoPointer: a worktree's sandbox may rewrite its
// .git file to name a git directory of its own, with a clean filter and
// an fsmonitor configured and an index that lists nothing. The check
// before a merge or a delete reads the worktree's registration instead:
// it runs neither, and reports the worktree's own uncommitted file.
func TestUncommittedFollowsNoPointer(t *testing.T) {
	jailModes(t, func(t *testing.T) {
		ctx := hostCtx(t)
		_, h := oneFileHome(t)
		worktrees := t.TempDir()
		t.Cleanup(func() { _ = lanefs.UnmountUnder(worktrees) })
		wt := filepath.Join(worktrees, "S1")
		if _, err := h.AddWorktree(ctx, wt, "lathe/S1"); err != nil {
			t.Fatal(err)
		}
		gittest.Write(t, wt, map[string]string{"wip.txt": "unsaved\n"})

		// The sandbox's own git directory, and the pointer to it.
		own := filepath.Join(wt, ".own")
		gittest.Run(t, wt, "init", "-q", "--separate-git-dir", own, filepath.Join(t.TempDir(), "scratch"))
		p := newPlanted(t)
		for _, k := range []string{"filter.pwn.clean", "core.fsmonitor"} {
			gittest.Run(t, wt, "--git-dir="+own, "config", k, p.script(k))
		}
		gittest.Write(t, wt, map[string]string{".git": "gitdir: " + own + "\n", ".gitattributes": "* filter=pwn\n"})

		dirty, err := h.Uncommitted(ctx, wt)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(dirty, "wip.txt") {
			t.Errorf("Uncommitted = %v: the worktree's own change is missing", dirty)
		}
		if ran := p.ran(t); len(ran) != 0 {
			t.Errorf("the check ran what the sandbox's git directory planted: %v", ran)
		}
	})
}

// TestHostGitWritesThroughNoLink: a sandbox that replaces what host git
// writes (a reflog, a registration) by a symbolic link to a file or a
// folder elsewhere on the host never has host git write or remove there:
// the operation fails, and the file elsewhere stays as it was.
func TestHostGitWritesThroughNoLink(t *testing.T) {
	jailModes(t, func(t *testing.T) {
		ctx := hostCtx(t)
		dir, h := oneFileHome(t)
		gittest.Run(t, dir, "branch", "lathe/S1")
		old := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "main"))
		gittest.Run(t, dir, "commit", "-q", "--allow-empty", "-m", "next")
		next := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "main"))
		victim := t.TempDir()
		gittest.Write(t, victim, map[string]string{"precious": "keep me\n"})
		common := filepath.Join(dir, ".git")
		for _, tc := range []struct {
			name, link, to string
			op             func() error
		}{
			{"a reflog", "logs/refs/heads/lathe/S1", filepath.Join(victim, "precious"), func() error {
				return h.MoveBranch(ctx, "lathe/S1", old, next)
			}},
			{"a registration", "worktrees/gone", victim, func() error {
				return h.RemoveWorktree(ctx, filepath.Join(t.TempDir(), "S9"))
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				link := filepath.Join(common, filepath.FromSlash(tc.link))
				if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
					t.Fatal(err)
				}
				_ = os.Remove(link)
				if err := os.Symlink(tc.to, link); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(link)
				if err := tc.op(); err == nil {
					t.Errorf("host git worked through %s, a symbolic link", tc.link)
				}
				if b, err := os.ReadFile(filepath.Join(victim, "precious")); err != nil || string(b) != "keep me\n" {
					t.Errorf("the file the link names: %q, %v", b, err)
				}
			})
		}
	})
}

// TestJail: a jailed host git process runs no other program (a shell
// alias), writes nowhere but beneath its layout and what its environment
// names, and opens no TCP connection, whatever its config says.
func TestJail(t *testing.T) {
	if err := HostJail(); err != nil {
		t.Skip(err)
	}
	ctx := hostCtx(t)
	dir, _ := oneFileHome(t)
	dotGit := filepath.Join(dir, ".git")
	r := &Repo{ex: pinned{l: layout{common: dotGit, gitDir: dotGit, work: dir}}, root: dir, env: hostEnv(dir)}
	p := newPlanted(t)
	outside := filepath.Join(t.TempDir(), "outside")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"a shell alias", []string{"-c", "alias.pwn=!" + p.script("alias"), "pwn"}},
		{"a program alias", []string{"-c", "alias.pwn=!sh -c 'touch " + filepath.Join(p.marks, "sh") + "'", "pwn"}},
		{"a repository elsewhere", []string{"init", "-q", outside}},
		{"a connection", []string{"-c", "protocol.allow=always", "ls-remote", "git://" + ln.Addr().String() + "/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.run(ctx, maxSmallOutput, nil, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if res.code == 0 {
				t.Errorf("git %q succeeded in the jail", tc.args)
			}
		})
	}
	if ran := p.ran(t); len(ran) != 0 {
		t.Errorf("the jail ran %v", ran)
	}
	if _, err := os.Lstat(outside); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("git made %s outside its layout: %v", outside, err)
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Error("a jailed git connected")
	}
	// What the jail lets through: git itself, writing in its repository.
	if res, err := r.run(ctx, maxSmallOutput, nil, "update-ref", "refs/heads/jailed", "HEAD"); err != nil || res.code != 0 {
		t.Errorf("update-ref in the jail: %+v, %v", res, err)
	}
}
