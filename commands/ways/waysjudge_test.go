package ways

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"lathe/runtime/agent"
)

func TestParseRanking(t *testing.T) {
	survivors := []int{0, 2, 3}
	for _, tc := range []struct {
		name, data string
		err        string // "" for a valid ranking
		want       []int  // indexes, best first
	}{
		{"valid", `{"ranking":[{"index":2,"rank":2,"reason":"ok"},{"index":0,"rank":1,"reason":"best"},{"index":3,"rank":3,"reason":"worst"}]}`, "", []int{0, 2, 3}},
		{"missing one", `{"ranking":[{"index":2,"rank":1,"reason":"a"},{"index":0,"rank":2,"reason":"b"}]}`, "lists 2", nil},
		{"not a survivor", `{"ranking":[{"index":1,"rank":1,"reason":"a"},{"index":0,"rank":2,"reason":"b"},{"index":3,"rank":3,"reason":"c"}]}`, "not a survivor", nil},
		{"twice", `{"ranking":[{"index":0,"rank":1,"reason":"a"},{"index":0,"rank":2,"reason":"b"},{"index":3,"rank":3,"reason":"c"}]}`, "twice", nil},
		{"rank repeated", `{"ranking":[{"index":0,"rank":1,"reason":"a"},{"index":2,"rank":1,"reason":"b"},{"index":3,"rank":3,"reason":"c"}]}`, "unique rank", nil},
		{"rank out of range", `{"ranking":[{"index":0,"rank":1,"reason":"a"},{"index":2,"rank":2,"reason":"b"},{"index":3,"rank":4,"reason":"c"}]}`, "unique rank", nil},
		{"no reason", `{"ranking":[{"index":0,"rank":1,"reason":" "},{"index":2,"rank":2,"reason":"b"},{"index":3,"rank":3,"reason":"c"}]}`, "no reason", nil},
		{"unknown field", `{"ranking":[],"winner":0}`, "not {ranking", nil},
		{"rank a string", `{"ranking":[{"index":0,"rank":"1","reason":"a"}]}`, "not {ranking", nil},
		{"not an object", `[1,2]`, "not {ranking", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRanking([]byte(tc.data), survivors)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var idx []int
			for _, r := range got {
				idx = append(idx, r.Index)
			}
			if !slices.Equal(idx, tc.want) {
				t.Errorf("order %v, want %v", idx, tc.want)
			}
		})
	}
}

func FuzzParseRanking(f *testing.F) {
	f.Add([]byte(`{"ranking":[{"index":0,"rank":1,"reason":"a"},{"index":1,"rank":2,"reason":"b"}]}`))
	f.Add([]byte(`{"ranking":[{"index":0,"rank":2,"reason":"a"},{"index":1,"rank":2,"reason":"b"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseRanking(data, []int{0, 1})
		if err != nil {
			return
		}
		if len(got) != 2 || got[0].Rank != 1 || got[1].Rank != 2 || got[0].Index == got[1].Index {
			t.Fatalf("accepted a ranking that is not a permutation: %+v", got)
		}
	})
}

func TestStructuredNeverReadsFreeText(t *testing.T) {
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{`{"ranking":[]}`, true},
		{"```json\n{\"ranking\":[]}\n```", true},
		{`I think attempt 1 is best: {"ranking":[]}`, false},
		{`Attempt 0 ranks first.`, false},
	} {
		_, ok := structured(agent.ControlResult{Text: tc.text}, rankingTool)
		if ok != tc.ok {
			t.Errorf("structured(%q) = %v, want %v", tc.text, ok, tc.ok)
		}
	}
	data, ok := structured(agent.ControlResult{Text: "prose", Calls: []agent.Call{{Name: rankingTool, Arguments: json.RawMessage(`{"ranking":[]}`)}}}, rankingTool)
	if !ok || string(data) != `{"ranking":[]}` {
		t.Errorf("the tool call's arguments: %s %v", data, ok)
	}
}

func TestAlignTrajectories(t *testing.T) {
	a := func(name, args string) Act { return NormaliseAct(name, json.RawMessage(args)) }
	base := []Act{a("read_file", `{"path":"a.go"}`), a("edit_file", `{"path":"a.go"}`), a("shell", `{"command":"go  test ./..."}`)}
	lane := []Act{a("read_file", `{"path":"a.go"}`), a("search", `{"pattern":"Foo"}`), a("shell", `{"command":"go test ./..."}`), a("mcp__x__y", `{}`)}
	rows := Align(base, lane)
	var got []string
	for _, r := range rows {
		s := r.Op
		if r.Baseline != nil {
			s += " b:" + r.Baseline.Act + ":" + r.Baseline.Target
		}
		if r.Lane != nil {
			s += " l:" + r.Lane.Act + ":" + r.Lane.Target
		}
		got = append(got, s)
	}
	want := []string{
		"agree b:read:a.go l:read:a.go",
		"diverge l:search:Foo",
		"diverge b:edit:a.go",
		"agree b:run:go test ./... l:run:go test ./...",
		"diverge l:other:mcp__x__y",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rows := Align(nil, nil); len(rows) != 0 {
		t.Errorf("empty alignment: %v", rows)
	}
}
