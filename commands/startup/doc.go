// Package startup is the process manager of a start: it settles the effect
// intents a stop left open, each by the reconciler its capability handed
// in, and the merges a stop cut off, once, before the daemon serves.
package startup
