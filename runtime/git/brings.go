package git

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What a sync of a remote Session would bring home (CONTRACT.md "The
// remote sandbox provider"): the commits the clone's HEAD has that the
// Workspace's branch lathe/<id> (or, before the first sync, its HEAD)
// lacks. The Workspace side names its commits on the host (Commits); the
// clone lists what it has beyond the first of them it knows (Brings), in
// one process, bounded.

// maxSubject bounds one listed commit's subject, in bytes.
const maxSubject = 200

// LogCommit is one commit a sync would bring.
type LogCommit struct {
	Commit  string `json:"commit"`
	Subject string `json:"subject"`
	Author  string `json:"author"`
	// Time is the author time, Unix seconds.
	Time int64 `json:"time"`
}

// Brought is the clone's commits beyond Base.
type Brought struct {
	// Base is the first of the bases the clone has; "" when it has none of
	// them, and then Commits is HEAD's own history.
	Base string
	// Count is every such commit; Commits the newest of them, at most the
	// bound asked for, newest first.
	Count   int
	Commits []LogCommit
}

// TransferOf is the transfer end of a repository already open.
func TransferOf(r *Repo) Transfer { return Transfer{r: r} }

// Brings lists the commits HEAD has that the first of bases (commit IDs,
// in order of preference; empty ones skipped) which the repository knows
// lacks: their count, and the newest max of them. ErrNoCommit on an
// unborn HEAD.
func (t Transfer) Brings(ctx context.Context, max int, bases ...string) (Brought, error) {
	r := t.r
	var known []string
	for _, b := range bases {
		if b == "" {
			continue
		}
		if !objectID.MatchString(b) {
			return Brought{}, fmt.Errorf("base %q is not a commit ID", clip(b))
		}
		known = append(known, b)
	}
	res, err := r.script(ctx, "brings", maxSmallOutput, nil, `head=$(git rev-parse -q --verify 'HEAD^{commit}') || exit 4
max=$1
shift
base=
for c; do
  if git cat-file -e "$c^{commit}" 2>/dev/null; then base=$c; break; fi
done
set -- "$head"
if [ -n "$base" ]; then set -- "$head" "^$base"; fi
printf '%s\n' "$base"
git rev-list --count "$@" || exit 5
git log --no-show-signature --max-count="$max" --format='tformat:%H%x00%an%x00%at%x00%s' "$@" -- || exit 5
`, append([]string{strconv.Itoa(max)}, known...)...)
	if err == nil && res.code == 4 {
		return Brought{}, ErrNoCommit
	}
	out, err := res.ok("brings", err)
	if err != nil {
		return Brought{}, err
	}
	return parseBrings(out)
}

// parseBrings reads the brings step's output: the base, the count, then
// four NUL-ended fields per commit.
func parseBrings(out []byte) (Brought, error) {
	base, rest, ok1 := bytes.Cut(out, []byte("\n"))
	count, rest, ok2 := bytes.Cut(rest, []byte("\n"))
	n, err := strconv.Atoi(string(count))
	if !ok1 || !ok2 || err != nil || (len(base) > 0 && !objectID.Match(base)) {
		return Brought{}, fmt.Errorf("the brings step printed %q", clip(string(out)))
	}
	b := Brought{Base: string(base), Count: n, Commits: []LogCommit{}}
	for _, line := range strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\x00", 4)
		if len(f) != 4 {
			return Brought{}, fmt.Errorf("the brings step's log printed %q, not four fields", clip(line))
		}
		at, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || !objectID.MatchString(f[0]) {
			return Brought{}, fmt.Errorf("the brings step's log printed %q", clip(line))
		}
		b.Commits = append(b.Commits, LogCommit{Commit: f[0], Author: text(f[1], maxSubject), Time: at, Subject: text(f[3], maxSubject)})
	}
	return b, nil
}

// text is s as valid UTF-8, cut to at most max bytes on a rune boundary.
func text(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
