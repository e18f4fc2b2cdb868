package transport

// The Session file routes: a one-level tree listing, a file read and an
// atomic overwrite, all confined to the Session root.
//
// The Session root is the Session's working_dir. The local sandbox
// bind-mounts it read-write at the same path, so the host's view of it is
// the sandbox's view; the routes still answer only while the environment is
// Ready (commands.Service.Sandbox), and there is no host fallback otherwise.
//
// Confinement happens twice. cleanRelPath rejects malformed paths (absolute,
// NUL, "..") with 400 before anything touches the filesystem. Every access
// then goes through an os.Root opened on the Session root, whose openat-based
// traversal refuses, after resolution, any symlink that leads outside it
// (403). os.Root decides that lexically from the link text, so the answer
// never depends on whether the outside target exists. An absolute symlink
// target is refused even when it names a path inside the root.

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"lathe/commands"
)

// File route limits.
const (
	// maxFileBytes bounds a file read (the spec's 512 KiB) and, equally, the
	// content of a write.
	maxFileBytes = 512 << 10
	// maxTreeEntries bounds one listing; a larger directory is cut off
	// (in directory order) and flagged truncated.
	maxTreeEntries = 10_000
	// maxPathBytes is Linux's PATH_MAX.
	maxPathBytes = 4096
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

// treeEntry is one directory entry. Type comes from lstat: a symlink is
// "symlink" whatever it points to, and its size is that of the link.
type treeEntry struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"` // relative to the Session root, slash-separated
	Type     string    `json:"type"`
	Size     int64     `json:"size"`
	Mode     string    `json:"mode"` // permission bits in octal, "0644"
	Modified time.Time `json:"modified"`
}

// treeListing is the answer of GET /tree.
type treeListing struct {
	Path      string      `json:"path"` // "." for the root
	Entries   []treeEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// fileContent is the answer of GET /file. Binary files (not valid UTF-8,
// or holding a NUL byte) come without content.
type fileContent struct {
	Path     string    `json:"path"`
	Content  *string   `json:"content,omitempty"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	SHA256   string    `json:"sha256"`
	Binary   bool      `json:"binary"`
}

// fileWritten is the answer of POST /file.
type fileWritten struct {
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	SHA256   string    `json:"sha256"`
}

// cleanRelPath validates a client path relative to the Session root and
// returns it clean and slash-separated: "" and "." name the root and come
// back as "."; anything else comes back without ".", empty or trailing
// elements. Absolute paths, NUL bytes and ".." elements are refused, so the
// result never starts with "/" nor contains a ".." element. A backslash is
// an ordinary file-name byte on Linux and is kept as one.
func cleanRelPath(p string) (string, error) {
	switch {
	case len(p) > maxPathBytes:
		return "", fmt.Errorf("%w: path is %d bytes, over the %d-byte limit", commands.ErrInvalid, len(p), maxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: path must not contain NUL bytes", commands.ErrInvalid)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: path %q must be relative to the session root, not absolute", commands.ErrInvalid, p)
	}
	for elem := range strings.SplitSeq(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("%w: path %q must not contain \"..\" elements", commands.ErrInvalid, p)
		}
	}
	if p == "" {
		return ".", nil
	}
	return path.Clean(p), nil
}

// pathParam reads and cleans the "path" query parameter. required makes an
// absent or empty one an error; otherwise it names the root.
func pathParam(r *http.Request, required bool) (string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", fmt.Errorf("%w: malformed query string: %v", commands.ErrInvalid, err)
	}
	p := q.Get("path")
	if p == "" && required {
		return "", fmt.Errorf("%w: the path query parameter is required", commands.ErrInvalid)
	}
	return cleanRelPath(p)
}

// sessionRoot opens the root of a Session whose environment is Ready:
// ErrNotFound for a missing Session, ErrConflict for any other state.
func (s *Server) sessionRoot(id string) (*os.Root, error) {
	_, ss, err := s.deps.Commands.Sandbox(id)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(ss.WorkingDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the working directory of session %q is gone: %v", commands.ErrConflict, id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open the root of session %q: %w", id, err)
	}
	return root, nil
}

// errPathEscapes is the error os.Root gives for a path that leaves it. The
// os package does not export it, so it is taken from os.Root itself: ".."
// from any root escapes lexically, without touching the filesystem beyond
// opening "/".
var errPathEscapes = sync.OnceValue(func() error {
	root, err := os.OpenRoot("/")
	if err != nil {
		return nil
	}
	defer root.Close()
	_, err = root.Lstat("..")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return nil
})

// isEscape reports whether err says a path resolved outside its os.Root.
func isEscape(err error) bool {
	if sentinel := errPathEscapes(); sentinel != nil && errors.Is(err, sentinel) {
		return true
	}
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// outsideRoot is the 403 message for a path that resolves outside the root.
// It names neither the link's target nor whether that exists.
func outsideRoot(rel string) string {
	return fmt.Sprintf("path %q resolves outside the session root", rel)
}

// failPath answers a filesystem error on the client path rel. Messages name
// only rel, never the host path nor a symlink's target.
func (s *Server) failPath(w http.ResponseWriter, rel string, err error) {
	switch {
	case isEscape(err):
		writeError(w, http.StatusForbidden, outsideRoot(rel))
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, fmt.Sprintf("%q does not exist in the session root", rel))
	case errors.Is(err, syscall.ENOTDIR):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("a parent of %q is not a directory", rel))
	case errors.Is(err, syscall.ELOOP):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q has too many levels of symbolic links", rel))
	case errors.Is(err, syscall.ENAMETOOLONG):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is too long a path", rel))
	case errors.Is(err, fs.ErrPermission):
		writeError(w, http.StatusForbidden, fmt.Sprintf("permission denied on %q", rel))
	default:
		s.log.Error("session file", "path", rel, "err", err)
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the op and path of os.Root errors carry nothing for the client
		}
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("cannot access %q: %v", rel, err))
	}
}

// sessionTree is GET /api/sessions/:id/tree?path=: one level, directories
// first, then by name (case-folded, bytewise on ties).
func (s *Server) sessionTree(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	root, err := s.sessionRoot(p.ByName("id"))
	if err != nil {
		fail(w, err)
		return
	}
	defer root.Close()
	rel, err := pathParam(r, false)
	if err != nil {
		fail(w, err)
		return
	}
	// O_DIRECTORY refuses anything else without opening it, and O_NONBLOCK
	// keeps a FIFO swapped in meanwhile from blocking the open.
	dir, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) && !isEscape(err) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is not a directory", rel))
			return
		}
		s.failPath(w, rel, err)
		return
	}
	defer dir.Close()
	listing := treeListing{Path: rel, Entries: []treeEntry{}}
	for {
		// A File opened in a Root stats its entries with fstatat on its own
		// descriptor (no symlink following, no path re-resolution).
		batch, err := dir.ReadDir(256)
		for _, de := range batch {
			if len(listing.Entries) == maxTreeEntries {
				listing.Truncated = true
				break
			}
			fi, ierr := de.Info()
			if ierr != nil {
				continue // removed since it was listed
			}
			listing.Entries = append(listing.Entries, newTreeEntry(rel, fi))
		}
		if listing.Truncated || errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.failPath(w, rel, err)
			return
		}
	}
	slices.SortFunc(listing.Entries, func(a, b treeEntry) int {
		if ad, bd := a.Type == entryDir, b.Type == entryDir; ad != bd {
			if ad {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), cmp.Compare(a.Name, b.Name))
	})
	writeJSON(w, http.StatusOK, listing)
}

func newTreeEntry(dir string, fi fs.FileInfo) treeEntry {
	e := treeEntry{
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

// openRegular opens name for reading, following symlinks inside the root,
// and fails unless it is a regular file; messages name the client's rel.
// O_NONBLOCK keeps a FIFO from blocking the open; it changes nothing for a
// regular file.
func (s *Server) openRegular(w http.ResponseWriter, root *os.Root, name, rel string) (*os.File, fs.FileInfo, bool) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		s.failPath(w, rel, err)
		return nil, nil, false
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		s.failPath(w, rel, err)
		return nil, nil, false
	}
	switch {
	case fi.IsDir():
		f.Close()
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is a directory; list it with /tree", rel))
		return nil, nil, false
	case !fi.Mode().IsRegular():
		f.Close()
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is not a regular file", rel))
		return nil, nil, false
	}
	return f, fi, true
}

// tooLarge is the 413 message for n bytes of a file or content.
func tooLarge(what string, n int64) string {
	return fmt.Sprintf("%s is %d bytes, over the %d KiB (%d-byte) session file limit", what, n, maxFileBytes>>10, maxFileBytes)
}

// readSessionFile is GET /api/sessions/:id/file?path=.
func (s *Server) readSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	root, err := s.sessionRoot(p.ByName("id"))
	if err != nil {
		fail(w, err)
		return
	}
	defer root.Close()
	rel, err := pathParam(r, true)
	if err != nil {
		fail(w, err)
		return
	}
	f, fi, ok := s.openRegular(w, root, rel, rel)
	if !ok {
		return
	}
	defer f.Close()
	if fi.Size() > maxFileBytes {
		writeError(w, http.StatusRequestEntityTooLarge, tooLarge(fmt.Sprintf("%q", rel), fi.Size()))
		return
	}
	// The file may grow after the stat: read one byte past the limit to see.
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		s.failPath(w, rel, err)
		return
	}
	if len(data) > maxFileBytes {
		writeError(w, http.StatusRequestEntityTooLarge, tooLarge(fmt.Sprintf("%q", rel), int64(len(data))))
		return
	}
	sum := sha256.Sum256(data)
	out := fileContent{Path: rel, Size: int64(len(data)), Modified: fi.ModTime().UTC(), SHA256: hex.EncodeToString(sum[:])}
	if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		content := string(data)
		out.Content = &content
	} else {
		out.Binary = true
	}
	writeJSON(w, http.StatusOK, out)
}

// writeMu serialises the daemon's own file writes, so that the
// expected_sha256 check and the rename are one step for its clients.
// Processes in the sandbox can still race them, as they can any editor.
var writeMu sync.Mutex

// writeSessionFile is POST /api/sessions/:id/file?path=: it replaces an
// existing regular file (the final target of any symlinks, all inside the
// root) with a temporary file written, synced and renamed in the same
// directory, keeping the file's permission bits and, where allowed, its
// owner. It creates no file and no directory.
func (s *Server) writeSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	root, err := s.sessionRoot(p.ByName("id"))
	if err != nil {
		fail(w, err)
		return
	}
	defer root.Close()
	rel, err := pathParam(r, true)
	if err != nil {
		fail(w, err)
		return
	}
	var req struct {
		Content        *string `json:"content"`
		ExpectedSHA256 *string `json:"expected_sha256"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.Content == nil {
		writeError(w, http.StatusBadRequest, "content is required")
		return
	}
	if n := len(*req.Content); n > maxFileBytes {
		writeError(w, http.StatusRequestEntityTooLarge, tooLarge("content", int64(n)))
		return
	}
	var expected string
	if req.ExpectedSHA256 != nil {
		expected = strings.ToLower(*req.ExpectedSHA256)
		if b, err := hex.DecodeString(expected); err != nil || len(b) != sha256.Size {
			writeError(w, http.StatusBadRequest, "expected_sha256 must be 64 hexadecimal digits")
			return
		}
	}

	writeMu.Lock()
	defer writeMu.Unlock()
	target, ok := s.resolveTarget(w, root, rel)
	if !ok {
		return
	}
	cur, fi, ok := s.openRegular(w, root, target, rel)
	if !ok {
		return
	}
	defer cur.Close()
	if lfi, err := root.Lstat(target); err != nil || !os.SameFile(fi, lfi) {
		writeError(w, http.StatusConflict, fmt.Sprintf("%q changed while it was being written; retry", rel))
		return
	}
	if expected != "" {
		h := sha256.New()
		if _, err := io.Copy(h, cur); err != nil {
			s.failPath(w, rel, err)
			return
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != expected {
			writeError(w, http.StatusConflict, fmt.Sprintf("%q changed since it was read: its sha256 is %s, not the expected %s", rel, got, expected))
			return
		}
	}
	out, err := replaceFile(root, target, fi, []byte(*req.Content))
	if err != nil {
		s.failPath(w, rel, err)
		return
	}
	out.Path = rel
	writeJSON(w, http.StatusOK, out)
}

// resolveTarget follows the symlinks that form the final element of rel, so
// that a write replaces the file they lead to rather than the link. It keeps
// the earlier elements as they are, and the link text unclean, for os.Root
// to resolve: a ".." after a symlinked directory must climb from that
// directory's real place, which a lexical clean would get wrong.
func (s *Server) resolveTarget(w http.ResponseWriter, root *os.Root, rel string) (string, bool) {
	cur := rel
	for range maxSymlinkHops {
		fi, err := root.Lstat(cur)
		if err != nil {
			s.failPath(w, rel, err)
			return "", false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return cur, true
		}
		link, err := root.Readlink(cur)
		if err != nil {
			s.failPath(w, rel, err)
			return "", false
		}
		if path.IsAbs(link) || link == "" {
			// os.Root refuses absolute targets; so does this, without
			// looking at what they name.
			writeError(w, http.StatusForbidden, outsideRoot(rel))
			return "", false
		}
		if i := strings.LastIndexByte(cur, '/'); i >= 0 {
			cur = cur[:i+1] + link
		} else {
			cur = link
		}
	}
	s.failPath(w, rel, syscall.ELOOP)
	return "", false
}

// replaceFile atomically replaces the regular file target (not a symlink)
// with data: a temporary file in its directory, same mode and owner, synced,
// then renamed over it, then the directory synced.
func replaceFile(root *os.Root, target string, old fs.FileInfo, data []byte) (fileWritten, error) {
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
		return fileWritten{}, err
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
		return fileWritten{}, err
	}
	if d, err := root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0); err == nil {
		_ = d.Sync() // the rename is durable once the directory is
		d.Close()
	}
	sum := sha256.Sum256(data)
	return fileWritten{Size: int64(len(data)), Modified: fi.ModTime().UTC(), SHA256: hex.EncodeToString(sum[:])}, nil
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
