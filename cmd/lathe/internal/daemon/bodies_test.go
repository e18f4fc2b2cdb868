package daemon

// JSON request bodies at the edge: every route that takes one decodes it
// with transport's one strict decoder, so every route refuses another
// Content-Type with 415, and treats an empty body and null alike, by its
// rule. A route whose body is required refuses both with 400; a route whose
// every field is optional takes both as {} (git discard, commit and the
// Check run: the rows for those are in git_test.go, which has a Ready
// sandbox). An empty body means "all" nowhere: stage and unstage need
// {"paths": []} for that, as the spec's {paths} says.

import (
	"net/http"
	"testing"
)

// requiredBodyRows are the rows that send a route whose body is required no
// body and null: both 400, nothing appended.
func requiredBodyRows(name, method, path string) []route {
	return []route{
		{name: name + " with no body", method: method, path: path, status: 400, err: "request body is empty; a JSON object is required"},
		{name: name + " with null", method: method, path: path, body: "null", status: 400, err: "request body is null; a JSON object is required"},
		{name: name + " with null and spaces", method: method, path: path, body: " null\n", status: 400, err: "request body is null"},
	}
}

// optionalBodyRows are the rows that send a route whose body is optional no
// body and null: each answers as {} would, with status and err.
func optionalBodyRows(name, method, path string, status int, err string, events int) []route {
	var rows []route
	for label, body := range map[string]string{"no body": "", "null": "null", "{}": "{}"} {
		rows = append(rows, route{name: name + " with " + label, method: method, path: path, body: body, status: status, err: err, events: events})
	}
	return rows
}

// controlBodyRoutes are the JSON routes that decode their body before
// anything needs a Ready sandbox.
var controlBodyRoutes = []struct{ name, method, path string }{
	{"register a workspace", post, "/api/workspaces"},
	{"rename a workspace", patch, "/api/workspaces/{w}"},
	{"create a session", post, "/api/workspaces/{w}/sessions"},
	{"create a session at a path", post, "/api/sessions"},
	{"rename a session", patch, "/api/sessions/{s}"},
	{"change the environment", put, "/api/sessions/{s}/environment"},
	{"confirm a runtime cleanup", post, "/api/sessions/{s}/environment/confirm-runtime-cleanup"},
	{"start a task", post, "/api/sessions/{s}/tasks"},
	{"change an attachment's scope", patch, "/api/sessions/{s}/attachments/01J0000000000000000000000A"},
	{"rewind", post, "/api/sessions/{s}/rewind"},
	{"execute in a session", post, "/api/sessions/{s}/execute"},
	{"set the check", put, "/api/sessions/{s}/check"},
	{"execute an agent", post, "/api/agents/coder/execute"},
	{"patch an agent", patch, "/api/agents/coder"},
}

func TestEmptyAndNullBodies(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	v := vars{}
	v["w"] = str(t, call(t, srv, post, "/api/workspaces", `{"path":"`+realDir(t, t.TempDir())+`"}`).body, "id")
	v["s"] = str(t, call(t, srv, post, v.expand("/api/workspaces/{w}/sessions"), `{"name":"bodies",`+agentMode+`}`).body, "id")
	var rows []route
	for _, r := range controlBodyRoutes {
		rows = append(rows, requiredBodyRows(r.name, r.method, r.path)...)
	}
	runRoutes(t, d, srv, v, rows)
}

// TestJSONRoutesNeedJSONContentType: a JSON body under another media type
// is refused with 415 on every route, before it is looked at.
func TestJSONRoutesNeedJSONContentType(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	v := vars{}
	v["w"] = str(t, call(t, srv, post, "/api/workspaces", `{"path":"`+realDir(t, t.TempDir())+`"}`).body, "id")
	v["s"] = str(t, call(t, srv, post, v.expand("/api/workspaces/{w}/sessions"), `{"name":"bodies",`+agentMode+`}`).body, "id")
	before := d.Journal().Last()
	for _, r := range controlBodyRoutes {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
			t.Run(r.name+" as "+ct, func(t *testing.T) {
				got := call(t, srv, r.method, v.expand(r.path), `{"name":"x"}`, "Content-Type", ct)
				if got.status != http.StatusUnsupportedMediaType {
					t.Fatalf("status %d, want 415: %s", got.status, got.body)
				}
				assertErrorBody(t, got, "application/json")
			})
		}
	}
	if d.Journal().Last() != before {
		t.Error("a refused body appended events")
	}
}
