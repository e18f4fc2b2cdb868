package blobs

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// Verify names each blob whose bytes changed after they were stored.
func TestVerifyNamesTamperedBlobs(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var hashes []string
	for _, content := range []string{"one", "two", "three"} {
		h, _, err := s.Put(bytes.NewReader([]byte(content)), 100)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	if err := s.PutText(hashes[0], []byte("derived")); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Verify(); n != 3 || err != nil {
		t.Fatalf("Verify of an intact store = %d, %v", n, err)
	}
	p, _ := s.path(hashes[1], "")
	if err := os.WriteFile(p, []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := s.Verify()
	if n != 3 || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), hashes[1]) || strings.Contains(err.Error(), hashes[0]) {
		t.Fatalf("Verify after tampering = %d, %v; want ErrCorrupt naming %s alone", n, err, hashes[1])
	}
}
