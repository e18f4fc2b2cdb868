// Package journaltest opens real bbolt journals for tests.
package journaltest

import (
	"path/filepath"
	"testing"

	"lathe/journal"
)

// Open opens a fresh journal in t.TempDir and closes it when the test ends.
func Open(t testing.TB) *journal.Journal {
	t.Helper()
	return OpenAt(t, filepath.Join(t.TempDir(), "journal.db"))
}

// OpenAt opens the journal at path and closes it when the test ends.
func OpenAt(t testing.TB, path string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(path, journal.Options{})
	if err != nil {
		t.Fatalf("open journal: %v", err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}
