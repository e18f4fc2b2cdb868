package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"lathe/commands/agentrun"
	"lathe/commands/core"
	"lathe/commands/sessions"
	"lathe/commands/turnrunner"
	turnscmd "lathe/commands/turns"

	"lathe/journal"
	"lathe/journal/bus"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/blobs"
	"lathe/runtime/usage"
)

// contentEnv is a Service wired as the daemon wires it, minus sandboxes:
// the commit feed applies the projections, then publishes on a real
// embedded NATS, whose every journal message the test collects.
type contentEnv struct {
	s       *Service
	j       *journal.Journal
	store   *projections.Store
	blobs   *blobs.Store
	session string
	nats    chan journal.Envelope
}

func newContentEnv(t *testing.T, withBlobs bool) *contentEnv {
	t.Helper()
	e := &contentEnv{j: journaltest.Open(t), store: projections.New(), nats: make(chan journal.Envelope, 256)}
	var err error
	if e.blobs, err = blobs.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	e.store.ResolveWith(e.blobs)
	b, err := bus.Start(bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	err = b.Subscribe(bus.SubjectAll, func(data []byte) {
		env, err := journal.DecodeEnvelope(data)
		if err != nil {
			t.Errorf("NATS message: %v", err)
		}
		e.nats <- env
	})
	if err != nil {
		t.Fatal(err)
	}
	e.j.OnCommit(func(recs []journal.Record) {
		err := e.store.ApplyChanges(recs, func([]projections.Change) {
			if err := b.Publish(recs); err != nil {
				t.Errorf("publish: %v", err)
			}
		})
		if err != nil {
			t.Errorf("apply: %v", err)
		}
	})
	opts := core.Options{Agents: []string{"coder"}}
	if withBlobs {
		opts.Blobs = e.blobs
	}
	e.s = New(e.j, e.store, opts)
	ctx := context.Background()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	w, _, err := e.s.Sessions.RegisterWorkspace(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := e.s.Sessions.CreateSession(ctx, w.ID, sessions.SessionSpec{Name: "s", Mode: &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}})
	if err != nil {
		t.Fatal(err)
	}
	e.session = ss.ID
	return e
}

// accept journals a turn's accept and returns it with its observer.
func (e *contentEnv) accept(t *testing.T, id, input string) (projections.Turn, *agentrun.TurnObserver) {
	t.Helper()
	err := e.s.Turns.Append(context.Background(), []journal.Event{events.New(e.session, events.TurnAccepted{
		TurnID: id, IdempotencyKey: id, AgentID: "coder", Input: events.NewText(input), Source: "ws"})})
	if err != nil {
		t.Fatal(err)
	}
	turn, _ := e.store.Turn(e.session, id)
	return turn, &agentrun.TurnObserver{Core: e.s.Turns.Core, Turn: turn, Ctx: context.Background(), Agent: turn.AgentID, Live: &agentrun.LiveCount{}}
}

// big is about n bytes of numbered lines of kind that end with a marker.
// (Lines that differ keep strings.Contains linear on them.)
func big(n int, kind, marker string) string {
	var b strings.Builder
	for i := 0; b.Len() < n-len(marker); i++ {
		fmt.Fprintf(&b, "%s line %d goes on — ", kind, i)
	}
	b.WriteString(marker)
	return b.String()
}

// A turn whose output is 10 MB journals only small events, every one of
// them is published on NATS, and every reader resolves the whole content.
func TestLargeTurnContentIsPublishedAndResolvedWhole(t *testing.T) {
	e := newContentEnv(t, true)
	ctx := context.Background()
	input := big(300<<10, "input", "END-OF-INPUT")
	text := big(10<<20, "text", "end of text")
	reasoning := big(300<<10, "reasoning", "end of thought")
	args := json.RawMessage(`{"path":"big.txt","content":"` + big(300<<10, "argument", "eof") + `"}`)
	result := big(1<<20, "result", "end of result")
	answer := big(2<<20, "answer", "FINAL-WORD")
	call := agent.Call{CallID: "c1", Occurrence: 1, Name: "write", Arguments: args}
	used := usage.Tokens{InputTokens: 10, OutputTokens: 20, TokenUsageKnown: true}

	turn, o := e.accept(t, "t1", input)
	if err := o.Started("m1"); err != nil {
		t.Fatal(err)
	}
	if err := o.Step(agent.StepOutput{Step: 1, Model: "m1", Text: text, Reasoning: reasoning, Calls: []agent.Call{call}, Usage: used}); err != nil {
		t.Fatal(err)
	}
	if err := o.ToolStarted(call); err != nil {
		t.Fatal(err)
	}
	if err := o.ToolFinished(call, tools.Result{Output: result}, time.Second); err != nil {
		t.Fatal(err)
	}
	// The /ws snapshot of the live run carries the whole tool call.
	snap := e.store.Snapshot()
	if len(snap.Runs) != 1 || len(snap.Runs[0].ToolCalls) != 1 || string(snap.Runs[0].ToolCalls[0].Arguments.Value()) != string(args) ||
		snap.Runs[0].ToolCalls[0].Result.String() != result {
		t.Fatalf("snapshot runs: %d", len(snap.Runs))
	}
	if err := o.Step(agent.StepOutput{Step: 2, Model: "m1", Text: answer, Usage: used}); err != nil {
		t.Fatal(err)
	}
	e.s.Turns.Runner.(*turnrunner.TurnRunner).EndTurn(turn, agent.TurnResult{Outcome: agent.OutcomeDone, Output: answer, Usage: usage.Tokens{InputTokens: 20, OutputTokens: 40, TokenUsageKnown: true}}, false)

	// Every committed event is small and was published, byte for byte.
	var journaled []journal.Envelope
	err := e.j.Scan(ctx, 0, 0, func(seq uint64, raw []byte) error {
		if len(raw) > journal.MaxEventData {
			t.Errorf("event %d is %d bytes", seq, len(raw))
		}
		env, err := journal.DecodeEnvelope(raw)
		journaled = append(journaled, env)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range journaled {
		select {
		case got := <-e.nats:
			if got.Seq != want.Seq || got.Type != want.Type || string(got.Data) != string(want.Data) {
				t.Fatalf("NATS seq %d %s, journal seq %d %s", got.Seq, got.Type, want.Seq, want.Type)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("seq %d (%s) was never published", want.Seq, want.Type)
		}
	}

	check := func(name string, turns []projections.Turn) {
		t.Helper()
		if len(turns) != 1 {
			t.Fatalf("%s: %d turns", name, len(turns))
		}
		got := turns[0]
		switch {
		case got.Status != projections.TurnDone || got.Input.String() != input || got.Output.String() != answer:
			t.Fatalf("%s: status %s, input %d bytes, output %d bytes", name, got.Status, len(got.Input.String()), len(got.Output.String()))
		case len(got.Steps) != 2 || got.Steps[0].Text.String() != text || got.Steps[0].Reasoning.String() != reasoning ||
			string(got.Steps[0].ToolCalls[0].Arguments.Value()) != string(args) || got.Steps[1].Text.String() != answer:
			t.Fatalf("%s: steps not whole", name)
		case len(got.ToolCalls) != 1 || string(got.ToolCalls[0].Arguments.Value()) != string(args) || got.ToolCalls[0].Result.String() != result:
			t.Fatalf("%s: tool calls not whole", name)
		}
	}
	turns := e.store.Turns(e.session)
	check("Turns", turns)

	// The transcript, the model's history and both exports are whole.
	msgs := turnscmd.Transcript(turns)
	if len(msgs) != 4 || msgs[0].Content != input || msgs[1].Content != text || msgs[2].Content != result || msgs[3].Content != answer {
		t.Fatalf("transcript: %d messages", len(msgs))
	}
	hist := turnscmd.History(turns)
	if len(hist) != 4 || string(hist[1].ToolCalls[0].Arguments) != string(args) || hist[3].Text != answer {
		t.Fatalf("history: %d messages", len(hist))
	}
	ss, _ := e.store.Session(e.session)
	exp := turnscmd.NewExport(ss, "/w", turns)
	md := string(exp.Markdown())
	for _, part := range []string{text, reasoning, result, answer} {
		if !strings.Contains(md, part) {
			t.Fatalf("markdown export lacks a %d-byte part", len(part))
		}
	}
	js, err := json.Marshal(exp)
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Turns []projections.Turn }
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	check("JSON export", back.Turns)
	if strings.Contains(string(js), `"$blob"`) {
		t.Fatal("JSON export holds a reference")
	}

	// Search reads past the preview.
	for _, q := range []string{"final-word", "end-of-input"} {
		hits := e.store.SearchTurns(q, "", 10)
		if len(hits) != 1 || hits[0].TurnID != "t1" || !strings.Contains(strings.ToLower(hits[0].Snippet), q) {
			t.Fatalf("search %q: %+v", q, hits)
		}
	}

	// A replay of the journal reads the same turn.
	replayed := projections.New()
	replayed.ResolveWith(e.blobs)
	if _, err := replayed.Replay(ctx, e.j); err != nil {
		t.Fatal(err)
	}
	check("replay", replayed.Turns(e.session))

	// So does a store restored from a checkpoint.
	cp := filepath.Join(t.TempDir(), "checkpoint")
	if _, err := e.store.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	restored, replayedN, err := projections.Load(ctx, e.j, cp)
	if err != nil || replayedN != 0 {
		t.Fatalf("load checkpoint: replayed %d, %v", replayedN, err)
	}
	restored.ResolveWith(e.blobs)
	check("checkpoint", restored.Turns(e.session))

	// Without a reader, content stays a reference that says what it is.
	bare := projections.New()
	if _, err := bare.Replay(ctx, e.j); err != nil {
		t.Fatal(err)
	}
	out := bare.Turns(e.session)[0].Output
	if !out.Stored() || out.Blob.Size != int64(len(answer)) || !strings.HasPrefix(answer, out.String()) {
		t.Fatalf("unresolved output: %+v", out.Blob)
	}
}

// Without a blob store nothing is offloaded, and the journal refuses the
// oversized event loudly rather than letting NATS drop it.
func TestLargeContentWithoutABlobStoreIsRefusedAtAppend(t *testing.T) {
	e := newContentEnv(t, false)
	_, o := e.accept(t, "t1", "hi")
	err := o.Step(agent.StepOutput{Step: 1, Model: "m1", Text: big(1<<20, "text", "x")})
	if !errors.Is(err, journal.ErrEventTooLarge) {
		t.Fatalf("a 1 MB step without a blob store: %v, want ErrEventTooLarge", err)
	}
}

type liveRecorder struct{ deltas []events.LiveDelta }

func (r *liveRecorder) PublishLive(d events.LiveDelta) error {
	r.deltas = append(r.deltas, d)
	return nil
}

// A delta of megabytes goes out in pieces a NATS message holds, cut on
// rune boundaries, numbered in order.
func TestLargeDeltaIsPublishedInPieces(t *testing.T) {
	rec := &liveRecorder{}
	o := &agentrun.TurnObserver{Core: &core.Core{Opts: core.Options{Live: rec}}, Turn: projections.Turn{SessionID: "s", TurnID: "t", AgentID: "coder"}, Agent: "coder", Live: &agentrun.LiveCount{}}
	text := big(1<<20, "text", "é")
	o.Delta(events.DeltaToken, text)
	o.Delta(events.DeltaToken, "")
	var b strings.Builder
	for i, d := range rec.deltas {
		if len(d.Delta) > agentrun.MaxLiveDelta || !utf8.ValidString(d.Delta) || d.N != uint64(i+1) || d.Kind != events.DeltaToken {
			t.Fatalf("delta %d: %d bytes, n %d", i, len(d.Delta), d.N)
		}
		b.WriteString(d.Delta)
	}
	if b.String() != text || len(rec.deltas) < 16 || o.Live.N != uint64(len(rec.deltas)) {
		t.Fatalf("%d deltas carry %d of %d bytes", len(rec.deltas), b.Len(), len(text))
	}
}
