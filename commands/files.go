package commands

// The Session file commands: a one-level tree listing, a file read and an
// atomic overwrite, all confined to the Session root. A write is journaled
// (session-file-written: path, size, hash and the client's expected hash),
// so the Session's journal audits the operator's own edits too.
//
// The Session root is the Session's working_dir. The local sandbox
// bind-mounts it read-write at the same path, so the host's view of it is
// the sandbox's view; the commands still answer only while the environment
// is Ready, and there is no host fallback otherwise.
//
// Confinement happens twice. CleanPath (runtime/confine's rule, shared with
// git and the Agent's tools) rejects malformed paths (absolute, NUL, "..",
// too long) before anything touches the filesystem. Every access then goes
// through an os.Root opened on the Session root, whose openat-based
// traversal refuses, after resolution, any symlink that leads outside it
// (ErrForbidden). os.Root decides that lexically from the link text, so the
// answer never depends on whether the outside target exists. An absolute
// symlink target is refused even when it names a path inside the root.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"lathe/journal/events"
	"lathe/runtime/confine"
)

// File limits.
const (
	// MaxFileBytes bounds a file read (the spec's 512 KiB) and, equally, the
	// content of a write.
	MaxFileBytes = 512 << 10
	// maxTreeEntries bounds one listing; a larger directory is cut off
	// (in directory order) and flagged truncated.
	maxTreeEntries = 10_000
	// maxSymlinkHops bounds resolving the final symlinks of a write target.
	maxSymlinkHops = 40
)

// Entry types of a tree listing.
const (
	entryFile    = "file"
	entryDir     = "dir"
	entrySymlink = "symlink"
	entryOther   = "other" // a FIFO, socket or device: listed, never read
)

// TreeEntry is one directory entry. Type comes from lstat: a symlink is
// "symlink" whatever it points to, and its size is that of the link.
type TreeEntry struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"` // relative to the Session root, slash-separated
	Type     string    `json:"type"`
	Size     int64     `json:"size"`
	Mode     string    `json:"mode"` // permission bits in octal, "0644"
	Modified time.Time `json:"modified"`
}

// TreeListing is the answer of GET /tree.
type TreeListing struct {
	Path      string      `json:"path"` // "." for the root
	Entries   []TreeEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// FileContent is the answer of GET /file. Binary files (not valid UTF-8,
// or holding a NUL byte) come without content.
type FileContent struct {
	Path     string    `json:"path"`
	Content  *string   `json:"content,omitempty"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	SHA256   string    `json:"sha256"`
	Binary   bool      `json:"binary"`
}

// FileWrite is one overwrite: the content and, optionally, the sha256 of
// the content the client last read, which must still be the file's.
type FileWrite struct {
	Path           string
	Content        *string
	ExpectedSHA256 *string
}

// FileWritten is the answer of POST /file.
type FileWritten struct {
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	SHA256   string    `json:"sha256"`
}

// root opens the root of a Session whose environment is Ready: ErrNotFound
// for a missing Session, ErrConflict for any other state. Under the remote
// provider it is the clone inside the sandbox, reached through its file
// helper, and ctx bounds each request; nothing touches the host path.
func (s *sandboxes) root(ctx context.Context, id string) (sessionFS, error) {
	sb, ss, err := s.sandbox(id)
	if err != nil {
		return nil, err
	}
	if s.remote().on() {
		return remoteFS{ctx: ctx, c: s.envs.files.get(id, sb, ss.WorkingDir)}, nil
	}
	root, err := os.OpenRoot(ss.WorkingDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the working directory of session %q is gone: %v", ErrConflict, id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open the root of session %q: %w", id, err)
	}
	return localFS{root}, nil
}

// isEscape reports whether err says a path resolved outside its os.Root.
func isEscape(err error) bool {
	if confine.Escapes(err) {
		return true
	}
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// outsideRoot is the refusal of a path that resolves outside the root. It
// names neither the link's target nor whether that exists.
func outsideRoot(rel string) error {
	return fmt.Errorf("%w: path %q resolves outside the session root", ErrForbidden, rel)
}

// pathError classes a filesystem error on the client path rel. Messages
// name only rel, never the host path nor a symlink's target.
func (s *Files) pathError(rel string, err error) error {
	switch {
	case isEscape(err):
		return outsideRoot(rel)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %q does not exist in the session root", ErrNotFound, rel)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: a parent of %q is not a directory", ErrInvalid, rel)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%w: %q has too many levels of symbolic links", ErrInvalid, rel)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%w: %q is too long a path", ErrInvalid, rel)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: permission denied on %q", ErrForbidden, rel)
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrConflict): // a remote sandbox's helper out of reach or gone
		return err
	}
	s.log.Error("session file", "path", rel, "err", err)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the op and path of os.Root errors carry nothing for the client
	}
	return fmt.Errorf("cannot access %q: %v", rel, err)
}

// Tree lists one level of the Session root at rel: directories first, then
// by name (case-folded, bytewise on ties).
func (s *Files) Tree(ctx context.Context, id, rel string) (TreeListing, error) {
	root, err := s.root(ctx, id)
	if err != nil {
		return TreeListing{}, err
	}
	defer root.Close()
	if rel, err = CleanPath(rel); err != nil {
		return TreeListing{}, err
	}
	infos, err := root.ReadDir(rel, maxTreeEntries)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) && !isEscape(err) {
			return TreeListing{}, fmt.Errorf("%w: %q is not a directory", ErrInvalid, rel)
		}
		return TreeListing{}, s.pathError(rel, err)
	}
	listing := TreeListing{Path: rel, Entries: []TreeEntry{}}
	if len(infos) > maxTreeEntries {
		infos, listing.Truncated = infos[:maxTreeEntries], true
	}
	for _, fi := range infos {
		listing.Entries = append(listing.Entries, newTreeEntry(rel, fi))
	}
	slices.SortFunc(listing.Entries, func(a, b TreeEntry) int {
		if ad, bd := a.Type == entryDir, b.Type == entryDir; ad != bd {
			if ad {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), cmp.Compare(a.Name, b.Name))
	})
	return listing, nil
}

func newTreeEntry(dir string, fi fs.FileInfo) TreeEntry {
	e := TreeEntry{
		Name:     fi.Name(),
		Path:     fi.Name(),
		Size:     fi.Size(),
		Mode:     fmt.Sprintf("%04o", fi.Mode().Perm()),
		Modified: fi.ModTime().UTC(),
	}
	if dir != "." {
		e.Path = dir + "/" + fi.Name()
	}
	switch mode := fi.Mode(); {
	case mode.IsRegular():
		e.Type = entryFile
	case mode.IsDir():
		e.Type = entryDir
	case mode&fs.ModeSymlink != 0:
		e.Type = entrySymlink
	default:
		e.Type = entryOther
	}
	return e
}

// readRegular reads at most limit+1 bytes of name, following symlinks
// inside the root, and fails unless it is a regular file; errors name the
// client's rel.
func (s *Files) readRegular(root sessionFS, name, rel string, limit int64) ([]byte, fs.FileInfo, error) {
	data, fi, err := root.ReadRegular(name, limit)
	switch {
	case err != nil:
		err = s.pathError(rel, err)
	case fi.IsDir():
		err = fmt.Errorf("%w: %q is a directory; list it with /tree", ErrInvalid, rel)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%w: %q is not a regular file", ErrInvalid, rel)
	}
	if err != nil {
		return nil, nil, err
	}
	return data, fi, nil
}

// tooLarge is the refusal of n bytes of a file or content.
func tooLarge(what string, n int64) error {
	return fmt.Errorf("%w: %s is %d bytes, over the %d KiB (%d-byte) session file limit", ErrTooLarge, what, n, MaxFileBytes>>10, MaxFileBytes)
}

// requirePath cleans a path that must name something below the root.
func requirePath(rel string) (string, error) {
	if rel == "" {
		return "", fmt.Errorf("%w: the path query parameter is required", ErrInvalid)
	}
	return CleanPath(rel)
}

// Read reads one regular file of at most MaxFileBytes.
func (s *Files) Read(ctx context.Context, id, rel string) (FileContent, error) {
	root, err := s.root(ctx, id)
	if err != nil {
		return FileContent{}, err
	}
	defer root.Close()
	if rel, err = requirePath(rel); err != nil {
		return FileContent{}, err
	}
	data, fi, err := s.readRegular(root, rel, rel, MaxFileBytes)
	if err != nil {
		return FileContent{}, err
	}
	if fi.Size() > MaxFileBytes {
		return FileContent{}, tooLarge(fmt.Sprintf("%q", rel), fi.Size())
	}
	// The file may grow after the stat: one byte past the limit tells.
	if len(data) > MaxFileBytes {
		return FileContent{}, tooLarge(fmt.Sprintf("%q", rel), int64(len(data)))
	}
	out := FileContent{Path: rel, Size: int64(len(data)), Modified: fi.ModTime().UTC(), SHA256: hashOf(data)}
	if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		content := string(data)
		out.Content = &content
	} else {
		out.Binary = true
	}
	return out, nil
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// checkWrite validates a write's fields before anything is opened.
func checkWrite(w FileWrite) (rel, expected string, err error) {
	if rel, err = requirePath(w.Path); err != nil {
		return "", "", err
	}
	if w.Content == nil {
		return "", "", fmt.Errorf("%w: content is required", ErrInvalid)
	}
	if n := len(*w.Content); n > MaxFileBytes {
		return "", "", tooLarge("content", int64(n))
	}
	if w.ExpectedSHA256 != nil {
		expected = strings.ToLower(*w.ExpectedSHA256)
		if b, err := hex.DecodeString(expected); err != nil || len(b) != sha256.Size {
			return "", "", fmt.Errorf("%w: expected_sha256 must be 64 hexadecimal digits", ErrInvalid)
		}
	}
	return rel, expected, nil
}

// Write replaces an existing regular file (the final target of any
// symlinks, all inside the root) with a temporary file written, synced and
// renamed in the same directory, keeping the file's permission bits and,
// where allowed, its owner; then it journals session-file-written. It
// creates no file and no directory. It runs under the Session's lifecycle
// lock, so its event is ordered with the environment brackets, and to its
// end even if the client goes away, so what it wrote is always recorded.
func (s *Files) Write(ctx context.Context, id string, w FileWrite) (FileWritten, error) {
	if _, _, err := s.sandbox(id); err != nil {
		return FileWritten{}, err
	}
	rel, expected, err := checkWrite(w)
	if err != nil {
		return FileWritten{}, err
	}
	release, err := s.ownForTask(ctx, id)
	if err != nil {
		return FileWritten{}, err
	}
	defer release()
	// The write runs to its end even if the client goes away.
	root, err := s.root(context.WithoutCancel(ctx), id)
	if err != nil {
		return FileWritten{}, err
	}
	defer root.Close()
	target, err := s.resolveTarget(root, rel)
	if err != nil {
		return FileWritten{}, err
	}
	var limit int64 // only the expected hash needs the content
	if expected != "" {
		limit = MaxFileBytes
	}
	cur, fi, err := s.readRegular(root, target, rel, limit)
	if err != nil {
		return FileWritten{}, err
	}
	if lfi, err := root.Lstat(target); err != nil || !sameFile(fi, lfi) {
		return FileWritten{}, fmt.Errorf("%w: %q changed while it was being written; retry", ErrConflict, rel)
	}
	if expected != "" {
		// A file over the limit was never read through the routes: its
		// content cannot be the one the client read.
		if len(cur) > MaxFileBytes {
			return FileWritten{}, fmt.Errorf("%w: %q changed since it was read: it is over the %d-byte session file limit", ErrConflict, rel, MaxFileBytes)
		}
		if got := hashOf(cur); got != expected {
			return FileWritten{}, fmt.Errorf("%w: %q changed since it was read: its sha256 is %s, not the expected %s", ErrConflict, rel, got, expected)
		}
	}
	// Recorded, then acted: the intent names the path and the new
	// content's hash, by which the next start tells whether a write a stop
	// cut off landed.
	data := []byte(*w.Content)
	fx, err := s.intend(ctx, events.EffectFileWrite, id, rel, hashOf(data))
	if err != nil {
		return FileWritten{}, err
	}
	nfi, err := root.Replace(target, fi, data)
	if err != nil {
		err = s.pathError(rel, err)
		if serr := fx.settle(ctx, err); serr != nil {
			s.log.Error("settle a failed file write", "session", id, "err", serr)
		}
		return FileWritten{}, err
	}
	out := FileWritten{Path: rel, Size: int64(len(data)), Modified: nfi.ModTime().UTC(), SHA256: hashOf(data)}
	ev := events.FileWritten{Path: rel, Size: out.Size, SHA256: out.SHA256, ExpectedSHA256: expected}
	if err := fx.settle(ctx, nil, events.New(id, ev)); err != nil {
		return FileWritten{}, err
	}
	return out, nil
}

// resolveTarget follows the symlinks that form the final element of rel, so
// that a write replaces the file they lead to rather than the link. It keeps
// the earlier elements as they are, and the link text unclean, for os.Root
// to resolve: a ".." after a symlinked directory must climb from that
// directory's real place, which a lexical clean would get wrong.
func (s *Files) resolveTarget(root sessionFS, rel string) (string, error) {
	cur := rel
	for range maxSymlinkHops {
		fi, err := root.Lstat(cur)
		if err != nil {
			return "", s.pathError(rel, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return cur, nil
		}
		link, err := root.Readlink(cur)
		if err != nil {
			return "", s.pathError(rel, err)
		}
		if path.IsAbs(link) || link == "" {
			// os.Root refuses absolute targets; so does this, without
			// looking at what they name.
			return "", outsideRoot(rel)
		}
		if i := strings.LastIndexByte(cur, '/'); i >= 0 {
			cur = cur[:i+1] + link
		} else {
			cur = link
		}
	}
	return "", s.pathError(rel, syscall.ELOOP)
}

// replaceFile atomically replaces the regular file target (not a symlink)
// with data: a temporary file in its directory, same mode and owner, synced,
// then renamed over it, then the directory synced.
func replaceFile(root *os.Root, target string, old fs.FileInfo, data []byte) (fs.FileInfo, error) {
	dir, base := ".", target
	if i := strings.LastIndexByte(target, '/'); i >= 0 {
		dir, base = target[:i], target[i+1:]
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + base + ".lathe-" + hex.EncodeToString(rnd[:]) + ".tmp"
	if dir != "." {
		tmp = dir + "/" + tmp
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := writeTemp(f, old, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, target)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return nil, err
	}
	if d, err := root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0); err == nil {
		_ = d.Sync() // the rename is durable once the directory is
		d.Close()
	}
	return fi, nil
}

// writeTemp fills the temporary file f with data, gives it old's owner
// and mode, and syncs it.
func writeTemp(f *os.File, old fs.FileInfo, data []byte) (fs.FileInfo, error) {
	if _, err := f.Write(data); err != nil {
		return nil, err
	}
	if st, ok := old.Sys().(*syscall.Stat_t); ok {
		// Best effort: only root may give a file away. Chown before chmod,
		// as chown clears the set-id bits.
		_ = f.Chown(int(st.Uid), int(st.Gid))
	}
	if err := f.Chmod(old.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return f.Stat()
}
