package daemon

// A turn's code and replay against a real daemon, real containerd (namespace
// turnCodeNamespace) and real git: the refs that keep a turn's snapshots,
// their survival through git gc and their removal with the Session, the
// changes and diff routes, restore with its conflict check, force and
// refusals, and the replayed frames of a journaled turn.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
)

const turnCodeNamespace = "lathe-test-turncode"

// offloadedText is a step's text large enough to be offloaded to the blob store.
var offloadedText = strings.Repeat("long answer ", 7000)

func TestTurnCode(t *testing.T) {
	hold := make(chan struct{})
	script := fakellm.Script{Turns: []fakellm.Turn{
		// Turn "plain", before the Workspace is a Git repository.
		{Steps: []fakellm.Step{fakellm.Text("no git yet"), fakellm.Usage(1, 1, 0)}},
		// Turn "edit": add, edit and delete a file.
		{Steps: []fakellm.Step{
			fakellm.Reasoning("plan the edit"),
			fakellm.Text("Editing."),
			fakellm.ToolCall("w", "write_file", `{"path":"added.txt","content":"new\n"}`),
			fakellm.ToolCall("e", "edit_file", `{"path":"tracked.txt","old_string":"one","new_string":"uno"}`),
			fakellm.ToolCall("s", "shell", `{"command":"rm gone.txt"}`),
			fakellm.Usage(3, 2, 1),
		}},
		{Steps: []fakellm.Step{fakellm.Text("edited"), fakellm.Usage(1, 1, 0)}},
		// A turn whose ID is not a ref component.
		{Steps: []fakellm.Step{fakellm.ToolCall("w2", "write_file", `{"path":"odd.txt","content":"odd\n"}`), fakellm.Usage(1, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("odd"), fakellm.Usage(1, 1, 0)}},
		// A turn held live.
		{Steps: []fakellm.Step{fakellm.Text("wait"), fakellm.Stall(hold), fakellm.Usage(1, 1, 0)}},
		// Turn "edit" of a second Session in the same Workspace.
		{Steps: []fakellm.Step{fakellm.ToolCall("w3", "write_file", `{"path":"sibling.txt","content":"s\n"}`), fakellm.Usage(1, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text(offloadedText), fakellm.Usage(1, 1, 0)}},
	}}
	r := turnDaemonIn(t, turnCodeNamespace, config.KindOpenAI, script, nil)
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	run := func(turn string) { t.Helper(); tc.runDone(t, id, turn, "go") }
	run("plain") // before the Workspace is a Git repository
	commitBase(t, r.dir, map[string]string{"tracked.txt": "one\n", "gone.txt": "bye\n", "user.txt": "mine\n"})
	const odd = "odd turn..id:^~"
	run("edit")
	run(odd)
	base := "/api/sessions/" + id + "/turns/"
	turn := func(tid string) projections.Turn {
		t.Helper()
		var tr projections.Turn
		resp := r.do(t, get, base+escapePath(tid), "")
		if resp.status != 200 || json.Unmarshal(resp.body, &tr) != nil {
			t.Fatalf("turn %s: %d %s", tid, resp.status, resp.body)
		}
		return tr
	}
	edit, oddTurn := turn("edit"), turn(odd)

	t.Run("refs", func(t *testing.T) {
		refs := gittest.Run(t, r.dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/lathe/")
		want := "refs/lathe/turns/edit/after " + edit.ChangesAfter + "\nrefs/lathe/turns/edit/before " + edit.ChangesBefore + "\n"
		if edit.ChangesRef != "refs/lathe/turns/edit" || !strings.Contains(refs, want) {
			t.Errorf("refs of turn edit (%q):\n%s\nwant\n%s", edit.ChangesRef, refs, want)
		}
		if !strings.HasPrefix(oddTurn.ChangesRef, "refs/lathe/turns/_") || strings.Contains(oddTurn.ChangesRef, "..") ||
			!strings.Contains(refs, oddTurn.ChangesRef+"/after "+oddTurn.ChangesAfter) {
			t.Errorf("refs of a turn whose ID is no ref component: %q\n%s", oddTurn.ChangesRef, refs)
		}
	})

	t.Run("gc keeps the trees", func(t *testing.T) {
		gittest.Run(t, r.dir, "reflog", "expire", "--expire=now", "--all")
		gittest.Run(t, r.dir, "gc", "-q", "--prune=now")
		for _, tree := range []string{edit.ChangesBefore, edit.ChangesAfter, oddTurn.ChangesAfter} {
			if _, err := gittest.Try(r.dir, "cat-file", "-e", tree); err != nil {
				t.Errorf("git gc pruned turn tree %s: %v", tree, err)
			}
		}
	})

	t.Run("changes", func(t *testing.T) {
		resp := expectStatus(t, r.do(t, get, base+"edit/changes", ""), 200)
		var list struct {
			Files []struct{ Path, Status string } `json:"files"`
			Total int                             `json:"total"`
		}
		if json.Unmarshal(resp.body, &list) != nil {
			t.Fatal(string(resp.body))
		}
		got := map[string]string{}
		for _, f := range list.Files {
			got[f.Path] = f.Status
		}
		if want := map[string]string{"added.txt": "added", "tracked.txt": "modified", "gone.txt": "deleted"}; !maps.Equal(got, want) || list.Total != 3 {
			t.Errorf("changes %v (total %d), want %v", got, list.Total, want)
		}
		diff := expectStatus(t, r.do(t, get, base+"edit/changes/diff?path=tracked.txt", ""), 200)
		if d := str(t, diff.body, "diff"); !strings.Contains(d, "-one\n+uno\n") {
			t.Errorf("diff of tracked.txt: %s", d)
		}
		for path, status := range map[string]int{"user.txt": 404, "../etc/passwd": 400, "/etc/passwd": 400} {
			expectStatus(t, r.do(t, get, base+"edit/changes/diff?path="+path, ""), status)
		}
		expectStatus(t, r.do(t, get, base+"nope/changes", ""), 404)
		// A turn from before the Workspace was a repository has no code.
		if resp := expectStatus(t, r.do(t, get, base+"plain/changes", ""), 404); !strings.Contains(string(resp.body), "no code record") {
			t.Errorf("changes of a turn without a record: %s", resp.body)
		}
		expectStatus(t, r.do(t, post, base+"plain/restore", `{"side":"before"}`), 404)
		expectStatus(t, r.do(t, get, "/api/sessions/NOPE/turns/edit/changes", ""), 404)
	})

	t.Run("restore", func(t *testing.T) {
		restore := func(body string, status int) reply {
			t.Helper()
			return expectStatus(t, r.do(t, post, base+"edit/restore", body), status)
		}
		index, head := gittest.Run(t, r.dir, "ls-files", "-s"), gittest.Run(t, r.dir, "rev-parse", "HEAD")
		// The worktree changed tracked.txt after the turn: a conflict.
		writeFile(t, filepath.Join(r.dir, "tracked.txt"), "uno, edited later\n")
		resp := restore(`{"side":"before"}`, 409)
		var conflict struct {
			Error     string   `json:"error"`
			Conflicts []string `json:"conflicts"`
		}
		if json.Unmarshal(resp.body, &conflict) != nil || !slices.Equal(conflict.Conflicts, []string{"tracked.txt"}) {
			t.Errorf("conflict body %s", resp.body)
		}
		if got := readFile(t, filepath.Join(r.dir, "added.txt")); got != "new\n" {
			t.Errorf("a refused restore wrote: added.txt is %q", got)
		}
		// Paths clear of the conflict restore; bad ones are refused.
		restore(`{"side":"before","paths":["user.txt"]}`, 400)
		restore(`{"side":"before","paths":["../x"]}`, 400)
		restore(`{"side":"sideways"}`, 400)
		expectStatus(t, r.do(t, post, base+"nope/restore", `{"side":"before"}`), 404)
		resp = restore(`{"side":"before","paths":["added.txt","gone.txt"]}`, 200)
		if p := str(t, resp.body, "side"); p != "before" {
			t.Errorf("restore answered %s", resp.body)
		}
		if _, err := os.Stat(filepath.Join(r.dir, "added.txt")); !os.IsNotExist(err) || readFile(t, filepath.Join(r.dir, "gone.txt")) != "bye\n" {
			t.Errorf("before-side restore: added.txt %v, gone.txt %q", err, readFile(t, filepath.Join(r.dir, "gone.txt")))
		}
		// force overwrites the later edit.
		restore(`{"side":"before","force":true}`, 200)
		if got := readFile(t, filepath.Join(r.dir, "tracked.txt")); got != "one\n" {
			t.Errorf("forced restore: tracked.txt is %q", got)
		}
		// Uncommitted: the index and HEAD are as they were.
		if gotIndex := gittest.Run(t, r.dir, "ls-files", "-s"); gotIndex != index {
			t.Errorf("restore changed the index:\n%s\nwas\n%s", gotIndex, index)
		}
		if gotHead := gittest.Run(t, r.dir, "rev-parse", "HEAD"); gotHead != head {
			t.Errorf("restore moved HEAD to %s", gotHead)
		}
		// After side: the turn's own result comes back, over the restore
		// just made (a change since the turn, so only with force).
		restore(`{"side":"after","paths":["tracked.txt"]}`, 409)
		restore(`{"side":"after","force":true}`, 200)
		if readFile(t, filepath.Join(r.dir, "tracked.txt")) != "uno\n" || readFile(t, filepath.Join(r.dir, "added.txt")) != "new\n" {
			t.Error("after-side restore did not bring the turn's files back")
		}
		if _, err := os.Stat(filepath.Join(r.dir, "gone.txt")); !os.IsNotExist(err) {
			t.Errorf("after-side restore kept gone.txt: %v", err)
		}
		// Each restore is journaled on the Session.
		feed := expectStatus(t, r.do(t, get, "/api/events/journal?aggregate="+id+"&limit=100000", ""), 200)
		var sides []string
		sc := bufio.NewScanner(bytes.NewReader(feed.body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var env struct {
				Type string `json:"type"`
				Data struct {
					TurnID string   `json:"turn_id"`
					Side   string   `json:"side"`
					Paths  []string `json:"paths"`
					Forced bool     `json:"forced"`
				} `json:"data"`
			}
			if json.Unmarshal(sc.Bytes(), &env) == nil && env.Type == "session-turn-restored" {
				sides = append(sides, env.Data.Side+":"+strings.Join(env.Data.Paths, ",")+map[bool]string{true: ":forced"}[env.Data.Forced])
			}
		}
		want := []string{"before:added.txt,gone.txt", "before:added.txt,gone.txt,tracked.txt:forced", "after:added.txt,gone.txt,tracked.txt:forced"}
		if !slices.Equal(sides, want) {
			t.Errorf("journaled restores %q, want %q", sides, want)
		}
	})

	t.Run("replay", func(t *testing.T) {
		resp := expectStatus(t, r.do(t, get, base+"edit/replay", ""), 200)
		var rp struct {
			Complete bool   `json:"complete"`
			Status   string `json:"status"`
			Frames   []struct {
				OffsetMS int64     `json:"offset_ms"`
				Frame    turnFrame `json:"frame"`
			} `json:"frames"`
		}
		if json.Unmarshal(resp.body, &rp) != nil || !rp.Complete || rp.Status != "done" {
			t.Fatalf("replay: %s", resp.body)
		}
		var kinds []string
		var last int64
		for _, f := range rp.Frames {
			k := f.Frame.Kind
			switch k {
			case "token", "reasoning":
				k += "=" + f.Frame.Delta
			case "tool-call":
				k += "=" + f.Frame.Name + "/" + f.Frame.Phase
			}
			kinds = append(kinds, k)
			if f.OffsetMS < last {
				t.Errorf("offsets go back: %d after %d", f.OffsetMS, last)
			}
			last = f.OffsetMS
		}
		want := []string{"session-accepted", "session-start", "reasoning=plan the edit", "token=Editing.",
			"tool-call=write_file/start", "tool-call=write_file/result", "tool-call=edit_file/start", "tool-call=edit_file/result",
			"tool-call=shell/start", "tool-call=shell/result", "token=edited", "session-done"}
		if !slices.Equal(kinds, want) {
			t.Errorf("replayed frames\n%q\nwant\n%q", kinds, want)
		}
		expectStatus(t, r.do(t, get, base+"nope/replay", ""), 404)
	})

	t.Run("live turn", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "held", "input": "go"})
		tc.until(t, "held", func(f turnFrame) bool { return f.Kind == "token" })
		expectStatus(t, r.do(t, post, base+"edit/restore", `{"side":"before","force":true}`), 409)
		resp := expectStatus(t, r.do(t, get, base+"held/replay", ""), 200)
		if strings.Contains(string(resp.body), `"complete":true`) || !strings.Contains(string(resp.body), `"session-start"`) {
			t.Errorf("replay of a live turn: %s", resp.body)
		}
		expectStatus(t, r.do(t, get, base+"held/changes", ""), 409)
		close(hold)
		tc.terminal(t, "held")
		// It changed nothing: a restore of it restores and records nothing.
		if resp := expectStatus(t, r.do(t, post, base+"held/restore", `{"side":"before"}`), 200); !strings.Contains(string(resp.body), `"paths":[]`) {
			t.Errorf("restore of a turn that changed nothing: %s", resp.body)
		}
		feed := expectStatus(t, r.do(t, get, "/api/events/journal?aggregate="+id+"&limit=100000", ""), 200)
		if n := strings.Count(string(feed.body), `"type":"session-turn-restored"`); n != 3 {
			t.Errorf("%d restores journaled, want the 3 that restored files", n)
		}
	})

	t.Run("delete removes the refs", func(t *testing.T) {
		// A second Session on the same checkout uses the same turn ID: its
		// refs take the Session's hashed name, and survive the first
		// Session's delete.
		sib := r.create(t, "").ID
		r.ready(t, sib)
		tc.send(t, map[string]any{"cmd": "session", "id": sib, "turn_id": "edit", "input": "go"})
		if f := tc.terminal(t, "edit"); f[len(f)-1].Kind != "session-done" {
			t.Fatalf("sibling turn: %+v", f[len(f)-1])
		}
		var sibTurn projections.Turn
		if resp := r.do(t, get, "/api/sessions/"+sib+"/turns/edit", ""); json.Unmarshal(resp.body, &sibTurn) != nil || !strings.HasPrefix(sibTurn.ChangesRef, "refs/lathe/turns/_") {
			t.Fatalf("the sibling's turn edit: ref %q", sibTurn.ChangesRef)
		}
		sibRefs := sibTurn.ChangesRef + "/after\n" + sibTurn.ChangesRef + "/before\n"
		// Its replay has the offloaded step text whole.
		if resp := expectStatus(t, r.do(t, get, "/api/sessions/"+sib+"/turns/edit/replay", ""), 200); !strings.Contains(string(resp.body), `"delta":"`+offloadedText+`"`) {
			t.Errorf("the replay of an offloaded step lacks its whole text (%d bytes)", len(resp.body))
		}
		// Closed first, the Session has no sandbox of its own at delete:
		// the sibling's removes its refs, and only its.
		expectStatus(t, r.do(t, del, "/api/sessions/"+id, ""), 200)
		expectStatus(t, r.do(t, del, "/api/sessions/"+id+"?force=true", ""), 200)
		if refs := gittest.Run(t, r.dir, "for-each-ref", "--format=%(refname)", "refs/lathe/"); refs != sibRefs {
			t.Errorf("refs after the first Session was deleted:\n%s\nwant\n%s", refs, sibRefs)
		}
		// Deleted while Ready, through its own sandbox.
		expectStatus(t, r.do(t, del, "/api/sessions/"+sib+"?force=true", ""), 200)
		if refs := gittest.Run(t, r.dir, "for-each-ref", "refs/lathe/"); refs != "" {
			t.Errorf("refs left after the Session was deleted:\n%s", refs)
		}
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<absent>"
	}
	return string(b)
}

// escapePath escapes a turn ID as one path segment.
func escapePath(s string) string { return url.PathEscape(s) }
