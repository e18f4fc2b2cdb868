package files

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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"lathe/commands/core"
	"lathe/commands/environments"

	"lathe/journal"

	"lathe/journal/events"
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

// pathError classes a filesystem error on the client path rel. Messages
// name only rel, never the host path nor a symlink's target.
func (s *Files) pathError(rel string, err error) error {
	switch {
	case environments.IsEscape(err):
		return environments.OutsideRoot(rel)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %q does not exist in the session root", core.ErrNotFound, rel)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: a parent of %q is not a directory", core.ErrInvalid, rel)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%w: %q has too many levels of symbolic links", core.ErrInvalid, rel)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%w: %q is too long a path", core.ErrInvalid, rel)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: permission denied on %q", core.ErrForbidden, rel)
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrConflict): // a remote sandbox's helper out of reach or gone
		return err
	}
	s.Log.Error("session file", "path", rel, "err", err)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the op and path of os.Root errors carry nothing for the client
	}
	return fmt.Errorf("cannot access %q: %v", rel, err)
}

// Tree lists one level of the Session root at rel: directories first, then
// by name (case-folded, bytewise on ties).
func (s *Files) Tree(ctx context.Context, id, rel string) (TreeListing, error) {
	root, err := s.Root(ctx, id)
	if err != nil {
		return TreeListing{}, err
	}
	defer root.Close()
	if rel, err = core.CleanPath(rel); err != nil {
		return TreeListing{}, err
	}
	infos, err := root.ReadDir(rel, maxTreeEntries)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) && !environments.IsEscape(err) {
			return TreeListing{}, fmt.Errorf("%w: %q is not a directory", core.ErrInvalid, rel)
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
func (s *Files) readRegular(root environments.SessionFS, name, rel string, limit int64) ([]byte, fs.FileInfo, error) {
	data, fi, err := root.ReadRegular(name, limit)
	switch {
	case err != nil:
		err = s.pathError(rel, err)
	case fi.IsDir():
		err = fmt.Errorf("%w: %q is a directory; list it with /tree", core.ErrInvalid, rel)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%w: %q is not a regular file", core.ErrInvalid, rel)
	}
	if err != nil {
		return nil, nil, err
	}
	return data, fi, nil
}

// tooLarge is the refusal of n bytes of a file or content.
func tooLarge(what string, n int64) error {
	return fmt.Errorf("%w: %s is %d bytes, over the %d KiB (%d-byte) session file limit", core.ErrTooLarge, what, n, MaxFileBytes>>10, MaxFileBytes)
}

// requirePath cleans a path that must name something below the root.
func requirePath(rel string) (string, error) {
	if rel == "" {
		return "", fmt.Errorf("%w: the path query parameter is required", core.ErrInvalid)
	}
	return core.CleanPath(rel)
}

// Read reads one regular file of at most MaxFileBytes.
func (s *Files) Read(ctx context.Context, id, rel string) (FileContent, error) {
	root, err := s.Root(ctx, id)
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
	out := FileContent{Path: rel, Size: int64(len(data)), Modified: fi.ModTime().UTC(), SHA256: HashOf(data)}
	if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		content := string(data)
		out.Content = &content
	} else {
		out.Binary = true
	}
	return out, nil
}

func HashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// checkWrite validates a write's fields before anything is opened.
func checkWrite(w FileWrite) (rel, expected string, err error) {
	if rel, err = requirePath(w.Path); err != nil {
		return "", "", err
	}
	if err := outsideGit("path", rel); err != nil { // commands/files/filetree.go
		return "", "", err
	}
	if w.Content == nil {
		return "", "", fmt.Errorf("%w: content is required", core.ErrInvalid)
	}
	if n := len(*w.Content); n > MaxFileBytes {
		return "", "", tooLarge("content", int64(n))
	}
	if w.ExpectedSHA256 != nil {
		expected = strings.ToLower(*w.ExpectedSHA256)
		if b, err := hex.DecodeString(expected); err != nil || len(b) != sha256.Size {
			return "", "", fmt.Errorf("%w: expected_sha256 must be 64 hexadecimal digits", core.ErrInvalid)
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
	if _, _, err := s.ReadySandbox(id); err != nil {
		return FileWritten{}, err
	}
	rel, expected, err := checkWrite(w)
	if err != nil {
		return FileWritten{}, err
	}
	release, err := s.OwnForTask(ctx, id)
	if err != nil {
		return FileWritten{}, err
	}
	defer release()
	// The write runs to its end even if the client goes away.
	root, err := s.Root(context.WithoutCancel(ctx), id)
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
	if lfi, err := root.Lstat(target); err != nil || !environments.SameFile(fi, lfi) {
		return FileWritten{}, fmt.Errorf("%w: %q changed while it was being written; retry", core.ErrConflict, rel)
	}
	if expected != "" {
		// A file over the limit was never read through the routes: its
		// content cannot be the one the client read.
		if len(cur) > MaxFileBytes {
			return FileWritten{}, fmt.Errorf("%w: %q changed since it was read: it is over the %d-byte session file limit", core.ErrConflict, rel, MaxFileBytes)
		}
		if got := HashOf(cur); got != expected {
			return FileWritten{}, fmt.Errorf("%w: %q changed since it was read: its sha256 is %s, not the expected %s", core.ErrConflict, rel, got, expected)
		}
	}
	// Recorded, then acted: the intent names the path and the new
	// content's hash, by which the next start tells whether a write a stop
	// cut off landed.
	data := []byte(*w.Content)
	fx, err := s.Intend(ctx, events.EffectFileWrite, id, rel, HashOf(data))
	if err != nil {
		return FileWritten{}, err
	}
	nfi, err := root.Replace(target, fi, data)
	if err != nil {
		err = s.pathError(rel, err)
		if serr := fx.Settle(ctx, err); serr != nil {
			s.Log.Error("settle a failed file write", "session", id, "err", serr)
		}
		return FileWritten{}, err
	}
	out := FileWritten{Path: rel, Size: int64(len(data)), Modified: nfi.ModTime().UTC(), SHA256: HashOf(data)}
	ev := events.FileWritten{Path: rel, Size: out.Size, SHA256: out.SHA256, ExpectedSHA256: expected}
	if err := fx.Settle(ctx, nil, events.New(id, ev)); err != nil {
		return FileWritten{}, err
	}
	return out, nil
}

// resolveTarget follows the symlinks that form the final element of rel, so
// that a write replaces the file they lead to rather than the link. It keeps
// the earlier elements as they are, and the link text unclean, for os.Root
// to resolve: a ".." after a symlinked directory must climb from that
// directory's real place, which a lexical clean would get wrong. A link
// whose text names a .git element is refused as rel would be.
func (s *Files) resolveTarget(root environments.SessionFS, rel string) (string, error) {
	cur := rel
	for range maxSymlinkHops {
		if cur != rel && outsideGit("path", cur) != nil {
			return "", fmt.Errorf("%w: path %q is a link into .git; change git's data through git (Source Control or a terminal)", core.ErrForbidden, rel)
		}
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
			return "", environments.OutsideRoot(rel)
		}
		if i := strings.LastIndexByte(cur, '/'); i >= 0 {
			cur = cur[:i+1] + link
		} else {
			cur = link
		}
	}
	return "", s.pathError(rel, syscall.ELOOP)
}

// Files lists, reads and writes a Session's files.
type Files struct{ *environments.Sandboxes }

// reconcileWrite records a write a stop cut off as written when the file
// holds the intended content.
// reconcilers settle a file write a stop cut off.
func (s *Files) Reconcilers() map[string]core.ReconcileEffect {
	return map[string]core.ReconcileEffect{events.EffectFileWrite: s.reconcileWrite}
}

func (s *Files) reconcileWrite(_ context.Context, in events.EffectIntended) (string, []journal.Event) {
	ss, ok := s.Store.Session(in.Target)
	if !ok {
		return "the Session is gone", nil
	}
	root, err := s.ReconcileRoot(in.Target, ss.WorkingDir)
	if err != nil {
		return "the Session root cannot be opened: " + err.Error(), nil
	}
	defer root.Close()
	data, _, err := root.ReadRegular(in.Detail.String(), MaxFileBytes)
	if err != nil || HashOf(data) != in.SHA256 {
		return "the daemon stopped during the write, which did not land", nil
	}
	return "the daemon stopped after the write landed", []journal.Event{events.New(in.Target,
		events.FileWritten{Path: in.Detail.String(), Size: int64(len(data)), SHA256: in.SHA256})}
}
