package transport

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the README's API table from the route table")

// The README's API table sits between these markers.
const (
	apiTableBegin = "<!-- api-table: generated from transport/routes.go; go test ./transport -run TestREADMEAPITable -update-readme -->\n"
	apiTableEnd   = "<!-- /api-table -->\n"
)

// TestREADMEAPITable fails when the README's API table differs from the
// route table; -update-readme rewrites it.
func TestREADMEAPITable(t *testing.T) {
	const path = "../README.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	begin, end := strings.Index(readme, apiTableBegin), strings.Index(readme, apiTableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("README.md has no API table between %q and %q", apiTableBegin, apiTableEnd)
	}
	got, want := readme[begin+len(apiTableBegin):end], APITable()
	if got == want {
		return
	}
	if *updateREADME {
		if err := os.WriteFile(path, []byte(readme[:begin+len(apiTableBegin)]+want+readme[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's API table differs from the route table; run go test ./transport -run TestREADMEAPITable -update-readme")
}
