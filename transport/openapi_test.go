package transport

import (
	"context"
	"os"
	"testing"

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
