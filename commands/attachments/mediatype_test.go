package attachments

import "testing"

func TestSniffMediaType(t *testing.T) {
	for _, tc := range []struct {
		name string
		head string
		want string
	}{
		{"calc.py", "def add(a, b):\n    return a + b\n", "text/x-python; charset=utf-8"},
		{"CALC.PY", "print(1)\n", "text/x-python; charset=utf-8"},
		{"notes.md", "# notes\n", "text/markdown; charset=utf-8"},
		{"data.json", `{"a":1}`, "application/json"},
		{"image.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image/png"},
		{"noext", "plain words\n", "text/plain; charset=utf-8"},
		{"noext", "%PDF-1.7\n", "application/pdf"},
		{"blob", "\x00\x01\x02\xff", "application/octet-stream"},
		{"empty", "", "text/plain; charset=utf-8"},
	} {
		if got := sniffMediaType(tc.name, []byte(tc.head)); got != tc.want {
			t.Errorf("sniffMediaType(%q, %q) = %q, want %q", tc.name, tc.head, got, tc.want)
		}
	}
}
