package daemon

// The workbench's first load with a thousand Sessions in five Workspaces
// (issue 26's performance figures), in Debian's Chromium on a daemon
// without sandboxes (testdata/browser/firstload.mjs): first contentful
// paint, the first render of the rail's Sessions, and the bytes of the
// first load on the wire, beside what they would be uncompressed.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
)

func TestFirstLoadInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	_, srv := newTestDaemon(t, func(c *config.Config) {
		c.Agents = []config.Agent{{ID: "coder", Name: "Coder", Provider: "fake", Model: "m1"}}
		c.Providers = map[string]config.Provider{"fake": {Kind: config.KindOpenAI, BaseURL: "http://127.0.0.1:9/v1"}}
	})
	const workspaces, perWorkspace = 5, 200
	var wg sync.WaitGroup
	errs := make(chan error, workspaces)
	for w := range workspaces {
		dir := realDir(t, t.TempDir())
		resp, err := http.Post(srv.URL+"/api/workspaces", "application/json", strings.NewReader(fmt.Sprintf(`{"path":%s,"name":"repo-%d"}`, quote(dir), w)))
		if err != nil {
			t.Fatal(err)
		}
		ws := decodeID(t, resp)
		wg.Add(1)
		go func() { // the five Workspaces' Sessions are made side by side
			defer wg.Done()
			for i := range perWorkspace {
				body := fmt.Sprintf(`{"name":"fix the flaky test number %d of repo %d","mode":{"kind":"single_agent","agent_id":"coder"}}`, i, w)
				resp, err := http.Post(srv.URL+"/api/workspaces/"+ws+"/sessions", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errs <- fmt.Errorf("create a Session: %s", resp.Status)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	runBrowser(t, node, chromium, "firstload.mjs", 3*time.Minute, "LATHE_URL="+srv.URL, fmt.Sprintf("LATHE_SESSIONS=%d", workspaces*perWorkspace))
}

func decodeID(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var v struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.ID == "" {
		t.Fatalf("decode an ID: %v (%s)", err, resp.Status)
	}
	return v.ID
}
