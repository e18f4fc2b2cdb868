package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
)

// A Session's trail names who did what, by the credential's configured
// name, in seq order; the Session as of any seq is its past, rebuilt from
// the journal; a force-deleted Session's trail stays readable; the export
// is the whole trail as NDJSON.
func TestSessionAuditAndTimeTravel(t *testing.T) {
	const key = "laptop-key-0123456789"
	_, srv := newTestDaemon(t, func(c *config.Config) {
		c.Server.APIKeys = []config.Credential{{Key: key, Name: "laptop key"}}
	})
	do := func(method, path, body string, status int) map[string]any {
		t.Helper()
		r := call(t, srv, method, path, body, "X-Api-Key", key)
		if r.status != status {
			t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
		}
		var out map[string]any
		_ = json.Unmarshal(r.body, &out)
		return out
	}
	dir := realDir(t, t.TempDir())
	ws := do(post, "/api/workspaces", `{"path":"`+dir+`"}`, 201)["id"].(string)
	s := do(post, "/api/workspaces/"+ws+"/sessions", `{"name":"first",`+agentMode+`,"setup_command":"make deps"}`, 201)["id"].(string)
	do(patch, "/api/sessions/"+s, `{"name":"second"}`, 200)
	do(patch, "/api/sessions/"+s, `{"name":"third"}`, 200)

	var page struct {
		Entries []projections.AuditEntry `json:"entries"`
		More    bool                     `json:"more"`
	}
	r := call(t, srv, get, "/api/sessions/"+s+"/audit", "", "X-Api-Key", key)
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 {
		t.Fatalf("audit: %d %s", r.status, r.body)
	}
	var renames []projections.AuditEntry
	for _, e := range page.Entries {
		if e.Type == "session-renamed" {
			renames = append(renames, e)
		}
	}
	if len(page.Entries) < 3 || page.Entries[0].Type != "session-created" || len(renames) != 2 {
		t.Fatalf("trail: %+v", page.Entries)
	}
	if want := `operator (laptop key) renamed the Session to "second"`; renames[0].Summary != want || renames[0].Actor.Kind != "operator" {
		t.Errorf("summary %q (actor %+v), want %q", renames[0].Summary, renames[0].Actor, want)
	}

	// As of the first rename, the Session had its second name.
	at := do(get, fmt.Sprintf("/api/sessions/%s/at/%d", s, renames[0].Seq), "", 200)
	if name := at["session"].(map[string]any)["name"]; name != "second" {
		t.Errorf("at seq %d the name is %v, want second", renames[0].Seq, name)
	}
	created := page.Entries[0].Seq
	if at := do(get, fmt.Sprintf("/api/sessions/%s/at/%d", s, created), "", 200); at["session"].(map[string]any)["name"] != "first" {
		t.Errorf("at creation: %v", at["session"])
	}
	if e := do(get, fmt.Sprintf("/api/sessions/%s/at/%d", s, created-1), "", 404); !strings.Contains(e["error"].(string), fmt.Sprintf("spans seq %d to", created)) {
		t.Errorf("before creation: %v", e)
	}
	if e := do(get, fmt.Sprintf("/api/sessions/%s/at/%d", s, 1<<40), "", 404); !strings.Contains(e["error"].(string), "beyond the journal's head") {
		t.Errorf("beyond the head: %v", e)
	}

	do("DELETE", "/api/sessions/"+s+"?force=true", "", 200)
	r = call(t, srv, get, "/api/sessions/"+s+"/audit?format=ndjson", "", "X-Api-Key", key)
	lines := bytes.Split(bytes.TrimSpace(r.body), []byte("\n"))
	var last projections.AuditEntry
	if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil || r.status != 200 || last.Type != "session-deleted" {
		t.Fatalf("export after deletion: %d, last %+v, %v", r.status, last, err)
	}
	if len(lines) != len(page.Entries)+1 {
		t.Errorf("export has %d entries, the trail had %d before the deletion", len(lines), len(page.Entries))
	}
	do(get, "/api/sessions/"+unknownID+"/audit", "", 404)
	do(get, "/api/sessions/"+ws+"/audit", "", 404)
}
