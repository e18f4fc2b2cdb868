package commands

import (
	"fmt"

	"lathe/runtime/confine"
)

// MaxPathBytes is Linux's PATH_MAX, the longest client path accepted
// (confine's bound).
const MaxPathBytes = confine.MaxPathBytes

// CleanPath validates a client path relative to the Session root with the
// one confinement rule that the file commands, git and the Agent's tools
// share (runtime/confine.Rel: no absolute path, no ".." element, no NUL, at
// most PATH_MAX bytes) and returns it clean; "" and "." come back as ".". A
// refusal is ErrInvalid.
func CleanPath(p string) (string, error) {
	rel, err := confine.Rel(p)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return rel, nil
}
