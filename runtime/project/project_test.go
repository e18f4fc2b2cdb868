package project

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tailscale/hujson"
)

// tree creates files under root. A key ending in "/" is a directory, a value
// starting with "->" is a symlink to that target, and anything else is a
// file with that content.
func tree(t *testing.T, root string, entries map[string]string) {
	t.Helper()
	for name, v := range entries {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(path, 0o755)
		case strings.HasPrefix(v, "->"):
			err = os.Symlink(strings.TrimPrefix(v, "->"), path)
		default:
			err = os.WriteFile(path, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// tempDir returns a canonical temporary directory.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestListDirs(t *testing.T) {
	root := tempDir(t)
	tree(t, root, map[string]string{
		"b/":             "",
		"a/":             "",
		"C/":             "",
		".hidden/":       "",
		"file.txt":       "x",
		"repo/.git/":     "",
		"worktree/.git":  "gitdir: /elsewhere",
		"real/":          "",
		"link":           "->real",
		"linked-outside": "->" + t.TempDir(),
		"dangling":       "->missing",
		"filelink":       "->file.txt",
		"real/inner/":    "",
	})
	outside, err := filepath.EvalSymlinks(filepath.Join(root, "linked-outside"))
	if err != nil {
		t.Fatal(err)
	}
	at := func(name string) string { return filepath.Join(root, name) }
	visible := []Entry{
		{Name: "C", Path: at("C")},
		{Name: "a", Path: at("a")},
		{Name: "b", Path: at("b")},
		{Name: "link", Path: at("real")},
		{Name: "linked-outside", Path: outside},
		{Name: "real", Path: at("real")},
		{Name: "repo", Path: at("repo"), IsGitRepo: true},
		{Name: "worktree", Path: at("worktree"), IsGitRepo: true},
	}

	tests := []struct {
		name    string
		dir     string
		hidden  bool
		want    Listing
		wantErr error
	}{
		{name: "sorted, dot directories hidden", dir: root, want: Listing{Path: root, Parent: filepath.Dir(root), Entries: visible}},
		{name: "dot directories shown", dir: root, hidden: true, want: Listing{Path: root, Parent: filepath.Dir(root),
			Entries: append([]Entry{{Name: ".hidden", Path: at(".hidden")}}, visible...)}},
		{name: "unclean path", dir: root + "/a/../", want: Listing{Path: root, Parent: filepath.Dir(root), Entries: visible}},
		{name: "through a symlink", dir: at("link"), want: Listing{Path: at("real"), Parent: root,
			Entries: []Entry{{Name: "inner", Path: at("real/inner")}}}},
		{name: "empty", dir: at("a"), want: Listing{Path: at("a"), Parent: root, Entries: []Entry{}}},
		{name: "missing", dir: at("missing"), wantErr: ErrNotFound},
		{name: "below a file", dir: at("file.txt/x"), wantErr: ErrNotFound},
		{name: "dangling symlink", dir: at("dangling"), wantErr: ErrNotFound},
		{name: "file", dir: at("file.txt"), wantErr: ErrNotDirectory},
		{name: "symlink to file", dir: at("filelink"), wantErr: ErrNotDirectory},
		{name: "relative", dir: "a/b", wantErr: ErrInvalid},
		{name: "tilde", dir: "~", wantErr: ErrInvalid},
		{name: "tilde path", dir: "~/src", wantErr: ErrInvalid},
		{name: "NUL", dir: root + "\x00", wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ListDirs(tt.dir, tt.hidden)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ListDirs(%q) error = %v, want %v", tt.dir, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tt.dir)) {
					t.Errorf("error %q does not name the path", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ListDirs(%q) =\n%+v\nwant\n%+v", tt.dir, got, tt.want)
			}
		})
	}
}

func TestListDirsHome(t *testing.T) {
	home := tempDir(t)
	tree(t, home, map[string]string{"src/": ""})
	t.Setenv("HOME", home)
	got, err := ListDirs("", false)
	if err != nil {
		t.Fatal(err)
	}
	want := Listing{Path: home, Parent: filepath.Dir(home), Entries: []Entry{{Name: "src", Path: filepath.Join(home, "src")}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListDirs(\"\") = %+v, want %+v", got, want)
	}
}

func TestListDirsRoot(t *testing.T) {
	got, err := ListDirs("/", false)
	if err != nil {
		t.Fatal(err)
	}
	if got.Path != "/" || got.Parent != "" {
		t.Errorf("ListDirs(\"/\") path %q parent %q, want \"/\" and none", got.Path, got.Parent)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"parent"`) {
		t.Errorf("JSON %s has a parent at /", b)
	}
}

func TestParseDevcontainer(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		image     string
		command   string
		warnings  []string // substrings, one per warning, in order
		wantError bool
	}{
		{name: "JSONC", in: `{
			// The image.
			"image": "mcr.microsoft.com/devcontainers/go:1", /* trailing comma next */
			"postCreateCommand": "go mod download",
		}`, image: "mcr.microsoft.com/devcontainers/go:1", command: "go mod download"},
		{name: "array command", in: `{"image": "i", "postCreateCommand": ["sh", "-c", "echo 'hi' && make", "", "a/b-c.d"]}`,
			image: "i", command: `sh -c 'echo '\''hi'\'' && make' '' a/b-c.d`},
		{name: "empty array command", in: `{"image": "i", "postCreateCommand": []}`, image: "i"},
		{name: "object command, sorted keys", in: `{"image": "i", "postCreateCommand": {"b": "make build", "a": ["npm", "ci"], "c": ""}}`,
			image: "i", command: "npm ci && make build"},
		{name: "object command with a bad value", in: `{"image": "i", "postCreateCommand": {"a": "make", "b": 3}}`,
			image: "i", warnings: []string{`"postCreateCommand" is not`}},
		{name: "number command", in: `{"image": "i", "postCreateCommand": 3}`, image: "i", warnings: []string{`"postCreateCommand" is not`}},
		{name: "array of numbers", in: `{"image": "i", "postCreateCommand": [1, 2]}`, image: "i", warnings: []string{`"postCreateCommand" is not`}},
		{name: "null command", in: `{"image": "i", "postCreateCommand": null}`, image: "i"},
		{name: "build instead of image", in: `{"build": {"dockerfile": "Dockerfile"}, "postCreateCommand": "make"}`,
			command: "make", warnings: []string{`only image-based devcontainers are supported; "build" ignored`}},
		{name: "dockerFile and compose", in: `{"dockerFile": "Dockerfile", "dockerComposeFile": "c.yml"}`,
			warnings: []string{`"dockerFile", "dockerComposeFile" ignored`}},
		{name: "no image", in: `{}`, warnings: []string{`no "image"`}},
		{name: "empty image", in: `{"image": ""}`, warnings: []string{`no "image"`}},
		{name: "image not a string", in: `{"image": 7}`, warnings: []string{`"image" is not a string`, `no "image"`}},
		{name: "keys are case-sensitive", in: `{"Image": "i"}`, warnings: []string{`no "image"`}},
		{name: "other lifecycle commands", in: `{"image": "i", "onCreateCommand": "a", "postStartCommand": ["b"]}`,
			image: "i", warnings: []string{`"onCreateCommand" is not supported`, `"postStartCommand" is not supported`}},
		{name: "malformed", in: `{"image": "i"`, wantError: true},
		{name: "comment unterminated", in: `{"image": "i"} /*`, wantError: true},
		{name: "empty", in: ``, wantError: true},
		{name: "array", in: `[]`, wantError: true},
		{name: "null", in: `null`, wantError: true},
		{name: "string", in: `"image"`, wantError: true},
		{name: "too deep", in: `{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, wantError: true},
		{name: "brackets in strings and comments do not nest", in: `{"image": "` + strings.Repeat("[", 200) + `" // ` + strings.Repeat("{", 200) + "\n}",
			image: strings.Repeat("[", 200)},
		{name: "too large", in: `{"image": "` + strings.Repeat("x", maxDevcontainerSize) + `"}`, wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDevcontainer([]byte(tt.in))
			if tt.wantError {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Image != tt.image || got.PostCreateCommand != tt.command || got.Path != "" {
				t.Errorf("got image %q command %q path %q, want image %q command %q", got.Image, got.PostCreateCommand, got.Path, tt.image, tt.command)
			}
			if len(got.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings = %q, want %d matching %q", got.Warnings, len(tt.warnings), tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.Contains(got.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got.Warnings[i], w)
				}
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":               "''",
		"make":           "make",
		"--flag=a,b:c@1": "--flag=a,b:c@1",
		"two words":      "'two words'",
		"it's":           `'it'\''s'`,
		"$HOME":          `'$HOME'`,
		"a\nb":           "'a\nb'",
		"é":              "'é'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProbe(t *testing.T) {
	big := "a" + strings.Repeat("é", maxGuidanceSize) // the cap falls inside an "é"
	tests := []struct {
		name    string
		files   map[string]string
		dir     string // relative to the temporary root
		check   func(t *testing.T, root string, p Project)
		wantErr error
		errName string // a path the error must name, relative to the root
	}{
		{name: "plain directory", files: map[string]string{"p/": ""}, dir: "p", check: func(t *testing.T, root string, p Project) {
			want := Project{Path: filepath.Join(root, "p"), Guidance: []Guidance{}, DetectedSetup: []SetupCandidate{}}
			if got := withoutOuterGuidance(p, root); !reflect.DeepEqual(got, want) {
				t.Errorf("Probe = %+v, want %+v", got, want)
			}
			b, _ := json.Marshal(want)
			if s := string(b); !strings.Contains(s, `"devcontainer":null`) || !strings.Contains(s, `"detected_setup":[]`) {
				t.Errorf("JSON %s lacks a null devcontainer or an empty detected_setup", s)
			}
		}},
		{name: "git repository through a symlink", files: map[string]string{"p/.git/": "", "l": "->p"}, dir: "l", check: func(t *testing.T, root string, p Project) {
			if p.Path != filepath.Join(root, "p") || !p.IsGitRepo {
				t.Errorf("Probe path %q git %v, want %q and true", p.Path, p.IsGitRepo, filepath.Join(root, "p"))
			}
		}},
		{name: ".devcontainer directory first", files: map[string]string{
			"p/.devcontainer/devcontainer.json": `{"image": "first", // comment
				"postCreateCommand": ["make", "setup"],}`,
			"p/.devcontainer.json": `{"image": "second"}`,
		}, dir: "p", check: func(t *testing.T, root string, p Project) {
			want := &Devcontainer{Path: filepath.Join(root, "p/.devcontainer/devcontainer.json"), Image: "first", PostCreateCommand: "make setup"}
			if !reflect.DeepEqual(p.Devcontainer, want) {
				t.Errorf("Devcontainer = %+v, want %+v", p.Devcontainer, want)
			}
		}},
		{name: ".devcontainer.json", files: map[string]string{
			"p/.devcontainer/":     "",
			"p/.devcontainer.json": `{"build": {}, "postCreateCommand": {"x": "a", "y": "b"}}`,
		}, dir: "p", check: func(t *testing.T, root string, p Project) {
			dc := p.Devcontainer
			if dc == nil || dc.Path != filepath.Join(root, "p/.devcontainer.json") || dc.Image != "" || dc.PostCreateCommand != "a && b" || len(dc.Warnings) != 1 {
				t.Errorf("Devcontainer = %+v", dc)
			}
		}},
		{name: "malformed devcontainer", files: map[string]string{"p/.devcontainer.json": `{"image": }`}, dir: "p",
			wantErr: ErrInvalid, errName: "p/.devcontainer.json"},
		{name: "devcontainer too large", files: map[string]string{
			"p/.devcontainer/devcontainer.json": strings.Repeat(" ", maxDevcontainerSize+1) + "{}",
		}, dir: "p", wantErr: ErrInvalid, errName: "p/.devcontainer/devcontainer.json"},
		{name: "guidance from ancestors", files: map[string]string{
			"LATHE.md":         "root",
			"a/LATHE.md":       big,
			"a/b/":             "",
			"a/b/c/LATHE.md":   "own",
			"a/b/c/d/LATHE.md": "below, not read",
			"a/b/LATHE.md/":    "", // a directory, not a file
		}, dir: "a/b/c", check: func(t *testing.T, root string, p Project) {
			got := withoutOuterGuidance(p, root).Guidance
			if len(got) != 3 {
				t.Fatalf("guidance = %+v, want 3 files", got)
			}
			truncated := big[:maxGuidanceSize-1] // the partial "é" is dropped
			want := []Guidance{
				{Path: filepath.Join(root, "LATHE.md"), Content: "root"},
				{Path: filepath.Join(root, "a/LATHE.md"), Content: truncated, Truncated: true},
				{Path: filepath.Join(root, "a/b/c/LATHE.md"), Content: "own"},
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("guidance paths %q %q %q, truncated %v", got[0].Path, got[1].Path, got[2].Path, got[1].Truncated)
			}
			if !utf8.ValidString(got[1].Content) {
				t.Error("truncated guidance is not valid UTF-8")
			}
		}},
		{name: "symlinked guidance is ignored", files: map[string]string{
			"x/LATHE.md": "secret",
			"p/LATHE.md": "->../x/LATHE.md",
		}, dir: "p", check: func(t *testing.T, root string, p Project) {
			if got := withoutOuterGuidance(p, root).Guidance; len(got) != 0 {
				t.Errorf("guidance = %+v, want none", got)
			}
		}},
		{name: "lockfiles", files: map[string]string{
			"p/uv.lock":           "",
			"p/package-lock.json": "{}",
			"p/go.sum":            "",
			"p/yarn.lock/":        "", // a directory is not a lockfile
			"p/sub/Cargo.lock":    "", // only the directory itself counts
		}, dir: "p", check: func(t *testing.T, root string, p Project) {
			want := []SetupCandidate{
				{Command: "npm ci", Source: "lockfile", File: "package-lock.json"},
				{Command: "go mod download", Source: "lockfile", File: "go.sum"},
				{Command: "uv sync", Source: "lockfile", File: "uv.lock"},
			}
			if !reflect.DeepEqual(p.DetectedSetup, want) {
				t.Errorf("DetectedSetup = %+v, want %+v", p.DetectedSetup, want)
			}
		}},
		{name: "missing", dir: "missing", wantErr: ErrNotFound, errName: "missing"},
		{name: "file", files: map[string]string{"f": ""}, dir: "f", wantErr: ErrNotDirectory, errName: "f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tempDir(t)
			tree(t, root, tt.files)
			p, err := Probe(filepath.Join(root, tt.dir))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Probe error = %v, want %v", err, tt.wantErr)
				}
				if name := strconv.Quote(filepath.Join(root, tt.errName)); !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not name %s", err, name)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, root, p)
		})
	}
}

func TestProbeInvalidPath(t *testing.T) {
	for _, dir := range []string{"", "rel", "~", "~/x", "/tmp\x00"} {
		if _, err := Probe(dir); !errors.Is(err, ErrInvalid) {
			t.Errorf("Probe(%q) error = %v, want ErrInvalid", dir, err)
		}
	}
}

// withoutOuterGuidance drops guidance found above root, which the test does
// not control.
func withoutOuterGuidance(p Project, root string) Project {
	var kept []Guidance
	for _, g := range p.Guidance {
		if strings.HasPrefix(g.Path, root+"/") {
			kept = append(kept, g)
		}
	}
	p.Guidance = append([]Guidance{}, kept...)
	return p
}

func FuzzParseDevcontainer(f *testing.F) {
	for _, seed := range []string{
		`{"image": "i", "postCreateCommand": "make"}`,
		"{\n// c\n\"image\": \"i\", /* c */ \"postCreateCommand\": [\"a b\", \"it's\",],\n}",
		`{"image": "i", "postCreateCommand": {"b": "x", "a": ["y", ""]}}`,
		`{"build": {"dockerfile": "D"}, "postCreateCommand": 1}`,
		`{"image": null, "onCreateCommand": "x"}`,
		`{"a": [[[{"b": "]]]"}]]]}`,
		`[`, `null`, `"s"`, `{"image": "\u0000\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// nesting must never undercount what hujson descends into, or the
		// guard against stack exhaustion has a hole.
		if v, err := hujson.Parse(data); err == nil {
			if got, want := nesting(data), depthOf(v); got < want {
				t.Fatalf("nesting = %d, hujson depth %d", got, want)
			}
		}
		dc, err := ParseDevcontainer(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if dc.Path != "" {
			t.Errorf("Path = %q, want empty", dc.Path)
		}
		if dc.Image == "" && len(dc.Warnings) == 0 {
			t.Error("no image and no warning")
		}
		for _, s := range append([]string{dc.Image, dc.PostCreateCommand}, dc.Warnings...) {
			if !utf8.ValidString(s) {
				t.Errorf("invalid UTF-8 %q", s)
			}
		}
		if again, _ := ParseDevcontainer(data); !reflect.DeepEqual(again, dc) {
			t.Errorf("not deterministic: %+v then %+v", dc, again)
		}
		// The result, written back as a devcontainer.json, parses to itself.
		fields := map[string]string{"postCreateCommand": dc.PostCreateCommand}
		if dc.Image != "" {
			fields["image"] = dc.Image
		}
		b, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := ParseDevcontainer(b)
		if err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if rt.Image != dc.Image || rt.PostCreateCommand != dc.PostCreateCommand {
			t.Errorf("round trip of %s = %+v, want %+v", b, rt, dc)
		}
	})
}

// depthOf returns how deeply arrays and objects nest in v.
func depthOf(v hujson.Value) int {
	d := 0
	switch v := v.Value.(type) {
	case *hujson.Object:
		for _, m := range v.Members {
			d = max(d, depthOf(m.Value))
		}
		d++
	case *hujson.Array:
		for _, e := range v.Elements {
			d = max(d, depthOf(e))
		}
		d++
	}
	return d
}
