package tools

import (
	"strings"
	"testing"
)

func TestCapped(t *testing.T) {
	c := newCapped(10)
	c.Write([]byte("12345"))
	c.Write([]byte("678"))
	if got := c.String(); got != "12345678" {
		t.Errorf("under the cap: %q", got)
	}
	for range 100 {
		c.Write([]byte("abcdefghij"))
	}
	got := c.String()
	if !strings.HasPrefix(got, "12345\n[… 998 bytes truncated …]\n") || !strings.HasSuffix(got, "fghij") || c.Truncated() != 998 {
		t.Errorf("over the cap: %q (%d)", got, c.Truncated())
	}
}
