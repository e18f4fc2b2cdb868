package transport

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIDocumentLoads generates the document and loads and validates
// it with kin-openapi as OpenAPI 3.1.
func TestOpenAPIDocumentLoads(t *testing.T) {
	data, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if p := os.Getenv("LATHE_OPENAPI_OUT"); p != "" {
		_ = os.WriteFile(p, data, 0o644)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, item := range doc.Paths.Map() {
		n += len(item.Operations())
	}
	if want := len(Routes()); n != want {
		t.Errorf("%d operations, want one per route: %d", n, want)
	}
}

// redoclyAccepted are the recommended rules' warnings the document keeps,
// by rule and a pattern of the whole JSON pointer: the project names no license; the
// health probes take no input, so they answer no 4xx; OpenAPI has no place
// for a WebSocket's messages, so the /ws operation names their unions in
// an extension (x-lathe-ws), which the rule does not read; and the
// reflector keeps the definition of an embedded struct it flattens.
var redoclyAccepted = []struct{ rule, pointer string }{
	{"info-license", `#/info`},
	{"operation-4xx-response", `#/paths/~1health(~1live|~1ready)?/(get|head)/responses`},
	{"no-unused-components", `#/components/schemas/ws\.(command|frame)`},
	{"no-unused-components", `#/components/schemas/ProjectionsChatAttachment`},
}

// TestOpenAPIRedoclyLint lints the document with @redocly/cli on its
// recommended rules (installed by make test beside the browser tests): no
// error, and no warning but the accepted ones.
func TestOpenAPIRedoclyLint(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("..", "cmd", "lathe", "internal", "daemon", "testdata", "browser", "node_modules", "@redocly", "cli", "bin", "cli.js"))
	if err != nil {
		t.Fatal(err)
	}
	node, lookErr := exec.LookPath("node")
	if _, err := os.Stat(bin); err != nil || lookErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("@redocly/cli is not installed (run make browser-up): %v %v", err, lookErr)
		}
		t.Skipf("@redocly/cli is not installed (run make browser-up): %v %v", err, lookErr)
	}
	data, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(doc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, bin, "lint", "--extends=recommended", "--format=json", doc)
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, _ := cmd.Output() // exits 1 on any error; the report says which
	var report struct {
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("redocly lint printed no JSON report: %v\n%s", err, out)
	}
	for _, p := range report.Problems {
		pointer := ""
		if len(p.Location) > 0 {
			pointer = p.Location[0].Pointer
		}
		accepted := p.Severity == "warn" && slices.ContainsFunc(redoclyAccepted, func(a struct{ rule, pointer string }) bool {
			return a.rule == p.RuleID && regexp.MustCompile(`^(?:`+a.pointer+`)$`).MatchString(pointer)
		})
		if !accepted {
			t.Errorf("redocly %s %s at %s: %s", p.Severity, p.RuleID, pointer, p.Message)
		}
	}
}
