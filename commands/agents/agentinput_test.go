package agents

import (
	"reflect"
	"testing"

	"lathe/runtime/agent"
)

// TestAgentInputReachesTheRuntime checks that the Agent commands' input
// types carry every field to the runtime's, and that a nil field stays nil.
func TestAgentInputReachesTheRuntime(t *testing.T) {
	name, model, prompt, system := "N", "m2", "p", "s"
	deps := []string{"helper"}
	for _, tc := range []struct {
		name      string
		got, want any
		every     bool // the case sets every field of the runtime's type
	}{
		{"execute, every field",
			ExecuteRequest{Input: "hi", SystemOverride: &system, ModelOverride: &model, Stateless: true}.runtime(),
			agent.ExecuteRequest{Input: "hi", SystemOverride: &system, ModelOverride: &model, Stateless: true}, true},
		{"execute, none", ExecuteRequest{}.runtime(), agent.ExecuteRequest{}, false},
		{"patch, every field",
			AgentPatch{Name: &name, Model: &model, Prompt: &prompt, Dependencies: &deps, Budget: &AgentBudget{MaxOutputTokens: 5, MaxUSD: 0.5}}.runtime(),
			agent.AgentPatch{Name: &name, Model: &model, Prompt: &prompt, Dependencies: &deps, Budget: &agent.Budget{MaxOutputTokens: 5, MaxUSD: 0.5}}, true},
		{"patch, none", AgentPatch{}.runtime(), agent.AgentPatch{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("runtime input %+v, want %+v", tc.got, tc.want)
			}
			// A runtime field the test leaves unset is one the conversion may miss.
			if tc.every && hasZeroField(reflect.ValueOf(tc.want)) {
				t.Errorf("the test does not set every field of %T", tc.want)
			}
		})
	}
}

// hasZeroField reports whether a field of the struct v holds its zero value.
func hasZeroField(v reflect.Value) bool {
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			return true
		}
	}
	return false
}
