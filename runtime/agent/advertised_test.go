package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
)

// dispatched is a Toolbox that advertises "submit" and records every call
// it is asked to run, advertised or not, as a Toolbox that trusts its
// caller would run it.
type dispatched struct{ names []string }

func (*dispatched) Tools() []llm.Tool {
	return []llm.Tool{{Name: "submit", Schema: json.RawMessage(`{"type":"object"}`)}}
}

func (d *dispatched) Call(_ context.Context, name string, _ json.RawMessage) tools.Result {
	d.names = append(d.names, name)
	return tools.Result{Output: "ran " + name}
}

// The tool loop dispatches only a tool it advertised in that inference: a
// model that names any other (another Agent's MCP tool, a sandbox tool
// where there is none) gets an "unknown tool" error result, recorded as
// any call's, and the Toolbox never sees the call (issue 32, finding 2).
func TestUnadvertisedToolsAreNotDispatched(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools bool // a Toolbox is given
		want  []string
	}{
		{"with a toolbox", true, []string{"submit"}},
		{"with none", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &scripted{steps: [][]llm.Event{
				call("c1", "mcp__other__echo", `{"text":"secret"}`),
				call("c2", "shell", `{"command":"true"}`),
				call("c3", "submit", `{}`),
				answer(1, llm.StopEnd),
			}}
			box := &dispatched{}
			req := agent.TurnRequest{AgentID: "a", Input: "x"}
			if tc.tools {
				req.Tools = box
			}
			obs := &finished{}
			res := budgetRegistry(p, catalog.Budget{}).RunTurn(context.Background(), req, obs)
			if res.Outcome != agent.OutcomeDone {
				t.Fatalf("outcome %s (%v)", res.Outcome, res.Err)
			}
			if !slices.Equal(box.names, tc.want) {
				t.Errorf("the toolbox ran %v, want %v", box.names, tc.want)
			}
			var started []string
			for _, c := range obs.calls {
				started = append(started, c.Name)
			}
			if !slices.Equal(started, []string{"mcp__other__echo", "shell", "submit"}) {
				t.Errorf("recorded calls %v: every call the model asked for is recorded", started)
			}
			want := []tools.Result{{Output: "unknown tool: mcp__other__echo", IsError: true}, {Output: "unknown tool: shell", IsError: true}, {Output: "ran submit"}}
			if !tc.tools {
				want[2] = tools.Result{Output: "unknown tool: submit", IsError: true}
			}
			if !slices.Equal(obs.results, want) {
				t.Errorf("results %+v, want %+v", obs.results, want)
			}
		})
	}
}
