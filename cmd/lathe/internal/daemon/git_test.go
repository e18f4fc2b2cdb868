package daemon

// The Git and Check routes against a real daemon, a real sandbox
// (containerd, namespace gitNamespace) and real git repositories: the
// Workspace is bind-mounted into the sandbox, where git runs; the fixtures
// are written and read back with the host's git.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
)

// gitNamespace is this file's own containerd namespace.
const gitNamespace = "lathe-test-git"

// gitWorkspace builds the repository the route table runs on: committed
// files, then one unstaged change of every kind.
func gitWorkspace(t *testing.T) string {
	t.Helper()
	root := realDir(t, t.TempDir())
	gittest.Run(t, root, "init", "-q", "-b", "main")
	crlf := strings.ReplaceAll(gittest.Lines(20, nil), "\n", "\r\n")
	symlink(t, "/etc", filepath.Join(root, "etc-link"))
	for name, content := range map[string]string{
		"edited.txt": gittest.Lines(20, nil), "gone.txt": "bye\n", "crlf.txt": crlf, "noeol.txt": "a\nlast",
		"ünï/文件.txt": "u\n", "img.bin": "\x89PNG\x00\x01", "README.md": "readme\n",
	} {
		writeFile(t, filepath.Join(root, name), content)
	}
	gittest.Run(t, root, "add", "-A")
	gittest.Run(t, root, "commit", "-q", "-m", "first")
	gittest.Run(t, root, "branch", "feature")
	writeFile(t, filepath.Join(root, "edited.txt"), gittest.Lines(20, map[int]string{2: "two", 18: "eighteen"}))
	writeFile(t, filepath.Join(root, "crlf.txt"), strings.ReplaceAll(gittest.Lines(20, map[int]string{3: "three"}), "\n", "\r\n"))
	writeFile(t, filepath.Join(root, "noeol.txt"), "a\nlast!")
	writeFile(t, filepath.Join(root, "ünï/文件.txt"), "ü\n")
	writeFile(t, filepath.Join(root, "img.bin"), "\x89PNG\x00\x02")
	writeFile(t, filepath.Join(root, "new file.txt"), "fresh\n")
	if err := os.Remove(filepath.Join(root, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	return root
}

// gitIndex is path's staged content, or "<absent>".
func gitIndex(root, path string) string {
	out, err := gittest.Try(root, "cat-file", "blob", ":"+path)
	if err != nil {
		return "<absent>"
	}
	return out
}

// gitShort is the repository's `git status --short` without renames.
func gitShort(t *testing.T, root string) string {
	return strings.TrimRight(gittest.Run(t, root, "status", "--short", "-uall", "--no-renames"), "\n")
}

func gitWant(what, want string, got func() string) func(t *testing.T, _ []byte) {
	return func(t *testing.T, _ []byte) {
		t.Helper()
		if g := got(); g != want {
			t.Errorf("%s = %q, want %q", what, g, want)
		}
	}
}

// gitFiles checks the status answer's files as "path:staged:unstaged".
func gitFiles(want ...string) func(t *testing.T, body []byte) {
	return func(t *testing.T, body []byte) {
		t.Helper()
		var st struct {
			Files []struct {
				Path, Staged, Unstaged string
				LastTurn               bool `json:"last_turn"`
			}
		}
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range st.Files {
			got = append(got, f.Path+":"+f.Staged+":"+f.Unstaged)
			if f.LastTurn {
				t.Errorf("%s is flagged last_turn, but no turn ran", f.Path)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("files\n got %q\nwant %q", got, want)
		}
	}
}

func both(checks ...func(t *testing.T, body []byte)) func(t *testing.T, body []byte) {
	return func(t *testing.T, body []byte) {
		t.Helper()
		for _, c := range checks {
			c(t, body)
		}
	}
}

// hostGitIdentity makes the daemon user's global git config (what a
// daemon started after it reads) name user.name and user.email, or nothing
// when name is "".
func hostGitIdentity(t *testing.T, name, email string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gitconfig")
	content := ""
	if name != "" {
		content = "[user]\n\tname = " + name + "\n\temail = " + email + "\n"
	}
	writeFile(t, path, content)
	t.Setenv("GIT_CONFIG_GLOBAL", path)
}

func TestGitRoutes(t *testing.T) {
	hostGitIdentity(t, "Host User", "host@example.org")
	_, d, srv := sandboxDaemon(t, gitNamespace)
	root := gitWorkspace(t)
	id := filesReadySession(t, srv, root)

	plain := realDir(t, t.TempDir())
	writeFile(t, filepath.Join(plain, "a.txt"), "a\n")
	notRepo := filesReadySession(t, srv, plain)

	pendingDir := realDir(t, t.TempDir())
	wsPending := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+pendingDir+`"}`)["id"].(string)
	pending := mustCall(t, srv, 201, post, "/api/workspaces/"+wsPending+"/sessions", `{"name":"pending",`+agentMode+`,"setup_command":"make deps"}`)["id"].(string)

	v := vars{"s": id, "plain": notRepo, "pending": pending}
	g := "/api/sessions/{s}/git"
	q := filesQ
	edited := gittest.Lines(20, map[int]string{2: "two", 18: "eighteen"})
	headHunk1 := "@@ -15,6 +15,6 @@"
	index := func(p string) func() string { return func() string { return gitIndex(root, p) } }
	work := func(p string) func() string {
		return func() string {
			b, err := os.ReadFile(filepath.Join(root, p))
			if err != nil {
				return "<absent>"
			}
			return string(b)
		}
	}
	short := func() string { return gitShort(t, root) }

	runRoutes(t, d, srv, v, []route{
		// Reads.
		{name: "status", method: get, path: g + "/status", status: 200, check: both(
			fields(v, "branch.head", "main", "branch.detached", "false", "branch.initial", "false", "total", "7", "staged", "0", "unstaged", "7",
				"truncated", "false", "last_turn_known", "true"),
			gitFiles("crlf.txt::modified", "edited.txt::modified", "gone.txt::deleted", "img.bin::modified", "noeol.txt::modified",
				"ünï/文件.txt::modified", "new file.txt::untracked"))},
		{name: "identity", method: get, path: g + "/identity", status: 200, check: fields(v, "name", "Host User", "email", "host@example.org", "source", "host", "known", "true", "fix", "<absent>")},
		{name: "branches", method: get, path: g + "/branches", status: 200, check: fields(v, "current", "main", "detached", "false",
			"branches.0.name", "feature", "branches.0.current", "false", "branches.1.name", "main", "branches.1.current", "true", "branches.1.subject", "first")},
		{name: "diff of a change", method: get, path: g + "/diff" + q("edited.txt"), status: 200, check: func(t *testing.T, body []byte) {
			fields(v, "path", "edited.txt", "staged", "false", "binary", "false", "untracked", "false")(t, body)
			if diff := str(t, body, "diff"); !strings.Contains(diff, "-2\n+two\n") || !strings.Contains(diff, "-18\n+eighteen\n") {
				t.Errorf("diff %q", diff)
			}
		}},
		{name: "diff of a binary change names it only", method: get, path: g + "/diff" + q("img.bin"), status: 200, check: func(t *testing.T, body []byte) {
			fields(v, "binary", "true", "lossy", "<absent>")(t, body)
			if diff := str(t, body, "diff"); !strings.HasSuffix(diff, "Binary files a/img.bin and b/img.bin differ\n") || strings.Contains(diff, "PNG") {
				t.Errorf("diff %q", diff)
			}
		}},
		{name: "diff of an untracked file is its creation", method: get, path: g + "/diff" + q("new file.txt"), status: 200, check: func(t *testing.T, body []byte) {
			fields(v, "untracked", "true")(t, body)
			if diff := str(t, body, "diff"); !strings.Contains(diff, "new file mode 100644") || !strings.HasSuffix(diff, "@@ -0,0 +1 @@\n+fresh\n") {
				t.Errorf("diff %q", diff)
			}
		}},
		{name: "staged diff of an unstaged change is empty", method: get, path: g + "/diff" + q("edited.txt") + "&staged=true", status: 200, check: fields(v, "diff", "", "staged", "true")},
		{name: "hunks", method: get, path: g + "/hunks" + q("edited.txt"), status: 200, check: fields(v, "hunks.0.index", "0", "hunks.0.header", "@@ -1,5 +1,5 @@",
			"hunks.0.lines", `[" 1","-2","+two"," 3"," 4"," 5"]`, "hunks.1.index", "1", "hunks.1.header", headHunk1, "hunks.1.old_start", "15", "hunks.1.new_lines", "6")},
		{name: "hunks of a CRLF file keep the CR", method: get, path: g + "/hunks" + q("crlf.txt"), status: 200, check: fields(v, "hunks.0.header", "@@ -1,6 +1,6 @@", "hunks.0.lines.2", "-3\r", "hunks.0.lines.3", "+three\r")},
		{name: "hunks of a file without a trailing newline", method: get, path: g + "/hunks" + q("noeol.txt"), status: 200,
			check: fields(v, "hunks.0.lines", `[" a","-last","\\ No newline at end of file","+last!","\\ No newline at end of file"]`)},
		{name: "hunks of a binary file", method: get, path: g + "/hunks" + q("img.bin"), status: 200, check: fields(v, "binary", "true", "hunks", "[]")},
		{name: "hunks of a deleted file", method: get, path: g + "/hunks" + q("gone.txt"), status: 200, check: fields(v, "deleted", "true", "hunks.0.lines", `["-bye"]`)},
		{name: "hunks of a clean file", method: get, path: g + "/hunks" + q("README.md"), status: 200, check: fields(v, "hunks", "[]")},
		{name: "hunks staged=maybe", method: get, path: g + "/hunks" + q("edited.txt") + "&staged=maybe", status: 400, err: "staged must be true or false"},
		{name: "hunks without a path", method: get, path: g + "/hunks", status: 400, err: "path query parameter is required"},
		{name: "hunks of ..", method: get, path: g + "/hunks" + q("../x"), status: 400, err: `".." elements`},
		{name: "diff of an absolute path", method: get, path: g + "/diff" + q("/etc/passwd"), status: 400, err: "must be relative"},
		{name: "diff through a symlink to outside", method: get, path: g + "/diff" + q("etc-link/passwd"), status: 403, err: `path "etc-link/passwd" resolves outside the session root`},
		{name: "diff with NUL", method: get, path: g + "/diff?path=a%00b", status: 400, err: "NUL"},

		// One hunk at a time.
		{name: "stage the second hunk", method: post, path: g + "/hunk", body: `{"path":"edited.txt","index":1}`, status: 200, events: 1,
			check: both(fields(v, "path", "edited.txt", "index", "1", "header", headHunk1),
				gitWant("index", gittest.Lines(20, map[int]string{18: "eighteen"}), index("edited.txt")), gitWant("worktree", edited, work("edited.txt")))},
		{name: "a stale header is refused", method: post, path: g + "/hunk", body: `{"path":"edited.txt","index":0,"header":"@@ -1,5 +1,6 @@"}`, status: 409, err: "the hunk changed since it was listed",
			check: gitWant("index", gittest.Lines(20, map[int]string{18: "eighteen"}), index("edited.txt"))},
		{name: "a hunk past the end", method: post, path: g + "/hunk", body: `{"path":"edited.txt","index":1}`, status: 404, err: `"edited.txt" has 1 hunks; there is no hunk 1`},
		{name: "a binary file has no hunks", method: post, path: g + "/hunk", body: `{"path":"img.bin","index":0}`, status: 409, err: "binary file"},
		{name: "a hunk without an index", method: post, path: g + "/hunk", body: `{"path":"edited.txt"}`, status: 400, err: "index is required"},
		{name: "a hunk of the root", method: post, path: g + "/hunk", body: `{"path":".","index":0}`, status: 400, err: "must name a file"},
		{name: "a hunk outside", method: post, path: g + "/hunk", body: `{"path":"etc-link/passwd","index":0}`, status: 403, err: "resolves outside"},
		{name: "a hunk with an unknown field", method: post, path: g + "/hunk", body: `{"path":"edited.txt","index":0,"force":true}`, status: 400, err: "unknown field"},
		{name: "unstage the staged hunk", method: post, path: g + "/hunk", body: `{"path":"edited.txt","index":0,"stage":false,"header":"` + headHunk1 + `"}`, status: 200, events: 1,
			check: both(gitWant("index", gittest.Lines(20, nil), index("edited.txt")), gitWant("worktree", edited, work("edited.txt")))},
		{name: "discard a CRLF hunk", method: post, path: g + "/hunk/discard", body: `{"path":"crlf.txt","index":0}`, status: 200, events: 1,
			check: gitWant("worktree", strings.ReplaceAll(gittest.Lines(20, nil), "\n", "\r\n"), work("crlf.txt"))},
		{name: "discard takes no stage", method: post, path: g + "/hunk/discard", body: `{"path":"edited.txt","index":0,"stage":true}`, status: 400, err: "stage does not apply"},
		{name: "stage a hunk without a trailing newline", method: post, path: g + "/hunk", body: `{"path":"noeol.txt","index":0}`, status: 200, events: 1,
			check: gitWant("index", "a\nlast!", index("noeol.txt"))},
		{name: "stage a unicode path's hunk", method: post, path: g + "/hunk", body: `{"path":"ünï/文件.txt","index":0}`, status: 200, events: 1,
			check: gitWant("index", "ü\n", index("ünï/文件.txt"))},
		{name: "stage an untracked file's hunk", method: post, path: g + "/hunk", body: `{"path":"new file.txt","index":0}`, status: 200, events: 1,
			check: gitWant("index", "fresh\n", index("new file.txt"))},
		{name: "stage a deletion's hunk", method: post, path: g + "/hunk", body: `{"path":"gone.txt","index":0}`, status: 200, events: 1,
			check: gitWant("index", "<absent>", index("gone.txt"))},

		// Whole paths.
		{name: "unstage everything", method: post, path: g + "/unstage", body: `{"paths":[]}`, status: 200, events: 1, check: both(fields(v, "all", "true", "paths", "[]"),
			gitWant("status", " M edited.txt\n D gone.txt\n M img.bin\n M noeol.txt\n M ünï/文件.txt\n?? \"new file.txt\"", short))},
		{name: "stage two paths", method: post, path: g + "/stage", body: `{"paths":["gone.txt","./img.bin"]}`, status: 200, events: 1,
			check: both(fields(v, "all", "false", "paths", `["gone.txt","img.bin"]`), gitWant("img.bin", "\x89PNG\x00\x02", index("img.bin")), gitWant("gone.txt", "<absent>", index("gone.txt")))},
		{name: "pathspecs are literal", method: post, path: g + "/stage", body: `{"paths":["*.txt"]}`, status: 404, err: "path matches no file"},
		{name: "stage ..", method: post, path: g + "/stage", body: `{"paths":["a/../../x"]}`, status: 400, err: `".." elements`},
		{name: "stage an absolute path", method: post, path: g + "/stage", body: `{"paths":["/etc/passwd"]}`, status: 400, err: "must be relative"},
		{name: "stage through a symlink to outside", method: post, path: g + "/stage", body: `{"paths":["etc-link/passwd"]}`, status: 403, err: "resolves outside"},
		{name: "stage an empty path", method: post, path: g + "/stage", body: `{"paths":[""]}`, status: 400, err: "empty path"},
		{name: "stage paths of the wrong type", method: post, path: g + "/stage", body: `{"paths":"x"}`, status: 400, err: `field "paths"`},
		{name: "unstage one path", method: post, path: g + "/unstage", body: `{"paths":["img.bin"]}`, status: 200, events: 1,
			check: gitWant("img.bin", "\x89PNG\x00\x01", index("img.bin"))},
		{name: "discard one path", method: post, path: g + "/discard", body: `{"path":"edited.txt"}`, status: 200, events: 1,
			check: both(fields(v, "path", "edited.txt", "paths", `["edited.txt"]`), gitWant("worktree", gittest.Lines(20, nil), work("edited.txt")))},
		{name: "discard a clean path records nothing", method: post, path: g + "/discard", body: `{"path":"README.md"}`, status: 200, check: fields(v, "paths", "[]")},
		{name: "discard an empty path", method: post, path: g + "/discard", body: `{"path":""}`, status: 400, err: "omit it to discard"},

		// Commit and checkout.
		{name: "commit the index", method: post, path: g + "/commit", body: `{"message":"Drop gone.txt"}`, status: 200, events: 1, check: func(t *testing.T, body []byte) {
			fields(v, "branch", "main", "subject", "Drop gone.txt", "stage_all", "false", "paths", `["gone.txt"]`)(t, body)
			want := strings.TrimSpace(gittest.Run(t, root, "rev-parse", "HEAD"))
			fields(v, "commit", want)(t, body)
			fields(v, "author", "Host User <host@example.org>")(t, body)
			gitWant("identity", "Host User <host@example.org>|Drop gone.txt", func() string { return strings.TrimSpace(gittest.Run(t, root, "log", "-1", "--format=%an <%ae>|%s")) })(t, body)
		}},
		{name: "nothing to commit", method: post, path: g + "/commit", status: 409, err: "nothing to commit"},
		{name: "commit everything with the default message", method: post, path: g + "/commit", body: `{"stage_all":true}`, status: 200, events: 1,
			check: both(fields(v, "subject", "Update 4 files", "stage_all", "true"), gitWant("status", "", short))},
		{name: "commit a message with NUL", method: post, path: g + "/commit", body: `{"message":"a\u0000b"}`, status: 400, err: "without NUL"},
		{name: "checkout a branch", method: post, path: g + "/checkout", body: `{"ref":"feature"}`, status: 200, events: 1, check: both(fields(v, "ref", "feature", "branch", "feature", "detached", "false"),
			gitWant("worktree", "bye\n", work("gone.txt")))},
		{name: "checkout a commit detaches", method: post, path: g + "/checkout", body: `{"ref":"main~1"}`, status: 200, events: 1, check: fields(v, "branch", "", "detached", "true")},
		{name: "checkout an unknown ref", method: post, path: g + "/checkout", body: `{"ref":"nope"}`, status: 404, err: "unknown ref"},
		{name: "checkout an option", method: post, path: g + "/checkout", body: `{"ref":"--orphan"}`, status: 400, err: `must not start with "-"`},
		{name: "checkout without a ref", method: post, path: g + "/checkout", body: `{}`, status: 400, err: "ref is required"},
		{name: "branches when detached", method: get, path: g + "/branches", status: 200, check: fields(v, "current", "", "detached", "true")},
		{name: "back to main", method: post, path: g + "/checkout", body: `{"ref":"main"}`, status: 200, events: 1},
		{name: "discard everything", method: post, path: g + "/discard", status: 200, check: fields(v, "path", "", "paths", "[]")},

		// Checks.
		{name: "set the check", method: put, path: "/api/sessions/{s}/check", body: `{"check_command":"cat README.md && echo checked"}`, status: 200, events: 1,
			check: fields(v, "id", "{s}", "check_command", "cat README.md && echo checked")},
		{name: "setting the same check records nothing", method: put, path: "/api/sessions/{s}/check", body: `{"check_command":"cat README.md && echo checked"}`, status: 200},
		{name: "run the check", method: post, path: "/api/sessions/{s}/check/run", status: 200, events: 1,
			check: fields(v, "command", "cat README.md && echo checked", "exit_code", "0", "passed", "true", "timed_out", "false", "output_tail", "readme\nchecked\n")},
		{name: "a failing check", method: put, path: "/api/sessions/{s}/check", body: `{"check_command":"echo broken >&2; exit 3"}`, status: 200, events: 1},
		{name: "run the failing check", method: post, path: "/api/sessions/{s}/check/run", body: `{}`, status: 200, events: 1,
			check: fields(v, "exit_code", "3", "passed", "false", "output_tail", "broken\n")},
		{name: "a slow check", method: put, path: "/api/sessions/{s}/check", body: `{"check_command":"echo started; sleep 60 & sleep 60"}`, status: 200, events: 1},
		{name: "run it with a timeout", method: post, path: "/api/sessions/{s}/check/run", body: `{"timeout_seconds":1}`, status: 200, events: 1,
			check: fields(v, "exit_code", "-1", "timed_out", "true", "passed", "false", "output_tail", "started\n")},
		{name: "a timeout out of range", method: post, path: "/api/sessions/{s}/check/run", body: `{"timeout_seconds":0}`, status: 400, err: "timeout_seconds must be between 1 and 3600"},
		{name: "clear the check with null", method: put, path: "/api/sessions/{s}/check", body: `{"check_command":null}`, status: 200, events: 1, check: fields(v, "check_command", "null")},
		{name: "no check to run", method: post, path: "/api/sessions/{s}/check/run", status: 409, err: "has no check command"},
		{name: "set and clear with an empty string", method: put, path: "/api/sessions/{s}/check", body: `{"check_command":"true"}`, status: 200, events: 1},
		{name: "clear with an empty string", method: put, path: "/api/sessions/{s}/check", body: `{"check_command":"  "}`, status: 200, events: 1, check: fields(v, "check_command", "null")},
		{name: "check without check_command", method: put, path: "/api/sessions/{s}/check", body: `{}`, status: 400, err: "check_command is required"},
		{name: "check of the wrong type", method: put, path: "/api/sessions/{s}/check", body: `{"check_command":5}`, status: 400, err: "must be a string or null"},
		{name: "the session shows its check", method: get, path: "/api/sessions/{s}", status: 200, check: fields(v, "check_command", "null")},

		// Not a repository, not ready, missing.
		{name: "status of a plain directory", method: get, path: "/api/sessions/{plain}/git/status", status: 409, err: "is not a git repository"},
		{name: "stage in a plain directory", method: post, path: "/api/sessions/{plain}/git/stage", body: `{"paths":[]}`, status: 409, err: "is not a git repository"},
		{name: "diff in a plain directory", method: get, path: "/api/sessions/{plain}/git/diff" + q("a.txt"), status: 409, err: "is not a git repository"},
		{name: "commit in a plain directory", method: post, path: "/api/sessions/{plain}/git/commit", body: `{"stage_all":true}`, status: 409, err: "is not a git repository"},
		{name: "status of a session that is not ready", method: get, path: "/api/sessions/{pending}/git/status", status: 409, err: "awaiting_approval, not ready"},
		{name: "not ready comes before a bad path", method: get, path: "/api/sessions/{pending}/git/hunks" + q("../x"), status: 409, err: "not ready"},
		{name: "stage in a session that is not ready", method: post, path: "/api/sessions/{pending}/git/stage", body: `{"paths":[]}`, status: 409, err: "not ready"},
		{name: "run a check in a session that is not ready", method: post, path: "/api/sessions/{pending}/check/run", status: 409, err: "not ready"},
		{name: "a check is durable config, set whatever the state", method: put, path: "/api/sessions/{pending}/check", body: `{"check_command":"make test"}`, status: 200, events: 1},
		{name: "status of an unknown session", method: get, path: "/api/sessions/" + unknownID + "/git/status", status: 404, err: "session"},
		{name: "commit in an unknown session", method: post, path: "/api/sessions/" + unknownID + "/git/commit", status: 404, err: "session"},
		{name: "check of an unknown session", method: put, path: "/api/sessions/" + unknownID + "/check", body: `{"check_command":"x"}`, status: 404, err: "session"},
		{name: "wrong method", method: get, path: g + "/stage", status: 405, err: "not allowed"},
	})

	// No body and null, by each route's rule (bodies_test.go), on the clean
	// worktree the table leaves.
	var bodies []route
	for _, r := range []string{"/stage", "/unstage", "/hunk", "/hunk/discard", "/checkout"} {
		bodies = append(bodies, requiredBodyRows("git"+r, post, g+r)...)
	}
	bodies = append(bodies,
		route{name: "stage without paths", method: post, path: g + "/stage", body: `{}`, status: 400, err: "paths is required; an empty list means all"},
		route{name: "unstage with null paths", method: post, path: g + "/unstage", body: `{"paths":null}`, status: 400, err: "paths is required"})
	bodies = append(bodies, optionalBodyRows("discard everything", post, g+"/discard", 200, "", 0)...)
	bodies = append(bodies, optionalBodyRows("commit", post, g+"/commit", 409, "nothing to commit", 0)...)
	bodies = append(bodies, optionalBodyRows("run no check", post, "/api/sessions/{s}/check/run", 409, "has no check command", 0)...)
	runRoutes(t, d, srv, v, bodies)

	// A status lists at most 10,000 files; its counts cover them all.
	many := mkdir(t, root, "many")
	for i := range 10_001 {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := call(t, srv, get, "/api/sessions/"+id+"/git/status", "")
	fields(v, "truncated", "true", "total", "10001", "unstaged", "10001", "files.9999.path", "many/f09999", "files.10000", "<absent>")(t, r.body)

	// A commit commits exactly what the status showed: a file written
	// behind the status's back makes its token stale, and the commit with
	// it is refused with nothing committed.
	t.Run("a stale status token commits nothing", func(t *testing.T) {
		token := str(t, call(t, srv, get, "/api/sessions/"+id+"/git/status", "").body, "token")
		if again := str(t, call(t, srv, get, "/api/sessions/"+id+"/git/status", "").body, "token"); again != token || len(token) != 32 {
			t.Fatalf("tokens of an unchanged checkout: %q, then %q", token, again)
		}
		head := strings.TrimSpace(gittest.Run(t, root, "rev-parse", "HEAD"))
		writeFile(t, filepath.Join(root, "unseen.txt"), "never shown\n")
		before := d.Journal().Last()
		r := call(t, srv, post, "/api/sessions/"+id+"/git/commit", `{"stage_all":true,"status_token":"`+token+`"}`)
		if r.status != http.StatusConflict {
			t.Fatalf("commit with a stale token: %d %s", r.status, r.body)
		}
		assertErrorBody(t, r, "the checkout changed since its status was read")
		if now := strings.TrimSpace(gittest.Run(t, root, "rev-parse", "HEAD")); now != head || appendedSince(t, d, before) != 0 || gitIndex(root, "unseen.txt") != "<absent>" {
			t.Errorf("a refused commit changed something: HEAD %s (was %s), %d events, index of unseen.txt %q", now, head, appendedSince(t, d, before), gitIndex(root, "unseen.txt"))
		}
		// A content change to a file the status already lists counts too.
		token = str(t, call(t, srv, get, "/api/sessions/"+id+"/git/status", "").body, "token")
		writeFile(t, filepath.Join(root, "unseen.txt"), "changed after the status\n")
		if r := call(t, srv, post, "/api/sessions/"+id+"/git/commit", `{"stage_all":true,"status_token":"`+token+`"}`); r.status != http.StatusConflict {
			t.Fatalf("commit after a content change: %d %s", r.status, r.body)
		}
		token = str(t, call(t, srv, get, "/api/sessions/"+id+"/git/status", "").body, "token")
		r = call(t, srv, post, "/api/sessions/"+id+"/git/commit", `{"stage_all":true,"status_token":"`+token+`"}`)
		if r.status != http.StatusOK {
			t.Fatalf("commit with a fresh token: %d %s", r.status, r.body)
		}
		if got := gitIndex(root, "unseen.txt"); got != "changed after the status\n" {
			t.Errorf("committed unseen.txt = %q", got)
		}
	})

	// The audit trail: every change, with its outcome, in order.
	var trail []string
	for _, env := range feed(t, call(t, srv, get, "/api/events/journal?aggregate="+id, "").body) {
		if strings.Contains(env.Type, "-git-") || strings.Contains(env.Type, "-check-") {
			trail = append(trail, env.Type)
		}
		if env.Type == "session-git-committed" && !strings.Contains(string(env.Data), `"commit":"`) {
			t.Errorf("commit event without its hash: %s", env.Data)
		}
		if env.Type == "session-git-hunk-discarded" && string(env.Data) != `{"path":"crlf.txt","index":0,"header":"@@ -1,6 +1,6 @@"}` {
			t.Errorf("hunk discard event: %s", env.Data)
		}
	}
	want := []string{"session-git-hunk-staged", "session-git-hunk-unstaged", "session-git-hunk-discarded", "session-git-hunk-staged", "session-git-hunk-staged",
		"session-git-hunk-staged", "session-git-hunk-staged", "session-git-unstaged", "session-git-staged", "session-git-unstaged", "session-git-discarded",
		"session-git-committed", "session-git-committed", "session-git-checked-out", "session-git-checked-out", "session-git-checked-out",
		"session-check-set", "session-check-ran", "session-check-set", "session-check-ran", "session-check-set", "session-check-ran", "session-check-set",
		"session-check-set", "session-check-set", "session-git-committed"}
	if !slices.Equal(trail, want) {
		t.Errorf("audit trail\n got %q\nwant %q", trail, want)
	}
}

// TestGitCommitIdentity: with no identity in the config or the daemon
// user's global git config, a commit is refused with how to set one, and
// nothing is committed; a repository's own identity is used and shown.
func TestGitCommitIdentity(t *testing.T) {
	hostGitIdentity(t, "", "")
	_, d, srv := sandboxDaemon(t, gitNamespace)
	root := realDir(t, t.TempDir())
	gittest.Run(t, root, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(root, "a.txt"), "a\n")
	id := filesReadySession(t, srv, root)
	g := "/api/sessions/{s}/git"
	v := vars{"s": id}
	runRoutes(t, d, srv, v, []route{
		{name: "no identity is known", method: get, path: g + "/identity", status: 200,
			check: fields(v, "name", "", "email", "", "source", "", "known", "false")},
		{name: "a commit without one is refused", method: post, path: g + "/commit", body: `{"stage_all":true}`, status: 409, err: "set git.author {name, email} in the daemon's config file",
			check: gitWant("index", "<absent>", func() string { return gitIndex(root, "a.txt") })},
		{name: "the repository's own identity", method: get, path: g + "/identity", status: 200, check: func(t *testing.T, body []byte) {
			gittest.Run(t, root, "config", "user.name", "Repo Owner")
			gittest.Run(t, root, "config", "user.email", "owner@example.org")
			r := call(t, srv, get, "/api/sessions/"+id+"/git/identity", "")
			fields(v, "name", "Repo Owner", "email", "owner@example.org", "source", "repository", "known", "true")(t, r.body)
		}},
		{name: "commits with it", method: post, path: g + "/commit", body: `{"stage_all":true,"message":"first"}`, status: 200, events: 1, check: fields(v, "author", "Repo Owner <owner@example.org>")},
	})
}

// BenchmarkGitStatus50k answers GET /git/status through the whole stack
// (HTTP, the sandbox, git, the parser) on a repository of 50,000 committed
// files with a few changes, and reports the median and 95th percentile.
func BenchmarkGitStatus50k(b *testing.B) {
	_, _, srv := sandboxDaemon(b, gitNamespace)
	root := repo50k(b) // worktree_test.go
	for i := range 10 {
		writeFile(b, filepath.Join(root, fmt.Sprintf("d%03d/e00/f%05d.txt", i*7, i*7*500)), "changed\n")
		writeFile(b, filepath.Join(root, fmt.Sprintf("new/n%d.txt", i)), "new\n")
	}
	id := filesReadySession(b, srv, root)
	u := srv.URL + "/api/sessions/" + id + "/git/status"
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		r := send(b, srv.Client(), req)
		took = append(took, time.Since(start))
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"total":20`) {
			b.Fatalf("status: %d %.300s", r.status, r.body)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
}
