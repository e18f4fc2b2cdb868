// Package acprunner is the process manager of the outside Agents' turns
// (kind acp): Claude Code, Codex, opencode or Gemini CLI over the Agent
// Client Protocol, one agent process per Session inside its sandbox. A
// turn is one session/prompt; its updates become the same frames and
// records as the built-in loop's (through the turn's observer), its
// permission requests go through the one approval policy, and its model
// calls reach the provider only through Lathe's gateway (runtime/gateway,
// carried into the sandbox by runtime/acp/relay), metered there as the
// turn's steps.
package acprunner
