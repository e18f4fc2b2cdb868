package git

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Patches as git 2.39 prints them with diffFlags.
const (
	diffModified = "diff --git a/my file.txt b/my file.txt\nindex de98044..7be73ce 100644\n--- a/my file.txt\t\n+++ b/my file.txt\t\n" +
		"@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -10,2 +10,3 @@ func x() {\n k\n+l\n m\n"
	diffCRLF   = "diff --git a/crlf.txt b/crlf.txt\nindex 0aa0f34..a092d71 100644\n--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,2 +1,2 @@\n x\r\n-y\r\n+Y\r\n"
	diffNoEOL  = "diff --git a/noeol.txt b/noeol.txt\nindex da58862..7b7fea1 100644\n--- a/noeol.txt\n+++ b/noeol.txt\n@@ -1 +1 @@\n-no eol\n\\ No newline at end of file\n+no eol!\n\\ No newline at end of file\n"
	diffQuoted = "diff --git \"a/we\\\"ird\\tname\" \"b/we\\\"ird\\tname\"\nindex 970afeb..5a177f2 100644\n--- \"a/we\\\"ird\\tname\"\n+++ \"b/we\\\"ird\\tname\"\n@@ -1 +1,2 @@\n q\"\tz\n+m\n"
	diffNew    = "diff --git a/t.txt b/t.txt\nnew file mode 100755\nindex 0000000..45b983b\n--- /dev/null\n+++ b/t.txt\n@@ -0,0 +1,2 @@\n+hi\n+there\n"
	diffEmpty  = "diff --git a/empty b/empty\nnew file mode 100644\nindex 0000000..e69de29\n"
	diffBinary = "diff --git a/bin.dat b/bin.dat\nnew file mode 100644\nindex 0000000..bdc955b\nBinary files /dev/null and b/bin.dat differ\n"
	diffDelete = "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\nindex 45b983b..0000000\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-hi\n"
	diffRename = "diff --git a/a.txt b/b c.txt\nsimilarity index 77%\nrename from a.txt\nrename to b c.txt\nindex 0ff3bbb..c9fbe27 100644\n--- a/a.txt\n+++ b/b c.txt\t\n" +
		"@@ -2,3 +2,3 @@\n 2\n-5\n+five\n 6\n"
	diffMode = "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\nindex 1..2\n--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-echo a\n+echo b\n"
	// A removed line "-- x" prints as "--- x"; an added "++ y" as "+++ y".
	diffTricky = "diff --git a/t b/t\nindex 1..2 100644\n--- a/t\n+++ b/t\n@@ -1,3 +1,3 @@\n--- x\n+++ y\n \n-\n+z\n"
	// A type change: the file's deletion, then the symlink's creation.
	diffTypeChange = "diff --git a/l b/l\ndeleted file mode 100644\nindex 45b983b..0000000\n--- a/l\n+++ /dev/null\n@@ -1 +0,0 @@\n-hi\n" +
		"diff --git a/l b/l\nnew file mode 120000\nindex 0000000..3594e94\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
)

func TestParseDiff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		files []FileDiff // compared without the unexported fields
	}{
		{"modified, name with a space", diffModified, []FileDiff{{Hunks: []Hunk{
			{Header: "@@ -1,3 +1,3 @@", OldStart: 1, OldLines: 3, NewStart: 1, NewLines: 3, Lines: []string{" a", "-b", "+B", " c"}},
			{Header: "@@ -10,2 +10,3 @@ func x() {", OldStart: 10, OldLines: 2, NewStart: 10, NewLines: 3, Lines: []string{" k", "+l", " m"}},
		}}}},
		{"CRLF keeps its CR", diffCRLF, []FileDiff{{Hunks: []Hunk{{Header: "@@ -1,2 +1,2 @@", OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 2, Lines: []string{" x\r", "-y\r", "+Y\r"}}}}}},
		{"no newline at end", diffNoEOL, []FileDiff{{Hunks: []Hunk{{Header: "@@ -1 +1 @@", OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 1,
			Lines: []string{"-no eol", `\ No newline at end of file`, "+no eol!", `\ No newline at end of file`}}}}}},
		{"quoted name", diffQuoted, []FileDiff{{Hunks: []Hunk{{Header: "@@ -1 +1,2 @@", OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 2, Lines: []string{" q\"\tz", "+m"}}}}}},
		{"new file", diffNew, []FileDiff{{NewFile: true, FileMode: "100755", Hunks: []Hunk{{Header: "@@ -0,0 +1,2 @@", NewStart: 1, NewLines: 2, Lines: []string{"+hi", "+there"}}}}}},
		{"new empty file", diffEmpty, []FileDiff{{NewFile: true, FileMode: "100644"}}},
		{"binary", diffBinary, []FileDiff{{NewFile: true, FileMode: "100644", Binary: true}}},
		{"deleted", diffDelete, []FileDiff{{Deleted: true, FileMode: "100644", Hunks: []Hunk{{Header: "@@ -1 +0,0 @@", OldStart: 1, OldLines: 1, Lines: []string{"-hi"}}}}}},
		{"rename with an edit", diffRename, []FileDiff{{Renamed: true, From: "a.txt", To: "b c.txt", Hunks: []Hunk{{Header: "@@ -2,3 +2,3 @@", OldStart: 2, OldLines: 3, NewStart: 2, NewLines: 3, Lines: []string{" 2", "-5", "+five", " 6"}}}}}},
		{"mode change", diffMode, []FileDiff{{OldMode: "100644", NewMode: "100755", Hunks: []Hunk{{Header: "@@ -1 +1 @@", OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 1, Lines: []string{"-echo a", "+echo b"}}}}}},
		{"lines that look like headers", diffTricky, []FileDiff{{Hunks: []Hunk{{Header: "@@ -1,3 +1,3 @@", OldStart: 1, OldLines: 3, NewStart: 1, NewLines: 3, Lines: []string{"--- x", "+++ y", " ", "-", "+z"}}}}}},
		{"type change", diffTypeChange, []FileDiff{
			{Deleted: true, FileMode: "100644", Hunks: []Hunk{{Header: "@@ -1 +0,0 @@", OldStart: 1, OldLines: 1, Lines: []string{"-hi"}}}},
			{NewFile: true, FileMode: "120000", Hunks: []Hunk{{Header: "@@ -0,0 +1 @@", NewStart: 1, NewLines: 1, Lines: []string{"+/etc/passwd", `\ No newline at end of file`}}}},
		}},
		{"two files", diffCRLF + diffDelete, []FileDiff{
			{Hunks: []Hunk{{Header: "@@ -1,2 +1,2 @@", OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 2, Lines: []string{" x\r", "-y\r", "+Y\r"}}}},
			{Deleted: true, FileMode: "100644", Hunks: []Hunk{{Header: "@@ -1 +0,0 @@", OldStart: 1, OldLines: 1, Lines: []string{"-hi"}}}},
		}},
		{"blank context line (diff.suppressBlankEmpty)", "diff --git a/t b/t\n--- a/t\n+++ b/t\n@@ -1,2 +1,2 @@\n\n-a\n+b\n",
			[]FileDiff{{Hunks: []Hunk{{Header: "@@ -1,2 +1,2 @@", OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 2, Lines: []string{"", "-a", "+b"}}}}}},
		{"empty input", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDiff([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i].gitLine, got[i].minus, got[i].plus = "", "", ""
			}
			if !reflect.DeepEqual(got, tc.files) {
				t.Errorf("got  %+v\nwant %+v", got, tc.files)
			}
		})
	}
}

func TestParseDiffRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, err string }{
		{"not a diff", "hello\n", `not a "diff --git" header`},
		{"short hunk", "diff --git a/t b/t\n--- a/t\n+++ b/t\n@@ -1,3 +1,3 @@\n a\n", "ends early"},
		{"context beyond the counts", "diff --git a/t b/t\n--- a/t\n+++ b/t\n@@ -1,0 +1 @@\n a\n", "more lines than its header counts"},
		{"a line after the counts", "diff --git a/t b/t\n--- a/t\n+++ b/t\n@@ -1 +1 @@\n a\n+b\n", `line 6 is "+b"`},
		{"created and deleted", "diff --git a/t b/t\nnew file mode 100644\ndeleted file mode 100644\n", "contradicts itself"},
		{"junk in a hunk", "diff --git a/t b/t\n--- a/t\n+++ b/t\n@@ -1 +1 @@\n*a\n", "not context"},
		{"bad header", "diff --git a/t b/t\n--- a/t\n+++ b/t\n@@ -x +1 @@\n a\n", "malformed hunk header"},
		{"negative count", "diff --git a/t b/t\n--- a/t\n+++ b/t\n@@ -1,-1 +1 @@\n a\n", "malformed hunk header"},
		{"hunk without names", "diff --git a/t b/t\n@@ -1 +1 @@\n a\n", `without "---"`},
		{"unknown header", "diff --git a/t b/t\nwhatever\n", "unknown extended header"},
		{"text after a hunk", diffCRLF + "trailing\n", `not a "diff --git" header`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDiff([]byte(tc.in))
			if !errors.Is(err, ErrMalformedDiff) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestPatch(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		file, hunk int
		want       string
	}{
		{"second hunk of a modification keeps the tab", diffModified, 0, 1,
			"diff --git a/my file.txt b/my file.txt\n--- a/my file.txt\t\n+++ b/my file.txt\t\n@@ -10,2 +10,3 @@ func x() {\n k\n+l\n m\n"},
		{"CRLF bytes survive", diffCRLF, 0, 0, "diff --git a/crlf.txt b/crlf.txt\n--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,2 +1,2 @@\n x\r\n-y\r\n+Y\r\n"},
		{"no-newline marks survive", diffNoEOL, 0, 0, "diff --git a/noeol.txt b/noeol.txt\n--- a/noeol.txt\n+++ b/noeol.txt\n@@ -1 +1 @@\n-no eol\n\\ No newline at end of file\n+no eol!\n\\ No newline at end of file\n"},
		{"quoted names stay quoted", diffQuoted, 0, 0, "diff --git \"a/we\\\"ird\\tname\" \"b/we\\\"ird\\tname\"\n--- \"a/we\\\"ird\\tname\"\n+++ \"b/we\\\"ird\\tname\"\n@@ -1 +1,2 @@\n q\"\tz\n+m\n"},
		{"new file keeps its creation", diffNew, 0, 0, "diff --git a/t.txt b/t.txt\nnew file mode 100755\n--- /dev/null\n+++ b/t.txt\n@@ -0,0 +1,2 @@\n+hi\n+there\n"},
		{"deletion keeps its deletion", diffDelete, 0, 0, "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-hi\n"},
		{"rename becomes an edit of the new path", diffRename, 0, 0, "diff --git a/b c.txt b/b c.txt\n--- a/b c.txt\t\n+++ b/b c.txt\t\n@@ -2,3 +2,3 @@\n 2\n-5\n+five\n 6\n"},
		{"mode change is left out", diffMode, 0, 0, "diff --git a/run.sh b/run.sh\n--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-echo a\n+echo b\n"},
		{"type change: the creation alone", diffTypeChange, 1, 0, "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := ParseDiff([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := files[tc.file].Patch(tc.hunk)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("patch\n%q\nwant\n%q", got, tc.want)
			}
			assertRoundTrip(t, files[tc.file], tc.hunk, got)
		})
	}
	files, _ := ParseDiff([]byte(diffBinary + diffModified))
	if _, err := files[0].Patch(0); !errors.Is(err, ErrBinary) {
		t.Errorf("binary patch: %v", err)
	}
	if _, err := files[1].Patch(2); !errors.Is(err, ErrNoHunk) {
		t.Errorf("hunk out of range: %v", err)
	}
	if _, err := files[1].Patch(-1); !errors.Is(err, ErrNoHunk) {
		t.Errorf("negative hunk: %v", err)
	}
}

// assertRoundTrip checks that a one-hunk patch parses back to that hunk.
func assertRoundTrip(t *testing.T, fd FileDiff, i int, patch []byte) {
	t.Helper()
	back, err := ParseDiff(patch)
	if err != nil {
		t.Fatalf("patch of hunk %d does not parse: %v\n%q", i, err, patch)
	}
	if len(back) != 1 || len(back[0].Hunks) != 1 || !reflect.DeepEqual(back[0].Hunks[0], fd.Hunks[i]) {
		t.Fatalf("patch of hunk %d parses to %+v, want %+v", i, back, fd.Hunks[i])
	}
	if back[0].NewFile != fd.NewFile || back[0].Deleted != fd.Deleted {
		t.Fatalf("patch of hunk %d lost its creation or deletion", i)
	}
}

func TestHunkAt(t *testing.T) {
	files, err := ParseDiff([]byte(diffTypeChange))
	if err != nil {
		t.Fatal(err)
	}
	c := Changes{Path: "l", Files: files}
	for i, want := range []string{"@@ -1 +0,0 @@", "@@ -0,0 +1 @@"} {
		fd, j, err := c.HunkAt(i)
		if err != nil || fd.Hunks[j].Header != want {
			t.Errorf("hunk %d = %v, %v; want %q", i, fd.Hunks, err, want)
		}
	}
	for _, i := range []int{-1, 2} {
		if _, _, err := c.HunkAt(i); !errors.Is(err, ErrNoHunk) || !strings.Contains(err.Error(), "has 2 hunks") {
			t.Errorf("hunk %d: %v", i, err)
		}
	}
	bin, _ := ParseDiff([]byte(diffBinary))
	if _, _, err := (Changes{Files: bin}).HunkAt(0); !errors.Is(err, ErrBinary) {
		t.Errorf("binary: %v", err)
	}
}

func FuzzParseDiff(f *testing.F) {
	for _, s := range []string{diffModified, diffCRLF, diffNoEOL, diffQuoted, diffNew, diffEmpty, diffBinary, diffDelete, diffRename, diffMode, diffTricky, diffTypeChange,
		"diff --git a/x b/x\nGIT binary patch\nliteral 5\nMcmZ?d\n\nliteral 0\nHcmV?d00001\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := ParseDiff(data)
		if err != nil {
			return
		}
		for _, fd := range files {
			for i := range fd.Hunks {
				patch, err := fd.Patch(i)
				if err != nil {
					if !errors.Is(err, ErrMalformedDiff) {
						t.Fatalf("patch of hunk %d: %v", i, err)
					}
					continue
				}
				assertRoundTrip(t, fd, i, patch)
			}
		}
	})
}
