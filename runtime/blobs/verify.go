package blobs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
)

// Verify hashes every stored blob and returns how many it checked, and an
// error of class ErrCorrupt that names each blob whose bytes no longer hash
// to its name (`lathe journal verify`). Derived text is not checked.
func (s *Store) Verify() (int, error) {
	var checked int
	var corrupt []string
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !ValidHash(d.Name()) {
			return err
		}
		checked++
		f, _, err := s.Open(d.Name())
		switch {
		case errors.Is(err, ErrCorrupt):
			corrupt = append(corrupt, d.Name())
		case err != nil:
			return err
		default:
			f.Close()
		}
		return nil
	})
	if err != nil {
		return checked, fmt.Errorf("blobs: verify: %w", err)
	}
	if len(corrupt) > 0 {
		sort.Strings(corrupt)
		return checked, fmt.Errorf("%w: %d of %d blobs: %v", ErrCorrupt, len(corrupt), checked, corrupt)
	}
	return checked, nil
}
