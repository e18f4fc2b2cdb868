// Package a2a dispatches inbound Agent-to-Agent tasks to the configured
// receivers, each task its own aggregate, and ends at start the tasks a
// stop left running.
package a2a
