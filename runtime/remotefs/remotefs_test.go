package remotefs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"lathe/runtime/polltest"
	"lathe/runtime/remotefs"
	"lathe/runtime/remotefs/remotefstest"
	"lathe/runtime/sandbox"
)

// hostSandbox serves the helper in this process (remotefstest).
type hostSandbox struct {
	sandbox.Sandbox
	remotefstest.Helper
}

func (h *hostSandbox) SessionID() string { return "host" }

func fixture(t *testing.T) (string, *remotefs.Client) {
	root, c, _ := fixtureOn(t)
	return root, c
}

func fixtureOn(t *testing.T) (string, *remotefs.Client, *hostSandbox) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	for _, d := range []string{root + "/sub", base + "/outside"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{root + "/a.txt": "alpha", root + "/sub/b.txt": "beta", base + "/outside/secret": "s"} {
		if err := os.WriteFile(name, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"in-link": "sub/b.txt", "out-rel": "../outside/secret", "out-abs": base + "/outside/secret", "out-dir": "../outside", "up": "sub/../a.txt"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	sb := &hostSandbox{}
	c := remotefs.New(sb, root)
	t.Cleanup(c.Close)
	t.Cleanup(sb.Kill)
	return root, c, sb
}

// TestHelperConfines: the helper follows symlinks inside its root and
// refuses every path that leaves it, by "..", an absolute or a relative
// link, a link to a directory outside, for reads and for changes.
func TestHelperConfines(t *testing.T) {
	_, c := fixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		op, path, to string
		want         string // body read, or "escape", or "notexist"
	}{
		{"read", "a.txt", "", "alpha"},
		{"read", "in-link", "", "beta"},
		{"read", "up", "", "alpha"},
		{"read", "sub/../a.txt", "", "alpha"},
		{"read", "../outside/secret", "", "escape"},
		{"read", "out-rel", "", "escape"},
		{"read", "out-abs", "", "escape"},
		{"read", "out-dir/secret", "", "escape"},
		{"read", "missing", "", "notexist"},
		{"lstat", "out-dir/secret", "", "escape"},
		{"readdir", "out-dir", "", "escape"},
		{"create", "out-dir/new", "", "escape"},
		{"mkdir", "../made", "", "escape"},
		{"remove", "out-dir/secret", "", "escape"},
		{"rename", "a.txt", "out-dir/stolen", "escape"},
		{"replace", "out-dir/secret", "", "escape"},
	} {
		rep, data, err := c.Call(ctx, remotefs.Request{Op: tc.op, Path: tc.path, To: tc.to, Limit: 1 << 20, Perm: 0o644}, []byte("x"))
		switch tc.want {
		case "escape":
			if !errors.Is(err, remotefs.ErrEscape) {
				t.Errorf("%s %q: %v, want an escape", tc.op, tc.path, err)
			}
		case "notexist":
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s %q: %v, want not exist", tc.op, tc.path, err)
			}
		default:
			if err != nil || string(data) != tc.want || rep.Info == nil || !rep.Info.FileInfo().Mode().IsRegular() {
				t.Errorf("%s %q = %q, %+v, %v; want %q", tc.op, tc.path, data, rep.Info, err, tc.want)
			}
		}
	}
}

// TestHelperChanges: create, write, rename, list and delete land in the
// root, a replace keeps the mode, and the fingerprint moves with them.
func TestHelperChanges(t *testing.T) {
	root, c := fixture(t)
	ctx := context.Background()
	fp := func() string {
		rep, _, err := c.Call(ctx, remotefs.Request{Op: "fingerprint"}, nil)
		if err != nil || rep.Fingerprint == "" {
			t.Fatalf("fingerprint: %v", err)
		}
		return rep.Fingerprint
	}
	before := fp()
	steps := []struct {
		req  remotefs.Request
		body string
	}{
		{remotefs.Request{Op: "mkdir", Path: "d", Perm: 0o755}, ""},
		{remotefs.Request{Op: "create", Path: "d/f", Perm: 0o644}, ""},
		{remotefs.Request{Op: "replace", Path: "a.txt", Perm: 0o640}, "new alpha"},
		{remotefs.Request{Op: "rename", Path: "d/f", To: "g"}, ""},
		{remotefs.Request{Op: "remove", Path: "sub", All: true}, ""},
	}
	for _, st := range steps {
		if _, _, err := c.Call(ctx, st.req, []byte(st.body)); err != nil {
			t.Fatalf("%+v: %v", st.req, err)
		}
	}
	if _, _, err := c.Call(ctx, remotefs.Request{Op: "create", Path: "g", Perm: 0o644}, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("create over an entry: %v, want exists", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(b) != "new alpha" {
		t.Errorf("a.txt = %q", b)
	}
	if fi, err := os.Stat(filepath.Join(root, "a.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("a.txt after replace: %v %v", fi, err)
	}
	rep, _, err := c.Call(ctx, remotefs.Request{Op: "readdir", Path: ".", Max: 100}, nil)
	names := map[string]bool{}
	for _, e := range rep.Entries {
		names[e.Name] = true
	}
	if err != nil || !names["g"] || !names["d"] || names["sub"] {
		t.Errorf("readdir . = %v, %v", names, err)
	}
	if fp() == before {
		t.Error("the fingerprint did not change with the tree")
	}
}

// TestFingerprintIgnoresGitLocks: git taking and dropping its index lock
// (every git status does, and it moves .git's time) leaves the
// fingerprint as it was, as runtime/watch ignores it on the host; the
// index written anew moves it.
func TestFingerprintIgnoresGitLocks(t *testing.T) {
	root, c := fixture(t)
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	fingerprint := func() string {
		t.Helper()
		rep, _, err := c.Call(ctx, remotefs.Request{Op: "fingerprint"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Fingerprint
	}
	before := fingerprint()
	lock := filepath.Join(root, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, ".git"), later, later); err != nil {
		t.Fatal(err)
	}
	if got := fingerprint(); got != before {
		t.Error("a lock taken and dropped in .git moved the fingerprint: a status read would notify itself")
	}
	if err := os.WriteFile(filepath.Join(root, ".git", "index"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := fingerprint(); got == before {
		t.Error("a new index left the fingerprint as it was")
	}
}

// TestHelperNamesNotUTF8: file names that are not UTF-8 come and go as
// their exact bytes, as os gives them on the host (what a containerd
// Session's routes see): listed, stat'ed, read, linked to, written,
// renamed and removed, with no name turned into U+FFFD.
func TestHelperNamesNotUTF8(t *testing.T) {
	root, c := fixture(t)
	ctx := context.Background()
	const latin, dir, link = "caf\xe9.txt", "d\xff", "l\xfe"
	if err := os.WriteFile(filepath.Join(root, latin), []byte("latin-1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, dir, "x"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(latin, filepath.Join(root, link)); err != nil {
		t.Fatal(err)
	}
	names := func() string {
		t.Helper()
		rep, _, err := c.Call(ctx, remotefs.Request{Op: "readdir", Path: ".", Max: 100}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range rep.Entries {
			got = append(got, e.Name)
		}
		slices.Sort(got)
		return fmt.Sprintf("%q", got)
	}
	host := func() string {
		t.Helper()
		es, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.Name())
		}
		return fmt.Sprintf("%q", got)
	}
	if got, want := names(), host(); got != want {
		t.Errorf("readdir . = %s, want what os lists: %s", got, want)
	}
	for _, tc := range []struct {
		name     string
		req      remotefs.Request
		body     string
		wantBody string
		check    func(remotefs.Reply) error
	}{
		{name: "read", req: remotefs.Request{Op: "read", Path: latin, Limit: 100}, wantBody: "latin-1"},
		{name: "read below", req: remotefs.Request{Op: "read", Path: dir + "/x", Limit: 100}, wantBody: "inside"},
		{name: "read through the link", req: remotefs.Request{Op: "read", Path: link, Limit: 100}, wantBody: "latin-1"},
		{name: "lstat", req: remotefs.Request{Op: "lstat", Path: dir}, check: func(r remotefs.Reply) error {
			if r.Info == nil || r.Info.Name != dir || !r.Info.FileInfo().IsDir() {
				return fmt.Errorf("info %+v", r.Info)
			}
			return nil
		}},
		{name: "readlink", req: remotefs.Request{Op: "readlink", Path: link}, check: func(r remotefs.Reply) error {
			if r.Link != latin {
				return fmt.Errorf("link %q, want %q", r.Link, latin)
			}
			return nil
		}},
		{name: "replace", req: remotefs.Request{Op: "replace", Path: "n\xfd.txt", Perm: 0o644}, body: "written"},
		{name: "rename", req: remotefs.Request{Op: "rename", Path: "n\xfd.txt", To: dir + "/m\xfc.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, data, err := c.Call(ctx, tc.req, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tc.wantBody {
				t.Errorf("body %q, want %q", data, tc.wantBody)
			}
			if tc.check != nil {
				if err := tc.check(rep); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(root, dir, "m\xfc.txt")); err != nil || string(b) != "written" {
		t.Errorf("the written and renamed file on the host: %q %v", b, err)
	}
	if _, _, err := c.Call(ctx, remotefs.Request{Op: "remove", Path: dir, All: true}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := names(), host(); got != want || strings.Contains(got, "d\\xff") {
		t.Errorf("after the remove: readdir %s, os %s", got, want)
	}
	if _, _, err := c.Call(ctx, remotefs.Request{Op: "read", Path: "caf\uFFFD.txt", Limit: 10}, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the lossy name read: %v, want not exist, as on the host", err)
	}
}

// TestHelperRestarts: a helper that dies is started again by the next call.
func TestHelperRestarts(t *testing.T) {
	_, c, sb := fixtureOn(t)
	ctx := context.Background()
	if _, _, err := c.Call(ctx, remotefs.Request{Op: "lstat", Path: "a.txt"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Call(ctx, remotefs.Request{Op: "nonsense"}, nil); err == nil {
		t.Error("an unknown op answered without an error")
	}
	t0 := time.Now()
	sb.Kill()
	if _, _, err := c.Call(ctx, remotefs.Request{Op: "lstat", Path: "a.txt"}, nil); err != nil {
		t.Errorf("after the helper died: %v", err)
	}
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("the restart took %s: the dead helper was not noticed", took)
	}
}

// TestWatchNotifies: a change in the tree reaches notify, after the
// debounce, whether the helper watches with inotify or, past its bound on
// directories, polls.
func TestWatchNotifies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxDirs int
	}{
		{"inotify", 10_000},
		{"polling past the directory bound", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer remotefs.SetMaxWatchDirsForTest(remotefs.SetMaxWatchDirsForTest(tc.maxDirs))
			root, _ := fixture(t)
			var n atomic.Int32
			sb := &hostSandbox{}
			defer sb.Kill()
			w := remotefs.Watch(sb, root, 20*time.Millisecond, 50*time.Millisecond, func() { n.Add(1) })
			defer w.Close()
			// Change until seen: the first wait or fingerprint may postdate
			// an early change.
			i := 0
			polltest.Check(t, func() error {
				if n.Load() > 0 {
					return nil
				}
				i++
				if err := os.WriteFile(filepath.Join(root, "sub", "new.txt"), []byte(strconv.Itoa(i)), 0o644); err != nil {
					t.Fatal(err)
				}
				return errors.New("no notice for changes in the tree")
			}, polltest.Within(30*time.Second), polltest.Every(100*time.Millisecond))
		})
	}
}

// TestHelperWaits: the helper's wait says changed for a file written, a
// directory made and a file in that new directory, and the new index in
// .git, and not for git taking and dropping its index lock nor a read.
func TestHelperWaits(t *testing.T) {
	root, c := fixture(t)
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Join(root, ".git", "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	wait := func(ms int64) bool {
		t.Helper()
		rep, _, err := c.Call(ctx, remotefs.Request{Op: "wait", TimeoutMS: ms, Max: 100}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Changed
	}
	wait(1) // starts the watch
	for _, tc := range []struct {
		name   string
		change func() error
		want   bool
	}{
		{"the index lock taken and dropped", func() error {
			lock := filepath.Join(root, ".git", "index.lock")
			if err := os.WriteFile(lock, nil, 0o644); err != nil {
				return err
			}
			return os.Remove(lock)
		}, false},
		{"a file read", func() error { _, err := os.ReadFile(filepath.Join(root, "a.txt")); return err }, false},
		{"inside .git's directories", func() error { return os.WriteFile(filepath.Join(root, ".git", "refs", "x"), nil, 0o644) }, false},
		{"a file written", func() error { return os.WriteFile(filepath.Join(root, "sub", "b.txt"), []byte("changed"), 0o644) }, true},
		{"a directory made", func() error { return os.MkdirAll(filepath.Join(root, "fresh"), 0o755) }, true},
		{"a file in the new directory", func() error { return os.WriteFile(filepath.Join(root, "fresh", "f"), nil, 0o644) }, true},
		{"the index written", func() error { return os.WriteFile(filepath.Join(root, ".git", "index"), []byte("i"), 0o644) }, true},
	} {
		if err := tc.change(); err != nil {
			t.Fatal(err)
		}
		ms := int64(200)
		if tc.want {
			ms = 10_000 - 1_000 // the call's own bound is 10 s
		}
		if got := wait(ms); got != tc.want {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.want)
		}
		for tc.want && wait(50) { // the rest of the same change's events
		}
	}
	// Past the bound on directories the helper refuses, and the Watcher polls.
	_, c2 := fixture(t)
	if _, _, err := c2.Call(ctx, remotefs.Request{Op: "wait", TimeoutMS: 1, Max: 1}, nil); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a wait over the directory bound: %v, want ENOSPC", err)
	}
}

// recordingStream is a helper stream whose requests are given and whose
// writes are kept, one entry per Write.
type recordingStream struct {
	in     *bytes.Reader
	writes [][]byte
}

func (s *recordingStream) Read(p []byte) (int, error) { return s.in.Read(p) }
func (s *recordingStream) Write(p []byte) (int, error) {
	s.writes = append(s.writes, slices.Clone(p))
	return len(p), nil
}
func (s *recordingStream) Close() error { return nil }

// TestReplyIsOneWrite: the helper answers a read, header and body, in one
// Write of its stream, which is one frame of the helper's session (a frame
// costs a hand-off to the session's writer and back, on both ends), even
// for a body larger than a buffer; a read past the limit has limit+1 bytes.
func TestReplyIsOneWrite(t *testing.T) {
	root := t.TempDir()
	content := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16)
	if err := os.WriteFile(filepath.Join(root, "big"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		limit int64
		want  []byte
	}{
		{"whole", 1 << 20, content},
		{"past the limit", 100, content[:101]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr, _ := json.Marshal(remotefs.Request{Op: "read", Path: "big", Limit: tc.limit})
			var req []byte
			req = binary.BigEndian.AppendUint32(req, uint32(len(hdr)))
			req = append(req, hdr...)
			req = binary.BigEndian.AppendUint32(req, 0)
			st := &recordingStream{in: bytes.NewReader(req)}
			remotefs.Serve(st, root)
			if len(st.writes) != 2 || !bytes.Equal(st.writes[0], []byte{0}) {
				t.Fatalf("the helper wrote %d times (want Ready, then the reply in one write)", len(st.writes))
			}
			reply := st.writes[1]
			n := binary.BigEndian.Uint32(reply)
			body := reply[4+n:]
			if m := binary.BigEndian.Uint32(body); !bytes.Equal(body[4:], tc.want) || int(m) != len(tc.want) {
				t.Errorf("the reply's body: %d bytes (length %d), want %d", len(body)-4, m, len(tc.want))
			}
		})
	}
}
