package daemon

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"lathe/runtime/llm/fakellm"
)

// TestWaysFrameSequence records what a /ws client sees of two Ways sets
// against the scripted model, compared with testdata/ways_frames.golden
// (-update rewrites it): a 2-lane set verified and kept, then a 1-lane set
// discarded.
//
// Lanes run concurrently, so the golden holds one section per set with its
// set-level frames in arrival order (the ownership frames, the set's own
// events, the Check results, the Keep phases, the kept turn joining the
// Session's history, the settlement), then one section per lane with that
// lane's frames in arrival order: lane-started, its token/reasoning/
// tool-call frames (each carrying the lane's run key as workflow and the
// attempt_set_id) and its events up to attempt-lane-ended. An event frame
// names only its aggregate; the journal's copy of the event (which names
// its lane) says which lane it belongs to. Frames are compact JSON with
// their keys sorted; IDs become <set-1>, <session>, <workspace>, the seq
// cursor, tool durations and the Session record an event frame carries are
// dropped, and adjacent deltas of one kind are merged (the daemon may
// coalesce them).
func TestWaysFrameSequence(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		// Set 1, lane 0 (m1): text, a write, then the answer.
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("lane zero "), fakellm.Text("writes"),
			fakellm.ToolCall("c1", "write_file", `{"path":"lane0.txt","content":"from lane 0\n"}`), fakellm.Usage(10, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("lane zero done"), fakellm.Usage(10, 5, 0)}},
		// Set 1, lane 1 (m2): reasoning, a shell command, then the answer.
		{Model: "m2", Steps: []fakellm.Step{fakellm.Reasoning("rewrite a.txt"),
			fakellm.ToolCall("d1", "shell", `{"command":"printf 'lane 1\\n' > a.txt"}`), fakellm.Usage(20, 5, 1)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("lane one done"), fakellm.Usage(20, 5, 0)}},
		// Set 2, its one lane (m3): answers at once.
		{Model: "m3", Steps: []fakellm.Step{fakellm.Text("nothing to do"), fakellm.Usage(3, 2, 0)}},
	}}
	r, id := newWaysSession(t, script)
	mustCall(t, r.srv, 200, put, "/api/sessions/"+id+"/check", `{"check_command":"test -f a.txt"}`)

	kept := r.waysStart(t, id, `{"input":"improve a.txt","lanes":[{"model":"m1"},{"model":"m2"}]}`)
	r.waitResults(t, id, "ready", func(res waysResults) bool { return res.AttemptSetID == kept && res.State == "ready" })
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/verify", `{"attempt_set_id":"`+kept+`"}`)
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+kept+`","index":1}`)
	r.log.waitRaw(t, "event", `"type":"attempt-set-settled","seq":`, 1)

	discarded := r.waysStart(t, id, `{"input":"look around","n":1,"lanes":[{"model":"m3"}]}`)
	r.waitResults(t, id, "ready", func(res waysResults) bool { return res.AttemptSetID == discarded && res.State == "ready" })
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/discard", `{"attempt_set_id":"`+discarded+`"}`)
	r.log.waitRaw(t, "event", `"type":"attempt-set-settled","seq":`, 2)

	frames := r.log.all()
	got := waysFrameSections(t, r, frames, id, kept, "<set-1>") + waysFrameSections(t, r, frames, id, discarded, "<set-2>")
	checkGolden(t, "ways_frames.golden", strings.ReplaceAll(got, r.ws, "<workspace>"))
}

// newWaysSession starts a Ways rig on a Git Workspace with one Ready
// Session, whose unresolved set is discarded when the test ends.
func newWaysSession(t *testing.T, script fakellm.Script) (*waysRig, string) {
	t.Helper()
	r := newWaysRig(t, script)
	r.gitWorkspace(t)
	id := r.create(t, "").ID
	r.ready(t, id)
	r.discardAtEnd(t, id)
	return r, id
}

// all returns every frame the log holds, in arrival order.
func (l *envFrameLog) all() []envFrame {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.frames)
}

// wsFrame is a /ws frame decoded for sorting and rendering.
type wsFrame map[string]any

func (f wsFrame) str(key string) string {
	s, _ := f[key].(string)
	return s
}

// laneOfEvents maps the seq of each lane event of set (bar the Check's
// lane-verified, which Verify appends after every lane ended) to its
// lane's index, from the journal.
func laneOfEvents(t *testing.T, r *waysRig, set string) map[float64]int {
	t.Helper()
	resp := r.do(t, get, "/api/events/journal?aggregate="+set, "")
	if resp.status != 200 {
		t.Fatalf("journal feed: %d %s", resp.status, resp.body)
	}
	out := map[float64]int{}
	for _, env := range feed(t, resp.body) {
		var lane struct {
			Index *int   `json:"index"`
			Run   string `json:"run"`
		}
		if json.Unmarshal(env.Data, &lane) == nil && lane.Run != "" && lane.Index != nil && env.Type != "attempt-lane-verified" {
			out[float64(env.Seq)] = *lane.Index
		}
	}
	return out
}

// waysFrameSections renders the frames of one set of Session session: its
// set-level frames, then each lane's, as described on
// TestWaysFrameSequence.
func waysFrameSections(t *testing.T, r *waysRig, raws []envFrame, session, set, name string) string {
	t.Helper()
	a, ok := r.d.Store().AttemptSet(set)
	if !ok {
		t.Fatalf("set %s unknown", set)
	}
	laneOfSeq := laneOfEvents(t, r, set)
	laneOfRun := map[string]int{}
	for _, l := range a.Attempts {
		laneOfRun[l.Run] = l.Index
	}
	setLevel, lanes := []wsFrame{}, make([][]wsFrame, len(a.Attempts))
	began := false
	for _, raw := range raws {
		var f wsFrame
		if err := json.Unmarshal([]byte(raw.Raw), &f); err != nil {
			t.Fatalf("%v: %s", err, raw.Raw)
		}
		kind := f.str("kind")
		if kind == "workspace-attempt-changing" && f.str("attempt_set_id") == set {
			began = true
		}
		if !began {
			continue
		}
		lane := -1
		switch {
		case f.str("attempt_set_id") == set && kind != "lane-verified" && !strings.HasPrefix(kind, "workspace-attempt-"):
			run := f.str("run")
			if run == "" {
				run = f.str("workflow")
			}
			i, ok := laneOfRun[run]
			if !ok {
				t.Errorf("a frame of set %s names no lane of it: %s", set, raw.Raw)
			}
			lane = i
		case f.str("attempt_set_id") == set:
		case kind == "event" && f.str("aggregate_id") == set:
			if i, ok := laneOfSeq[f["seq"].(float64)]; ok {
				lane = i
			}
		case kind == "event" && f.str("aggregate_id") == session:
		case (kind == "tool-call" || kind == "token" || kind == "reasoning") && strings.HasPrefix(f.str("workflow"), session+":way"):
			t.Errorf("a lane's frame without its set: %s", raw.Raw) // whatever the golden holds
			continue
		case (kind == "tool-call" || kind == "token" || kind == "reasoning") && f.str("workflow") == session:
		case strings.HasPrefix(kind, "session-") && f.str("session") == session && !strings.HasPrefix(kind, "session-environment-"):
		default:
			continue // another set's or Session's, or not about a set
		}
		if kind == "event" {
			f = wsFrame{"kind": kind, "type": f["type"], "aggregate": f["aggregate"], "aggregate_id": f["aggregate_id"]}
		}
		delete(f, "duration_ms")
		if lane < 0 {
			setLevel = append(setLevel, f)
		} else {
			lanes[lane] = mergeDelta(lanes[lane], f)
		}
		if kind == "event" && f.str("type") == "attempt-set-settled" && f.str("aggregate_id") == set {
			began = false
		}
	}
	for i, fs := range lanes {
		if len(fs) < 2 || fs[0].str("kind") != "lane-started" || fs[len(fs)-1].str("type") != "attempt-lane-ended" {
			t.Errorf("lane %d of %s does not run from lane-started to attempt-lane-ended: %v", i, name, fs)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "== %s\n", name)
	render := func(fs []wsFrame) {
		for _, f := range fs {
			line, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	render(setLevel)
	for i, fs := range lanes {
		fmt.Fprintf(&b, "== %s lane %d\n", name, i)
		render(fs)
	}
	return strings.NewReplacer(set, name, session, "<session>").Replace(b.String())
}

// mergeDelta appends f to fs, merged into the last frame when both are
// deltas of one kind.
func mergeDelta(fs []wsFrame, f wsFrame) []wsFrame {
	kind := f.str("kind")
	if n := len(fs); n > 0 && (kind == "token" || kind == "reasoning") && fs[n-1].str("kind") == kind {
		fs[n-1]["delta"] = fs[n-1].str("delta") + f.str("delta")
		return fs
	}
	return append(fs, f)
}
