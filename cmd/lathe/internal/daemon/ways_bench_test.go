package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
)

// waysStart starts a set and returns its ID.
func (r *waysRig) waysStart(tb testing.TB, id, body string) string {
	tb.Helper()
	resp := call(tb, r.srv, post, "/api/sessions/"+id+"/variants", body)
	var out struct {
		AttemptSetID string `json:"attempt_set_id"`
	}
	if resp.status != 202 || json.Unmarshal(resp.body, &out) != nil {
		tb.Fatalf("POST variants: %d %s", resp.status, resp.body)
	}
	return out.AttemptSetID
}

// waysRepo writes n committed files under root.
func waysRepo(tb testing.TB, root string, n int) {
	tb.Helper()
	gittest.Repo(tb, root, gittest.Spread(n))
}

// BenchmarkWaysLaneStart50k measures, on a repository of 50,000 committed
// files, the time from POST variants (4 lanes) to all 4 lanes running,
// against `git clone --no-hardlinks` of the same repository in the same
// run, and reports both and their ratio; then the Discard of the 4 lanes,
// until it answers and until their files are gone from the disk.
func BenchmarkWaysLaneStart50k(b *testing.B) {
	const lanes = 4
	var turns []fakellm.Turn
	for range 64 {
		turns = append(turns, fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("working"), fakellm.Stall(nil)}})
	}
	r := newWaysRig(b, fakellm.Script{Turns: turns})
	waysRepo(b, r.dir, 50_000)
	id := r.create(b, "").ID
	r.ready(b, id)
	var start, clone, discard, removed time.Duration
	for b.Loop() {
		syscall.Sync()
		t0 := time.Now()
		set := r.waysStart(b, id, fmt.Sprintf(`{"input":"work","n":%d}`, lanes))
		r.waitResultsFor(b, 10*time.Minute, id, "all lanes running", func(res waysResults) bool {
			for _, a := range res.Attempts {
				if a.State != "running" {
					return false
				}
			}
			return res.AttemptSetID == set
		})
		start += time.Since(t0)
		b.StopTimer()
		b.Logf("4 lanes running after %v", time.Since(t0))
		req, _ := http.NewRequest(post, r.srv.URL+"/api/sessions/"+id+"/variants/discard", strings.NewReader(`{"attempt_set_id":"`+set+`"}`))
		req.Header.Set("Content-Type", "application/json")
		t2 := time.Now()
		if resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req); err != nil || resp.StatusCode != 200 {
			b.Fatalf("discard: %v %v", resp, err)
		}
		discard += time.Since(t2)
		b.Logf("discard of 4 lanes took %v", time.Since(t2))
		// The lanes' files leave in the background; the clone is timed
		// once they are gone, on a disk that is not removing them.
		trash := filepath.Join(r.d.dataDir, "ways", ".trash")
		polltest.Until(b, "the discarded lanes' files to leave "+trash, func() bool {
			entries, _ := os.ReadDir(trash)
			return len(entries) == 0
		}, polltest.Within(10*time.Minute), polltest.Every(50*time.Millisecond))
		removed += time.Since(t2)
		b.Logf("their files were removed %v after the discard began", time.Since(t2))
		dst := filepath.Join(b.TempDir(), "clone")
		syscall.Sync()
		t1 := time.Now()
		if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", r.dir, dst).CombinedOutput(); err != nil {
			b.Fatalf("git clone: %v %s", err, out)
		}
		clone += time.Since(t1)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(start.Seconds()/n, "lane-start-s")
	b.ReportMetric(clone.Seconds()/n, "clone-s")
	b.ReportMetric(start.Seconds()/clone.Seconds(), "ratio")
	b.ReportMetric(discard.Seconds()/n, "discard-s")
	b.ReportMetric(removed.Seconds()/n, "files-removed-s")
}

// BenchmarkWaysKeep1000 measures Keep (POST adopt, from the call to the set
// settled) of an Attempt that changed 1,000 files.
func BenchmarkWaysKeep1000(b *testing.B) {
	var turns []fakellm.Turn
	for i := range 16 {
		turns = append(turns,
			fakellm.Turn{Steps: []fakellm.Step{fakellm.ToolCall("c", "shell", fmt.Sprintf(`{"command":"mkdir -p gen%d && for i in $(seq 1 1000); do echo $i > gen%d/f$i.txt; done"}`, i, i))}},
			fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("done")}})
	}
	r := newWaysRig(b, fakellm.Script{Turns: turns})
	waysRepo(b, r.dir, 1000)
	id := r.create(b, "").ID
	r.ready(b, id)
	var keep time.Duration
	for b.Loop() {
		b.StopTimer()
		set := r.waysStart(b, id, `{"input":"write","n":1}`)
		res := r.waitResults(b, id, "ready", func(res waysResults) bool { return res.AttemptSetID == set && res.State == "ready" })
		if n := len(res.Attempts[0].ChangedFiles); n != 1000 {
			b.Fatalf("the lane changed %d files: %+v", n, res.Attempts[0])
		}
		b.StartTimer()
		t0 := time.Now()
		mustCall(b, r.srv, 200, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":0}`)
		keep += time.Since(t0)
	}
	b.ReportMetric(keep.Seconds()/float64(b.N), "keep-s")
}
