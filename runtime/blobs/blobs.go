// Package blobs is a content-addressed byte store under a directory:
// <root>/sha256/<aa>/<hash> holds the bytes whose SHA-256 is hash, and
// <root>/sha256/<aa>/<hash>.txt text derived from them. Paths are derived
// only from hashes this package validates (64 lowercase hex digits), never
// from names a user supplied. Writes go through a temp file, fsync and
// rename, so a reader sees a whole blob or none; equal bytes are stored once.
package blobs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Errors.
var (
	// ErrTooLarge: the content exceeded the limit given to Stage.
	ErrTooLarge = errors.New("blobs: content exceeds the limit")
	// ErrNotFound: no blob (or text) is stored under the hash.
	ErrNotFound = errors.New("blobs: not found")
	// ErrCorrupt: the stored bytes no longer hash to their name.
	ErrCorrupt = errors.New("blobs: stored content does not match its hash")
	// ErrBadHash: the hash is not 64 lowercase hex digits.
	ErrBadHash = errors.New("blobs: malformed sha256 hash")
)

// Store is a blob directory. It is safe for concurrent use.
type Store struct {
	root string // <root>/sha256
	tmp  string // <root>/tmp, on the same file system for rename
	// gc orders a commit (which refreshes the modification time of a blob
	// it finds stored) against Remove (which removes only blobs older than
	// a bound): a blob a commit has just vouched for is never removed.
	gc sync.RWMutex
}

// Open creates (if need be) and opens the store rooted at dir.
func Open(dir string) (*Store, error) {
	s := &Store{root: filepath.Join(dir, "sha256"), tmp: filepath.Join(dir, "tmp")}
	for _, d := range []string{s.root, s.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("blobs: %w", err)
		}
	}
	return s, nil
}

// RemoveStaged removes the staging files a stopped process left in the
// store (a kill mid-write). Call it only where no other process writes the
// store: the daemon, at start, under its data dir's lock.
func (s *Store) RemoveStaged() error {
	if err := os.RemoveAll(s.tmp); err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	if err := os.MkdirAll(s.tmp, 0o700); err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	return nil
}

// ValidHash reports whether h is a lowercase hex SHA-256.
func ValidHash(h string) bool {
	if len(h) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// path is where the blob hash lives, plus suffix ("" or ".txt").
func (s *Store) path(hash, suffix string) (string, error) {
	if !ValidHash(hash) {
		return "", ErrBadHash
	}
	return filepath.Join(s.root, hash[:2], hash+suffix), nil
}

// Path is the file that holds the blob hash (which need not exist), for
// an operator to read it by hand.
func (s *Store) Path(hash string) (string, error) { return s.path(hash, "") }

// Staged is content written to a temp file and hashed, not yet visible.
// Call Commit or Discard exactly once.
type Staged struct {
	store *Store
	f     *os.File
	// Hash is the lowercase hex SHA-256 of the content; Size its length.
	Hash string
	Size int64
	// Head is up to the first headSize bytes of the content.
	Head []byte
}

// Stage copies r into a temp file, hashing it, keeping its first headSize
// bytes. More than limit bytes fail with ErrTooLarge and leave nothing.
func (s *Store) Stage(r io.Reader, limit int64, headSize int) (*Staged, error) {
	f, err := os.CreateTemp(s.tmp, "stage-*")
	if err != nil {
		return nil, fmt.Errorf("blobs: %w", err)
	}
	st := &Staged{store: s, f: f}
	h := sha256.New()
	head := &headWriter{max: headSize}
	n, err := io.Copy(io.MultiWriter(f, h, head), io.LimitReader(r, limit+1))
	switch {
	case err != nil:
		st.Discard()
		return nil, err // the reader's error (a client gone, a body cap) as is
	case n > limit:
		st.Discard()
		return nil, ErrTooLarge
	}
	if err := f.Sync(); err != nil {
		st.Discard()
		return nil, fmt.Errorf("blobs: %w", err)
	}
	st.Hash, st.Size, st.Head = hex.EncodeToString(h.Sum(nil)), n, head.buf
	return st, nil
}

type headWriter struct {
	buf []byte
	max int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Discard removes the staged content.
func (st *Staged) Discard() {
	if st.f != nil {
		st.f.Close()
		os.Remove(st.f.Name())
		st.f = nil
	}
}

// Commit makes the staged content visible under its hash. If a blob of that
// hash and size is already stored, the staged copy is dropped (dedup).
func (st *Staged) Commit() error {
	if st.f == nil {
		return errors.New("blobs: staged content already committed or discarded")
	}
	defer st.Discard()
	final, err := st.store.path(st.Hash, "")
	if err != nil {
		return err
	}
	st.store.gc.RLock()
	defer st.store.gc.RUnlock()
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() && fi.Size() == st.Size {
		// Stored already: it is young again, so Remove leaves it.
		now := time.Now()
		if err := os.Chtimes(final, now, now); err != nil {
			return fmt.Errorf("blobs: %w", err)
		}
		return nil
	}
	if err := st.f.Close(); err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	name := st.f.Name()
	st.f = nil
	defer os.Remove(name) // a no-op after a successful rename
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	if err := os.Rename(name, final); err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	return syncDir(filepath.Dir(final))
}

// Put stores r's content (at most limit bytes) and returns its hash.
func (s *Store) Put(r io.Reader, limit int64) (hash string, size int64, err error) {
	st, err := s.Stage(r, limit, 0)
	if err != nil {
		return "", 0, err
	}
	if err := st.Commit(); err != nil {
		return "", 0, err
	}
	return st.Hash, st.Size, nil
}

// Open returns the blob's bytes, positioned at the start, after checking
// that they still hash to hash: corrupt content is never served.
func (s *Store) Open(hash string) (*os.File, int64, error) {
	p, err := s.path(hash, "")
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blobs: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err == nil && hex.EncodeToString(h.Sum(nil)) != hash {
		err = ErrCorrupt
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, n, nil
}

// ReadBlob returns the whole blob stored under hash, verified against it
// (Open): large event content is read back this way.
func (s *Store) ReadBlob(hash string) ([]byte, error) {
	f, n, err := s.Open(hash)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("blobs: %w", err)
	}
	return b, nil
}

// Has reports whether a blob is stored under hash.
func (s *Store) Has(hash string) bool {
	p, err := s.path(hash, "")
	if err != nil {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// PutText stores text derived from the blob hash, atomically.
func (s *Store) PutText(hash string, text []byte) error {
	final, err := s.path(hash, ".txt")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.tmp, "text-*")
	if err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err = f.Write(text); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.MkdirAll(filepath.Dir(final), 0o700)
	}
	if err == nil {
		err = os.Rename(f.Name(), final)
	}
	if err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	return syncDir(filepath.Dir(final))
}

// Text returns the text stored for the blob hash.
func (s *Store) Text(hash string) ([]byte, error) {
	p, err := s.path(hash, ".txt")
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	return b, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	return nil
}

// List calls fn for every stored blob (not its text) with its modification
// time: when it was stored, or last committed again.
func (s *Store) List(fn func(hash string, modified time.Time) error) error {
	return filepath.WalkDir(s.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, ".txt") || !ValidHash(name) {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		return fn(name, fi.ModTime())
	})
}

// Remove removes a blob and its text, unless it was stored (or committed
// again) at or after notBefore; removed says whether it went. A commit of
// the same bytes waits for it, and stores them afresh after it.
func (s *Store) Remove(hash string, notBefore time.Time) (removed bool, err error) {
	p, err := s.path(hash, "")
	if err != nil {
		return false, err
	}
	s.gc.Lock()
	defer s.gc.Unlock()
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("blobs: %w", err)
	case !fi.ModTime().Before(notBefore):
		return false, nil
	}
	if err := os.Remove(p + ".txt"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("blobs: %w", err)
	}
	if err := os.Remove(p); err != nil {
		return false, fmt.Errorf("blobs: %w", err)
	}
	return true, syncDir(filepath.Dir(p))
}
