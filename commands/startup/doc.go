// Package startup is the process manager of a start: it settles the effects
// a crash left open and hands the reconcilers of the other capabilities
// their turn, once, before the daemon serves.
package startup
