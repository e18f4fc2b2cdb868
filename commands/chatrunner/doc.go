// Package chatrunner is the process manager of Chat turns: one inference
// with the Chat's Agent and MCP tools, no sandbox, each to its one
// chat-turn-ended.
package chatrunner
