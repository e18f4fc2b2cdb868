package daemon

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"lathe/runtime/agent"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/mcp"
	"lathe/runtime/project"
	"lathe/runtime/usage"
)

// TestViews checks each conversion the adapters of views.go make: a
// runtime value with every field set, and its zero value, must give a view
// whose JSON is byte for byte the runtime value's own (what the routes
// answered before transport had its own types). A runtime field that is
// added and not filled here fails the fill check; filled and not carried
// into the view, the JSON check.
func TestViews(t *testing.T) {
	yes, no := true, false
	latency := int64(12)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	tokens := usage.Tokens{InputTokens: 1, OutputTokens: 2, ReasoningTokens: 3, TokenUsageKnown: true}.View()
	counts := agent.Counts{Requests: 4, View: tokens}
	av := catalog.AgentView{ID: "coder", Name: "Coder", Provider: "local", ProviderKind: catalog.KindOllama, Model: "m1",
		Prompt: "p", Dependencies: []string{"helper"}, Budget: catalog.Budget{MaxOutputTokens: 5, MaxUSD: 0.5},
		Price: &catalog.Price{Input: 1.5, Output: 2.5}, Kind: "acp",
		ACP:      &catalog.ACP{Preset: "claude-code", Package: "x@1.0.0", Command: "x", Args: []string{"a"}, Protocol: "anthropic", Env: map[string]string{"NOT": "shown"}},
		Reported: &catalog.Reported{Name: "claude-agent-acp", Version: "0.23.1"}}
	health := catalog.Health{OK: true, CheckedAt: at, Reasons: []string{"r"}, Warnings: []string{"w"},
		Providers: []catalog.ProviderHealth{{ProviderView: catalog.ProviderView{Name: "local", Kind: catalog.KindOllama,
			BaseURL: "http://127.0.0.1:11434", APIKeyEnv: "KEY", APIKeySet: true}, Probed: true, Reachable: &yes,
			Models: []string{"m1"}, LatencyMS: &latency, Error: "e"}},
		Agents: []catalog.AgentHealth{{ID: "coder", Provider: "local", ProviderKind: catalog.KindOllama, Model: "m1", ModelMissing: &no}}}
	models := catalog.ModelList{AgentID: "coder", Provider: "local", ProviderKind: catalog.KindOllama, CurrentModel: "m1",
		Source: "live", Models: []catalog.Model{{Name: "m1", Current: true}}, CurrentModelMissing: &no}
	status := agent.Status{AgentID: "coder", State: "busy", Spawned: true, SpawnedAt: at, Restarts: 1, LastError: "e",
		Messages: 2, Counts: counts}
	report := agent.TokenReport{Agents: []agent.AgentCounts{{AgentID: "coder", Counts: counts}}, Total: counts}
	result := agent.Result{Output: "o", Model: "m1", Stateless: true, View: tokens}
	server := mcp.ServerView{Name: "git", Transport: mcp.Stdio, ToolCount: 3, Status: mcp.StatusFailed, Error: "e",
		Approval: mcp.ApprovalNever, Agents: []string{"coder"}}
	tool := mcp.Tool{Name: "mcp__git__log", Server: "git", Tool: "log", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}
	entry := mcp.Entry{Slug: "git", Name: "Git", Description: "d", Transport: mcp.Stdio, Command: "uvx", Args: []string{"mcp-server-git"},
		Env: map[string]string{"K": "v"}, URL: "http://127.0.0.1:1/mcp",
		Values: []mcp.Value{{Key: "repository", Description: "d", Required: true, Secret: true, Path: mcp.PathDirectory}}}

	listing := project.Listing{Path: "/srv", Parent: "/", Entries: []project.Entry{{Name: "app", Path: "/srv/app", IsGitRepo: true}}}
	probe := project.Project{Path: "/srv/app", IsGitRepo: true,
		Devcontainer: &project.Devcontainer{Path: "/srv/app/.devcontainer/devcontainer.json", Image: "golang:1.26",
			PostCreateCommand: "make", Warnings: []string{"w"}},
		Guidance:      []project.Guidance{{Path: "/srv/app/LATHE.md", Content: "c", Truncated: true}},
		DetectedSetup: []project.SetupCandidate{{Command: "npm ci", Source: "lockfile", File: "package-lock.json"}}}

	for _, tc := range []struct {
		name    string
		runtime any
		view    func(any) any
	}{
		{"AgentView (catalogAdapter, actorsAdapter, agentsAdapter.Patch)", av, func(v any) any { return agentView(v.(catalog.AgentView)) }},
		{"Health (catalogAdapter.Health)", health, func(v any) any { return healthView(v.(catalog.Health)) }},
		{"ModelList (catalogAdapter.ModelsFor)", models, func(v any) any { return modelListView(v.(catalog.ModelList)) }},
		{"Status (actorsAdapter.Status, agentsAdapter.Restart)", status, func(v any) any { return statusView(v.(agent.Status)) }},
		{"TokenReport (actorsAdapter.TokenReport)", report, func(v any) any { return tokenReportView(v.(agent.TokenReport)) }},
		{"Result (agentsAdapter.Execute)", result, func(v any) any { return executeView(v.(agent.Result)) }},
		{"ServerView (mcpAdapter, registryAdapter.Servers)", server, func(v any) any { return mcpServerView(v.(mcp.ServerView)) }},
		{"Tool (registryAdapter.Tools)", tool, func(v any) any { return mcpToolView(v.(mcp.Tool)) }},
		{"Entry (registryAdapter.Catalog)", entry, func(v any) any { return mcpEntryView(v.(mcp.Entry)) }},
		{"Listing (foldersAdapter.ListDirs)", listing, func(v any) any { return dirListingView(v.(project.Listing)) }},
		{"Project (foldersAdapter.Probe)", probe, func(v any) any { return projectView(v.(project.Project)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := reflect.ValueOf(tc.runtime)
			filled(t, rv.Type().String(), rv)
			sameJSON(t, tc.runtime, tc.view(tc.runtime))
			zero := reflect.Zero(rv.Type()).Interface() // nil slices stay null, nil pointers null
			sameJSON(t, zero, tc.view(zero))
		})
	}
	t.Run("the bundled MCP catalog", func(t *testing.T) { sameJSON(t, mcp.Catalog(), registryAdapter{}.Catalog()) })
}

// sameJSON fails unless view encodes to exactly the bytes runtime does.
func sameJSON(t *testing.T, runtime, view any) {
	t.Helper()
	want, err := json.Marshal(runtime)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(view)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("view JSON\n%s\nwant the runtime's\n%s", got, want)
	}
}

// filled fails for every exported field of v (recursively: structs,
// pointers, slice and map elements) that holds its zero value, so a test
// value sets everything a conversion must carry.
func filled(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if v.IsZero() {
		t.Errorf("%s is not set", path)
		return
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer: // set when not nil; a struct's fields are checked
		if v.Elem().Kind() == reflect.Struct {
			filled(t, path, v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				filled(t, path+"."+f.Name, v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("%s is empty", path)
		}
		for i := range v.Len() {
			filled(t, path+"[]", v.Index(i))
		}
	case reflect.Map:
		if v.Len() == 0 {
			t.Errorf("%s is empty", path)
		}
		for _, k := range v.MapKeys() {
			filled(t, path+"["+k.String()+"]", v.MapIndex(k))
		}
	}
}
