package jsonlimit

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		name string
		in   string
		lim  Limits
		want error
	}{
		{"empty", "", Default, nil},
		{"scalar", `"x"`, Default, nil},
		{"at the depth", deep(64), Default, nil},
		{"past the depth", deep(65), Default, ErrTooDeep},
		{"ten thousand deep", deep(10000), Default, ErrTooDeep},
		{"objects count", `{"a":{"b":{"c":1}}}`, Limits{Depth: 2}, ErrTooDeep},
		{"brackets in strings do not count", `{"a":"[[[[{{{{\"[["}`, Limits{Depth: 1}, nil},
		{"escaped backslash ends the string", `["\\",[1]]`, Limits{Depth: 1}, ErrTooDeep},
		{"siblings do not add up", `[[1],[2],[3]]`, Limits{Depth: 2}, nil},
		{"too large", `"abcdef"`, Limits{Depth: 1, Bytes: 4}, ErrTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check([]byte(c.in), c.lim)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Check(%.40q) = %v, want %v", c.in, err, c.want)
			}
		})
	}
}

// FuzzCheck holds Check to encoding/json's own count of nesting on every
// valid document.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"]["}]}`, `[[["\"["]]]`, `"\\"`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			_ = Check([]byte(s), Limits{Depth: 3})
			return
		}
		want := tokenDepth(t, s)
		for d := 0; d <= want+1; d++ {
			err := Check([]byte(s), Limits{Depth: d})
			if (err != nil) != (want > d) {
				t.Fatalf("Check(%q, depth %d) = %v, but it nests %d deep", s, d, err, want)
			}
		}
	})
}

func tokenDepth(t *testing.T, s string) int {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	depth, most := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return most
		}
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			most = max(most, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}
