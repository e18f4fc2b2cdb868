package git

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// BranchFormat is the `git for-each-ref --format` whose output
// ParseBranches reads: one ref per line, fields NUL-separated, the subject
// (which holds no newline) last.
const BranchFormat = "%(refname)%00%(symref)%00%(objectname)%00%(HEAD)%00%(upstream:short)%00%(committerdate:unix)%00%(subject)"

// BranchRef is one local or remote-tracking branch.
type BranchRef struct {
	// Name is the short name: "main", or "origin/main" for a remote one.
	Name     string    `json:"name"`
	Ref      string    `json:"ref"`
	Commit   string    `json:"commit"`
	Current  bool      `json:"current"`
	Remote   bool      `json:"remote"`
	Upstream string    `json:"upstream,omitempty"`
	Subject  string    `json:"subject"`
	Date     time.Time `json:"date"`
}

// ErrMalformedRefs: the text is not for-each-ref output in BranchFormat.
var ErrMalformedRefs = errors.New("malformed ref list")

// ParseBranches parses `git for-each-ref --format=BranchFormat refs/heads
// refs/remotes`. Symbolic refs (a remote's HEAD) are left out.
func ParseBranches(data []byte) ([]BranchRef, error) {
	out := []BranchRef{}
	for _, l := range splitLines(data) {
		f := strings.SplitN(l, "\x00", 7)
		if len(f) != 7 {
			return nil, fmt.Errorf("%w: %q has %d fields, want 7", ErrMalformedRefs, clip(l), len(f))
		}
		if f[1] != "" {
			continue
		}
		b := BranchRef{Ref: f[0], Commit: f[2], Current: f[3] == "*", Upstream: f[4], Subject: f[6]}
		var ok bool
		if b.Name, ok = strings.CutPrefix(f[0], "refs/heads/"); !ok {
			if b.Name, ok = strings.CutPrefix(f[0], "refs/remotes/"); !ok {
				return nil, fmt.Errorf("%w: %q is neither a local nor a remote branch", ErrMalformedRefs, clip(f[0]))
			}
			b.Remote = true
		}
		if b.Name == "" || (f[3] != "*" && f[3] != " ") {
			return nil, fmt.Errorf("%w: bad record %q", ErrMalformedRefs, clip(l))
		}
		if f[5] != "" {
			sec, err := strconv.ParseInt(f[5], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: bad date %q", ErrMalformedRefs, clip(f[5]))
			}
			b.Date = time.Unix(sec, 0).UTC()
		}
		out = append(out, b)
	}
	return out, nil
}
