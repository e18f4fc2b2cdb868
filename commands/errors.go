package commands

import "errors"

// The error classes every command returns, wrapped with %w and a message that
// names the offending field or record. transport maps each class to one HTTP
// status in one place.
var (
	// ErrInvalid: the request is malformed or names an impossible value (400).
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: the named record does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request is well-formed but conflicts with the current
	// state, such as a closed Session or a concurrent change (409).
	ErrConflict = errors.New("conflict")
	// ErrTooLarge: a request's content exceeds a size limit (413).
	ErrTooLarge = errors.New("too large")
	// ErrUnavailable: the daemon is shutting down or a dependency is down (503).
	ErrUnavailable = errors.New("unavailable")
	// ErrEnvironmentFailed: a lifecycle command ran and the environment ended
	// failed with evidence. It is an outcome, not a refusal: the Session
	// returned with it is the answer.
	ErrEnvironmentFailed = errors.New("environment failed")
)

// ErrForbidden: the request names something it may not reach, such as a
// path that resolves outside the Session root (403).
var ErrForbidden = errors.New("forbidden")
