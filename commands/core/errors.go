package core

import (
	"errors"

	"lathe/runtime/errs"
)

// The error classes every command returns, wrapped with %w and a message that
// names the offending field or record. They are the classes of runtime/errs,
// which the runtime's own errors belong to as well, so transport maps each
// class to one HTTP status in one place, whichever layer refused.
var (
	// ErrInvalid: the request is malformed or names an impossible value (400).
	ErrInvalid = errs.Invalid
	// ErrNotFound: the named record does not exist (404).
	ErrNotFound = errs.NotFound
	// ErrForbidden: the request names something it may not reach, such as a
	// path that resolves outside the Session root (403).
	ErrForbidden = errs.Forbidden
	// ErrConflict: the request is well-formed but conflicts with the current
	// state, such as a closed Session or a concurrent change (409).
	ErrConflict = errs.Conflict
	// ErrTooLarge: a request's content exceeds a size limit (413).
	ErrTooLarge = errs.TooLarge
	// ErrUnavailable: the daemon is shutting down or a dependency is down (503).
	ErrUnavailable = errs.Unavailable
)

// ErrEnvironmentFailed: a lifecycle command ran and the environment ended
// failed with evidence. It is an outcome, not a refusal: the Session
// returned with it is the answer.
var ErrEnvironmentFailed = errors.New("environment failed")
