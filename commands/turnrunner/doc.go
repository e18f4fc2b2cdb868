// Package turnrunner is the process manager of Session turns: it runs an
// accepted turn's Agent tool loop in the Session's sandbox under the
// daemon's context and reports each step, and the turn's one end, as
// events.
package turnrunner
