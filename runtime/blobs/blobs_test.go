package blobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestPutIsContentAddressedAndDeduplicated(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("hello, blobs")
	h1, n, err := s.Put(bytes.NewReader(data), 100)
	if err != nil || h1 != sum(data) || n != int64(len(data)) {
		t.Fatalf("Put = %s, %d, %v", h1, n, err)
	}
	h2, _, err := s.Put(bytes.NewReader(data), 100)
	if err != nil || h2 != h1 {
		t.Fatalf("second Put = %s, %v", h2, err)
	}
	got := files(t, dir)
	want := filepath.Join(dir, "sha256", h1[:2], h1)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("files = %v, want only %s (no temp files left)", got, want)
	}
	f, size, err := s.Open(h1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	if !bytes.Equal(b, data) || size != int64(len(data)) {
		t.Fatalf("read %q (%d)", b, size)
	}
}

func TestStageOverLimitLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	_, err := s.Stage(strings.NewReader(strings.Repeat("x", 11)), 10, 4)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	st, err := s.Stage(strings.NewReader(strings.Repeat("x", 10)), 10, 4)
	if err != nil || string(st.Head) != "xxxx" || st.Size != 10 {
		t.Fatalf("exact limit: %v %q %d", err, st.Head, st.Size)
	}
	st.Discard()
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("files left: %v", got)
	}
}

func TestStagedIsInvisibleUntilCommit(t *testing.T) {
	s, _ := Open(t.TempDir())
	st, err := s.Stage(strings.NewReader("abc"), 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Has(st.Hash) {
		t.Fatal("staged content visible before Commit")
	}
	if err := st.Commit(); err != nil {
		t.Fatal(err)
	}
	if !s.Has(st.Hash) {
		t.Fatal("committed content missing")
	}
	if err := st.Commit(); err == nil {
		t.Fatal("a second Commit succeeded")
	}
}

func TestOpenVerifiesTheHash(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	h, _, err := s.Put(strings.NewReader("original"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sha256", h[:2], h), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(h); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of tampered blob: %v, want ErrCorrupt", err)
	}
	if _, _, err := s.Open(sum([]byte("absent"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of absent blob: %v, want ErrNotFound", err)
	}
}

func TestPathsComeOnlyFromValidHashes(t *testing.T) {
	s, _ := Open(t.TempDir())
	for _, bad := range []string{"", "../../etc/passwd", "..", strings.Repeat("A", 64), strings.Repeat("a", 63), strings.Repeat("a", 62) + "/x", strings.Repeat("g", 64)} {
		if _, _, err := s.Open(bad); !errors.Is(err, ErrBadHash) {
			t.Errorf("Open(%q) = %v, want ErrBadHash", bad, err)
		}
		if _, err := s.Text(bad); !errors.Is(err, ErrBadHash) {
			t.Errorf("Text(%q) = %v, want ErrBadHash", bad, err)
		}
		if err := s.PutText(bad, []byte("x")); !errors.Is(err, ErrBadHash) {
			t.Errorf("PutText(%q) = %v, want ErrBadHash", bad, err)
		}
		if s.Has(bad) {
			t.Errorf("Has(%q) = true", bad)
		}
	}
}

func TestTextSitsNextToTheBytes(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	h, _, _ := s.Put(strings.NewReader("doc"), 100)
	if _, err := s.Text(h); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Text before PutText: %v", err)
	}
	if err := s.PutText(h, []byte("doc text")); err != nil {
		t.Fatal(err)
	}
	b, err := s.Text(h)
	if err != nil || string(b) != "doc text" {
		t.Fatalf("Text = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sha256", h[:2], h+".txt")); err != nil {
		t.Fatal(err)
	}
}
