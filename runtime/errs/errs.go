// Package errs holds the error classes every layer shares: a refusal of
// the request, a missing record, a forbidden reach, a conflict with the
// state, content over a limit, an unavailable dependency, a spending
// limit, and a failure of an upstream model provider. Each runtime package
// defines its own sentinels in one of these classes (New), commands wrap
// their refusals around them with %w, and transport maps each class to one
// HTTP status, in one place (transport/errors.go), with one case a class.
//
// It imports nothing of the project: every layer may import it.
package errs

import (
	"errors"
	"strings"
)

// The classes. Test with errors.Is; each is the root of every error of its
// class, whatever package made it.
var (
	// Invalid: the request is malformed or names an impossible value (400).
	Invalid = errors.New("invalid request")
	// NotFound: the named record does not exist (404).
	NotFound = errors.New("not found")
	// Forbidden: the request names something it may not reach, such as a
	// path that resolves outside the Session root (403).
	Forbidden = errors.New("forbidden")
	// Conflict: the request is well formed but conflicts with the current
	// state, such as a closed Session or a concurrent change (409).
	Conflict = errors.New("conflict")
	// TooLarge: a request's content exceeds a size limit (413).
	TooLarge = errors.New("too large")
	// Unavailable: the daemon is shutting down or a dependency is down (503).
	Unavailable = errors.New("unavailable")
	// OverBudget: an Agent's spending limit refused the work (402): the
	// request was fine and the provider may have been paid.
	OverBudget = errors.New("budget exceeded")
	// Upstream: a model provider failed the inference (502).
	Upstream = errors.New("provider failed")
)

// Classes lists every class.
var Classes = []error{Invalid, NotFound, Forbidden, Conflict, TooLarge, Unavailable, OverBudget, Upstream}

// New returns a sentinel of class with its own message: errors.Is matches
// both the sentinel and its class, and its text is msg alone.
func New(class error, msg string) error { return &sentinel{msg: msg, class: class} }

type sentinel struct {
	msg   string
	class error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.class }

// Reason is err's message without the name of the class it leads with
// ("not found: session x" → "session x"), for a reply whose status or code
// already says the class.
func Reason(err error) string {
	msg := err.Error()
	for _, class := range []error{Invalid, NotFound, Forbidden, Conflict, TooLarge, Unavailable} {
		if rest, ok := strings.CutPrefix(msg, class.Error()+": "); ok {
			return rest
		}
	}
	return msg
}
