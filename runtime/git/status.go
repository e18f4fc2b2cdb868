package git

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Status is a repository's state as `git status --porcelain=v2 -z
// --branch` reports it.
type Status struct {
	Branch  Branch
	Entries []Entry
}

// Branch is the "# branch.*" part of a status.
type Branch struct {
	// Head is the checked-out branch; empty when Detached.
	Head     string `json:"head"`
	Detached bool   `json:"detached"`
	// Commit is HEAD's commit; empty on an unborn branch (Initial).
	Commit  string `json:"commit"`
	Initial bool   `json:"initial"`
	// Upstream, Ahead and Behind are set when the branch tracks one.
	Upstream string `json:"upstream,omitempty"`
	Ahead    int    `json:"ahead"`
	Behind   int    `json:"behind"`
}

// Entry is one changed, unmerged, untracked or ignored path.
type Entry struct {
	// Kind is '1' (changed), '2' (renamed or copied), 'u' (unmerged),
	// '?' (untracked) or '!' (ignored).
	Kind byte
	// X and Y are the index and worktree states: '.' unchanged, or one of
	// M T A D R C U. Untracked and ignored entries have '?' or '!'.
	X, Y byte
	// Submodule is set when the path is a submodule ("S…" field).
	Submodule bool
	// Path is relative to the repository root, in git's bytes.
	Path string
	// OrigPath is a rename's or copy's source.
	OrigPath string
	// Score is a rename's or copy's similarity ("R100").
	Score string
}

// ErrMalformedStatus: the text is not porcelain v2 status output.
var ErrMalformedStatus = errors.New("malformed git status")

// ParseStatus parses `git status --porcelain=v2 -z --branch` output. Paths
// are the last field of their record (NUL-terminated under -z), so spaces,
// newlines and any other bytes in them come through unchanged.
func ParseStatus(data []byte) (Status, error) {
	var st Status
	bad := func(rec []byte, why string) (Status, error) {
		return Status{}, fmt.Errorf("%w: %s in record %q", ErrMalformedStatus, why, clip(string(rec)))
	}
	for len(data) > 0 {
		end := bytes.IndexByte(data, 0)
		if end < 0 {
			return bad(data, "no NUL terminator")
		}
		rec := data[:end]
		data = data[end+1:]
		if len(rec) < 2 || rec[1] != ' ' {
			return bad(rec, "no record kind")
		}
		switch rec[0] {
		case '#':
			if err := st.Branch.header(string(rec[2:])); err != nil {
				return bad(rec, err.Error())
			}
			continue
		case '?', '!':
			if len(rec) == 2 {
				return bad(rec, "empty path")
			}
			st.Entries = append(st.Entries, Entry{Kind: rec[0], X: rec[0], Y: rec[0], Path: string(rec[2:])})
			continue
		}
		// 1 XY sub mH mI mW hH hI path
		// 2 XY sub mH mI mW hH hI Xscore path\0orig
		// u XY sub m1 m2 m3 mW h1 h2 h3 path
		fields := map[byte]int{'1': 8, '2': 9, 'u': 10}[rec[0]]
		if fields == 0 {
			return bad(rec, "unknown record kind")
		}
		f := strings.SplitN(string(rec), " ", fields+1)
		if len(f) != fields+1 || f[fields] == "" {
			return bad(rec, "too few fields")
		}
		e := Entry{Kind: rec[0], Path: f[fields]}
		if len(f[1]) != 2 || !strings.ContainsRune(".MTADRCU", rune(f[1][0])) || !strings.ContainsRune(".MTADRCU", rune(f[1][1])) {
			return bad(rec, "bad XY state")
		}
		e.X, e.Y = f[1][0], f[1][1]
		switch sub := f[2]; {
		case sub == "N...":
		case len(sub) == 4 && sub[0] == 'S':
			e.Submodule = true
		default:
			return bad(rec, "bad submodule field")
		}
		if rec[0] == '2' {
			e.Score = f[8]
			if len(e.Score) < 2 || (e.Score[0] != 'R' && e.Score[0] != 'C') {
				return bad(rec, "bad rename score")
			}
			end := bytes.IndexByte(data, 0)
			if end <= 0 {
				return bad(rec, "no original path")
			}
			e.OrigPath = string(data[:end])
			data = data[end+1:]
		}
		st.Entries = append(st.Entries, e)
	}
	return st, nil
}

// header takes one "# branch.*" line; other headers (such as "# stash")
// are ignored.
func (b *Branch) header(h string) error {
	key, val, _ := strings.Cut(h, " ")
	switch key {
	case "branch.oid":
		if val == "(initial)" {
			b.Initial = true
		} else {
			b.Commit = val
		}
	case "branch.head":
		if val == "(detached)" {
			b.Detached = true
		} else {
			b.Head = val
		}
	case "branch.upstream":
		b.Upstream = val
	case "branch.ab":
		a, be, _ := strings.Cut(val, " ")
		a, okA := strings.CutPrefix(a, "+")
		be, okB := strings.CutPrefix(be, "-")
		var err1, err2 error
		b.Ahead, err1 = strconv.Atoi(a)
		b.Behind, err2 = strconv.Atoi(be)
		if !okA || !okB || err1 != nil || err2 != nil || b.Ahead < 0 || b.Behind < 0 {
			return fmt.Errorf("bad branch.ab %q", val)
		}
	}
	return nil
}

// File is one path of a status as the Git routes show it.
type File struct {
	Path     string `json:"path"`
	OrigPath string `json:"orig_path,omitempty"`
	// Staged is the index change against HEAD: "added", "modified",
	// "deleted", "renamed", "copied", "type_changed", or "" for none.
	Staged string `json:"staged,omitempty"`
	// Unstaged is the worktree change against the index: "modified",
	// "deleted", "type_changed", "untracked", or "" for none.
	Unstaged string `json:"unstaged,omitempty"`
	// Conflict is an unmerged path's two-letter state ("UU", "AA", …).
	Conflict  string `json:"conflict,omitempty"`
	Submodule bool   `json:"submodule,omitempty"`
	// LastTurn is set when the Session's last turn changed the path.
	LastTurn bool `json:"last_turn"`
}

var stateNames = map[byte]string{'M': "modified", 'T': "type_changed", 'A': "added", 'D': "deleted", 'R': "renamed", 'C': "copied"}

// File returns the entry as the routes show it.
func (e Entry) File() File {
	f := File{Path: e.Path, OrigPath: e.OrigPath, Submodule: e.Submodule}
	switch e.Kind {
	case 'u':
		f.Conflict = string([]byte{e.X, e.Y})
	case '?':
		f.Unstaged = "untracked"
	case '!':
		f.Unstaged = "ignored"
	default:
		f.Staged, f.Unstaged = stateNames[e.X], stateNames[e.Y]
	}
	return f
}

// HasUnstaged reports whether the entry's worktree differs from its index:
// a tracked change or an untracked path.
func (e Entry) HasUnstaged() bool {
	return (e.Kind == '1' || e.Kind == '2') && e.Y != '.' || e.Kind == '?'
}
