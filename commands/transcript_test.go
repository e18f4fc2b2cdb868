package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/commands/core"
	"lathe/commands/sessions"
	turnscmd "lathe/commands/turns"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Transcript fixtures.

func call(id string, occ int, name, args string) events.StepCall {
	return events.StepCall{CallID: id, Occurrence: occ, Name: name, Arguments: events.NewJSON(json.RawMessage(args))}
}

func result(c events.StepCall, res string, isErr bool) projections.ToolCall {
	return projections.ToolCall{CallID: c.CallID, Occurrence: c.Occurrence, Name: c.Name, Arguments: c.Arguments,
		Finished: true, Result: events.NewText(res), IsError: isErr}
}

func started(c events.StepCall) projections.ToolCall {
	return projections.ToolCall{CallID: c.CallID, Occurrence: c.Occurrence, Name: c.Name, Arguments: c.Arguments}
}

func turn(id, status, input string, steps ...projections.Step) projections.Turn {
	t := projections.Turn{TurnID: id, Status: status, Input: events.NewText(input), Steps: steps, ToolCalls: []projections.ToolCall{}}
	if status == projections.TurnDone && len(steps) > 0 {
		t.Output = steps[len(steps)-1].Text
	}
	return t
}

func step(n int, text string, calls ...events.StepCall) projections.Step {
	return projections.Step{Step: n, Agent: "coder", Text: events.NewText(text), ToolCalls: calls}
}

func with(t projections.Turn, f func(*projections.Turn)) projections.Turn {
	f(&t)
	return t
}

func userMsg(turn, content string) turnscmd.Message {
	return turnscmd.Message{Role: "user", Content: content, TurnID: turn}
}

func asstMsg(turn, content string, calls ...events.StepCall) turnscmd.Message {
	return turnscmd.Message{Role: "assistant", Content: content, TurnID: turn, ToolCalls: calls}
}

func toolMsg(turn string, c events.StepCall, content string, isErr bool) turnscmd.Message {
	return turnscmd.Message{Role: "tool", Content: content, TurnID: turn, CallID: c.CallID, Occurrence: &c.Occurrence, IsError: &isErr}
}

func llmUser(text string) llm.Message { return llm.Message{Role: llm.RoleUser, Text: text} }

func llmAsst(text string, calls ...events.StepCall) llm.Message {
	m := llm.Message{Role: llm.RoleAssistant, Text: text}
	for _, c := range calls {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: c.CallID, Name: c.Name, Arguments: c.Arguments.Value()})
	}
	return m
}

func llmTool(id, text string, isErr bool) llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: id, Text: text, IsError: isErr}
}

func TestTranscriptAndHistory(t *testing.T) {
	read := call("c1", 1, "read_file", `{"path":"a.txt"}`)
	shell := call("c2", 1, "shell", `{"command":"make"}`)
	readAgain := call("c1", 2, "read_file", `{"path":"b.txt"}`)
	for _, tc := range []struct {
		name       string
		turns      []projections.Turn
		transcript []turnscmd.Message
		history    []llm.Message
	}{
		{name: "none", transcript: []turnscmd.Message{}, history: []llm.Message{}},
		{
			name: "one answer, display input shown, input sent",
			turns: []projections.Turn{with(turn("t1", projections.TurnDone, "hi\n\n[file a.txt]", step(1, "hello")),
				func(t *projections.Turn) { t.DisplayInput = events.TextPtr(new("hi")) })},
			transcript: []turnscmd.Message{userMsg("t1", "hi"), asstMsg("t1", "hello")},
			history:    []llm.Message{llmUser("hi\n\n[file a.txt]"), llmAsst("hello")},
		},
		{
			name: "tool calls and their results, then the answer",
			turns: []projections.Turn{with(turn("t1", projections.TurnDone, "build it", step(1, "", read, shell), step(2, "built")),
				func(t *projections.Turn) {
					t.ToolCalls = []projections.ToolCall{result(read, "alpha", false), result(shell, "exit 2", true)}
				})},
			transcript: []turnscmd.Message{userMsg("t1", "build it"), asstMsg("t1", "", read, shell),
				toolMsg("t1", read, "alpha", false), toolMsg("t1", shell, "exit 2", true), asstMsg("t1", "built")},
			history: []llm.Message{llmUser("build it"), llmAsst("", read, shell),
				llmTool("c1", "alpha", false), llmTool("c2", "exit 2", true), llmAsst("built")},
		},
		{
			name: "a stopped turn: unfinished calls get a not-run result, the partial inference is dropped",
			turns: []projections.Turn{with(turn("t1", projections.TurnCancelled, "go", step(1, "looking", read, shell),
				projections.Step{Step: 2, Text: events.NewText("half an ans"), Partial: true}),
				func(t *projections.Turn) {
					t.ToolCalls = []projections.ToolCall{result(read, "alpha", false), started(shell)}
				})},
			transcript: []turnscmd.Message{userMsg("t1", "go"), asstMsg("t1", "looking", read, shell),
				toolMsg("t1", read, "alpha", false), toolMsg("t1", shell, turnscmd.NotRunResult, true)},
			history: []llm.Message{llmUser("go"), llmAsst("looking", read, shell),
				llmTool("c1", "alpha", false), llmTool("c2", turnscmd.NotRunResult, true)},
		},
		{
			name: "a crashed turn whose call never started",
			turns: []projections.Turn{with(turn("t1", projections.TurnError, "go", step(1, "", shell)),
				func(t *projections.Turn) { t.Interrupted = true })},
			transcript: []turnscmd.Message{userMsg("t1", "go"), asstMsg("t1", "", shell), toolMsg("t1", shell, turnscmd.NotRunResult, true)},
			history:    []llm.Message{llmUser("go"), llmAsst("", shell), llmTool("c2", turnscmd.NotRunResult, true)},
		},
		{
			name:       "a failed turn without output keeps the user message",
			turns:      []projections.Turn{turn("t1", projections.TurnError, "go"), turn("t2", projections.TurnDone, "again", step(1, "ok"))},
			transcript: []turnscmd.Message{userMsg("t1", "go"), userMsg("t2", "again"), asstMsg("t2", "ok")},
			history:    []llm.Message{llmUser("go"), llmUser("again"), llmAsst("ok")},
		},
		{
			name: "a prompt a hook refused is neither listed nor sent (issue 32, finding 3)",
			turns: []projections.Turn{with(turn("t1", projections.TurnError, "the key is sk-secret"),
				func(t *projections.Turn) { t.Refused = true }), turn("t2", projections.TurnDone, "again", step(1, "ok"))},
			transcript: []turnscmd.Message{userMsg("t2", "again"), asstMsg("t2", "ok")},
			history:    []llm.Message{llmUser("again"), llmAsst("ok")},
		},
		{
			name: "live turns and empty inferences are left out",
			turns: []projections.Turn{
				turn("t1", projections.TurnDone, "a", step(1, ""), step(2, "b")),
				turn("t2", projections.TurnRunning, "c", step(1, "d")),
			},
			transcript: []turnscmd.Message{userMsg("t1", "a"), asstMsg("t1", "b")},
			history:    []llm.Message{llmUser("a"), llmAsst("b")},
		},
		{
			name: "a done turn's output that no step carries",
			turns: []projections.Turn{with(turn("t1", projections.TurnDone, "a"),
				func(t *projections.Turn) { t.Output = events.NewText("answer") })},
			transcript: []turnscmd.Message{userMsg("t1", "a"), asstMsg("t1", "answer")},
			history:    []llm.Message{llmUser("a"), llmAsst("answer")},
		},
		{
			name: "a repeated provider call ID is told apart by occurrence",
			turns: []projections.Turn{with(turn("t1", projections.TurnDone, "a", step(1, "", read), step(2, "", readAgain), step(3, "done")),
				func(t *projections.Turn) {
					t.ToolCalls = []projections.ToolCall{result(read, "alpha", false), result(readAgain, "beta", false)}
				})},
			transcript: []turnscmd.Message{userMsg("t1", "a"), asstMsg("t1", "", read), toolMsg("t1", read, "alpha", false),
				asstMsg("t1", "", readAgain), toolMsg("t1", readAgain, "beta", false), asstMsg("t1", "done")},
			history: []llm.Message{llmUser("a"), llmAsst("", read), llmTool("c1", "alpha", false),
				llmAsst("", readAgain), llmTool("c1", "beta", false), llmAsst("done")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := turnscmd.Transcript(tc.turns)
			for i := range got {
				got[i].Input = ""
			}
			if !reflect.DeepEqual(got, tc.transcript) {
				t.Errorf("Transcript:\n got %s\nwant %s", jsonOf(t, got), jsonOf(t, tc.transcript))
			}
			if h := turnscmd.History(tc.turns); !reflect.DeepEqual(h, tc.history) {
				t.Errorf("History:\n got %+v\nwant %+v", h, tc.history)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTranscriptJSONShape(t *testing.T) {
	c := call("c1", 1, "shell", `{"command":"ls"}`)
	tr := turn("t1", projections.TurnCancelled, "go", step(1, "", c))
	got := string(jsonOf(t, turnscmd.Transcript([]projections.Turn{tr})))
	want := `[{"role":"user","content":"go","turn_id":"t1"},` +
		`{"role":"assistant","content":"","turn_id":"t1","tool_calls":[{"call_id":"c1","occurrence":1,"name":"shell","arguments":{"command":"ls"}}]},` +
		`{"role":"tool","content":"` + turnscmd.NotRunResult + `","turn_id":"t1","call_id":"c1","occurrence":1,"is_error":true}]`
	if got != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
}

func TestFenceOutrunsBackticks(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "```\nplain\n```"},
		{"a ``` b", "````\na ``` b\n````"},
		{"`````", "``````\n`````\n``````"},
		{"x\n", "```\nx\n```"},
	} {
		if got := turnscmd.Fence(tc.in, ""); got != tc.want {
			t.Errorf("fence(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"a", "`a`"}, {"a`b", "``a`b``"}, {"`a", "`` `a ``"}, {"a\nb", "`a b`"},
	} {
		if got := turnscmd.CodeSpan(tc.in); got != tc.want {
			t.Errorf("codeSpan(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := turnscmd.Thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// exportFixture is a Session whose turns show every part of the export.
func exportFixture() turnscmd.Export {
	at := time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC)
	cost := func(usd float64, known bool) projections.Usage {
		return projections.Usage{CostUSD: usd, CostKnown: known}
	}
	used := func(in, out, reasoning int, known bool, c projections.Usage) projections.Usage {
		c.View = usage.Tokens{InputTokens: in, OutputTokens: out, ReasoningTokens: reasoning, TokenUsageKnown: known}.View()
		return c
	}
	read := call("call_1", 1, "read_file", `{"path":"README.md"}`)
	write := call("call_2", 1, "write_file", `{"path":"notes.md","content":"# Notes"}`)
	shell := call("call_3", 1, "shell", `{"command":"make test"}`)

	t1 := with(turn("turn-1", projections.TurnDone, "Summarise the README.\n\n[attached: README.md]",
		projections.Step{Step: 1, Agent: "coder", Reasoning: events.NewText("I should read the file first."), ToolCalls: []events.StepCall{read}},
		step(2, "The README describes **Lathe**:\n\n- a daemon\n- a workbench")),
		func(t *projections.Turn) {
			t.DisplayInput = events.TextPtr(new("Summarise the README."))
			t.Model = "gpt-test"
			t.ToolCalls = []projections.ToolCall{result(read, "# Lathe\n\nExample:\n\n```sh\nlathe serve\n```", false)}
			t.Usage = used(1200, 80, 30, true, cost(0.0042, true))
		})
	t2 := with(turn("turn-2", projections.TurnCancelled, "Write notes and run the tests",
		step(1, "Writing notes, then testing.", write, shell),
		projections.Step{Step: 2, Agent: "coder", Text: events.NewText("The tests"), Partial: true}),
		func(t *projections.Turn) {
			t.Model = "gpt-test"
			t.ToolCalls = []projections.ToolCall{result(write, "permission denied: notes.md", true), started(shell)}
			t.Usage = used(900, 40, 0, false, cost(0, false))
		})
	t3 := with(turn("turn-3", projections.TurnError, "Try again"), func(t *projections.Turn) {
		t.Error = "model server unreachable:\nconnection refused"
		t.Interrupted = true
		t.Usage = used(0, 0, 0, true, cost(0, true))
	})
	turns := []projections.Turn{t1, t2, t3}
	for i := range turns {
		turns[i].SessionID = "01JSESSION0000000000000000"
		turns[i].AcceptedAt = at.Add(time.Duration(i) * time.Minute)
	}
	ss := projections.Session{ID: "01JSESSION0000000000000000", Name: "Docs `pass`", WorkspaceID: "01JWORKSPACE00000000000000",
		Mode: events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}}
	return turnscmd.NewExport(ss, "/home/dev/lathe", turns)
}

func TestExportMarkdownGolden(t *testing.T) {
	golden(t, "export.golden", exportFixture().Markdown())
}

func TestExportTotals(t *testing.T) {
	got := exportFixture().Totals
	want := turnscmd.ExportTotals{Turns: 3, Usage: projections.Usage{
		View:    usage.Tokens{InputTokens: 2100, OutputTokens: 120, ReasoningTokens: 30, TokenUsageKnown: false}.View(),
		CostUSD: 0.0042, CostKnown: false,
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("totals = %+v, want %+v", got, want)
	}
	empty := turnscmd.NewExport(projections.Session{}, "", []projections.Turn{}).Totals
	if !empty.TokenUsageKnown || !empty.CostKnown || empty.Turns != 0 {
		t.Errorf("empty totals = %+v, want known zeros", empty)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// rewindFixture is a single-Agent Session with three ended turns whose
// transcripts are 2, 4 and 1 messages long.
func rewindFixture(t *testing.T, mode events.Mode) (*Service, string) {
	t.Helper()
	s, _ := newTaskService(t)
	ctx := context.Background()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	w, _, err := s.Sessions.RegisterWorkspace(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := s.Sessions.CreateSession(ctx, w.ID, sessions.SessionSpec{Name: "s", Mode: &mode})
	if err != nil {
		t.Fatal(err)
	}
	c := call("c1", 1, "shell", `{"command":"ls"}`)
	appendTurn(t, s, ss.ID, "t1", events.TurnOutput{TurnID: "t1", Agent: "coder", Step: 1, Text: events.NewText("one")},
		events.TurnDone{TurnID: "t1", Output: events.NewText("one")})
	appendTurn(t, s, ss.ID, "t2", events.TurnOutput{TurnID: "t2", Agent: "coder", Step: 1, ToolCalls: []events.StepCall{c}},
		events.ToolCallStarted{TurnID: "t2", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "shell", Arguments: c.Arguments},
		events.ToolCallFinished{TurnID: "t2", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "shell", Result: events.NewText("a.txt")},
		events.TurnOutput{TurnID: "t2", Agent: "coder", Step: 2, Text: events.NewText("two")}, events.TurnDone{TurnID: "t2", Output: events.NewText("two")})
	appendTurn(t, s, ss.ID, "t3", events.TurnFailed{TurnID: "t3", Error: "boom"})
	if n := len(turnscmd.Transcript(s.Turns.Store.Turns(ss.ID))); n != 7 {
		t.Fatalf("fixture transcript has %d messages, want 7", n)
	}
	return s, ss.ID
}

// appendTurn journals a turn: its accept, its start, then evs.
func appendTurn(t *testing.T, s *Service, session, id string, evs ...events.Payload) {
	t.Helper()
	all := append([]events.Payload{
		events.TurnAccepted{TurnID: id, IdempotencyKey: id, AgentID: "coder", Input: events.NewText("input " + id), Source: "ws"},
		events.TurnStarted{TurnID: id, Agent: "coder", Model: "m"},
	}, evs...)
	js := make([]journal.Event, len(all))
	for i, p := range all {
		js[i] = events.New(session, p)
	}
	if err := s.Turns.Append(context.Background(), js); err != nil {
		t.Fatal(err)
	}
}

func visibleIDs(s *Service, session string) []string {
	var ids []string
	for _, t := range s.Turns.Store.Turns(session) {
		ids = append(ids, t.TurnID)
	}
	return ids
}

func TestRewindKeep(t *testing.T) {
	single := events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
	for _, tc := range []struct {
		name        string
		keepThrough *string
		keep        *int
		hidden      []string
		err         error
	}{
		{name: "keep 0 hides all", keep: new(0), hidden: []string{"t1", "t2", "t3"}},
		{name: "keep 1 splits the first turn", keep: new(1), hidden: []string{"t1", "t2", "t3"}},
		{name: "keep 2 is the first turn", keep: new(2), hidden: []string{"t2", "t3"}},
		{name: "keep 5 splits the second", keep: new(5), hidden: []string{"t2", "t3"}},
		{name: "keep 6", keep: new(6), hidden: []string{"t3"}},
		{name: "keep all", keep: new(7), hidden: []string{}},
		{name: "keep more", keep: new(1000), hidden: []string{}},
		{name: "through the first", keepThrough: new("t1"), hidden: []string{"t2", "t3"}},
		{name: "through the last", keepThrough: new("t3"), hidden: []string{}},
		{name: "unknown turn", keepThrough: new("nope"), err: core.ErrNotFound},
		{name: "empty turn", keepThrough: new(""), err: core.ErrInvalid},
		{name: "negative keep", keep: new(-1), err: core.ErrInvalid},
		{name: "neither", err: core.ErrInvalid},
		{name: "both", keepThrough: new("t1"), keep: new(2), err: core.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, id := rewindFixture(t, single)
			before, _ := s.Turns.Journal.Version(id)
			hidden, err := s.Turns.Rewind(context.Background(), id, tc.keepThrough, tc.keep)
			after, _ := s.Turns.Journal.Version(id)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if after != before {
					t.Errorf("a refused rewind appended %d events", after-before)
				}
				return
			}
			if err != nil || !slices.Equal(hidden, tc.hidden) || hidden == nil {
				t.Fatalf("Rewind = %q, %v; want %q", hidden, err, tc.hidden)
			}
			if want := uint64(min(1, len(tc.hidden))); after-before != want {
				t.Errorf("appended %d events, want %d", after-before, want)
			}
			for _, h := range tc.hidden {
				if tr, _ := s.Turns.Store.Turn(id, h); !tr.Rewound || slices.Contains(visibleIDs(s, id), h) {
					t.Errorf("turn %s not rewound", h)
				}
			}
		})
	}
}

func TestRewindRefusals(t *testing.T) {
	ctx := context.Background()
	s, id := rewindFixture(t, events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"})
	if _, err := s.Turns.Rewind(ctx, id, new("t1"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Turns.Rewind(ctx, id, new("t3"), nil); !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "already rewound") {
		t.Errorf("rewind through a rewound turn: %v, want ErrInvalid", err)
	}
	if _, err := s.Turns.Rewind(ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, new(0)); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("rewind of a missing Session: %v, want ErrNotFound", err)
	}
	appendTurn(t, s, id, "t4")
	if _, err := s.Turns.Rewind(ctx, id, nil, new(0)); !errors.Is(err, core.ErrConflict) || !strings.Contains(err.Error(), "t4") {
		t.Errorf("rewind during a live turn: %v, want ErrConflict naming it", err)
	}

	lattice, lid := rewindFixture(t, events.Mode{Kind: events.ModeLattice})
	if _, err := lattice.Turns.Rewind(ctx, lid, nil, new(0)); !errors.Is(err, core.ErrConflict) || !strings.Contains(err.Error(), "single-Agent") {
		t.Errorf("rewind of a lattice Session: %v, want ErrConflict", err)
	}
}

func FuzzFence(f *testing.F) {
	for _, seed := range []string{"", "x", "```", "a ``` b\n````\n", "`", "\n\n", "~~~"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := turnscmd.Fence(s, "text")
		lines := strings.Split(out, "\n")
		open, closing := strings.TrimSuffix(lines[0], "text"), lines[len(lines)-1]
		if open != closing || len(open) < 3 || strings.Trim(open, "`") != "" {
			t.Fatalf("fence(%q) opens %q and closes %q", s, lines[0], closing)
		}
		for _, l := range lines[1 : len(lines)-1] {
			if strings.HasPrefix(strings.TrimLeft(l, " "), open) {
				t.Fatalf("fence(%q): content line %q closes the fence early", s, l)
			}
		}
		if span := turnscmd.CodeSpan(s); strings.ContainsAny(span, "\n\r") {
			t.Fatalf("codeSpan(%q) = %q spans lines", s, span)
		}
	})
}
