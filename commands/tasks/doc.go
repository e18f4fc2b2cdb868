// Package tasks starts, stops and reconciles a Session's long-running tasks
// (terminal processes), each start a bracketed effect whose processes a
// crash leaves are killed at the next start.
package tasks
