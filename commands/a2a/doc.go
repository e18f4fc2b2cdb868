// Package a2a serves the Agent-to-Agent protocol's tasks over the Agent
// runtime, each task its own aggregate.
package a2a
