package blobs

import (
	"strings"
	"testing"
	"time"
)

// Remove removes only what was stored before its bound, text and all; a
// commit of stored bytes makes them young again, so a removal that began
// before it leaves them.
func TestRemoveKeepsWhatWasCommittedSince(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := s.Put(strings.NewReader("old bytes"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutText(h, []byte("text")); err != nil {
		t.Fatal(err)
	}
	var listed []string
	if err := s.List(func(hash string, _ time.Time) error { listed = append(listed, hash); return nil }); err != nil || len(listed) != 1 || listed[0] != h {
		t.Fatalf("list: %v %v", listed, err)
	}
	past := time.Now().Add(-time.Hour)
	if ok, err := s.Remove(h, past); ok || err != nil || !s.Has(h) {
		t.Fatalf("a blob stored after the bound was removed: %v %v", ok, err)
	}
	cutoff := time.Now().Add(time.Second) // a collection that began now, grace 0 (clock granularity)
	// Committed again (a deduplicated upload) before the removal runs:
	// it is newer than a bound taken before the commit.
	bound := time.Now()
	if _, _, err := s.Put(strings.NewReader("old bytes"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Remove(h, bound); ok || !s.Has(h) {
		t.Fatalf("a blob committed again after the collection began was removed")
	}
	if ok, err := s.Remove(h, cutoff); !ok || err != nil || s.Has(h) {
		t.Fatalf("remove: %v %v", ok, err)
	}
	if _, err := s.Text(h); err == nil {
		t.Fatalf("the text outlived its blob")
	}
	if ok, err := s.Remove(h, cutoff); ok || err != nil {
		t.Fatalf("removing a removed blob: %v %v", ok, err)
	}
	if _, err := s.Remove("../x", cutoff); err != ErrBadHash {
		t.Fatalf("a bad hash: %v", err)
	}
}
