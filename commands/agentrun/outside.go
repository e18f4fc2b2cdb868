package agentrun

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
)

// What an Agent run outside any Session (a Chat, an Automation's agent
// node, an inbound A2A task) has instead of a Session's: no sandbox tools,
// and, where nobody streams the run, an observer that records nothing.

// NoTools is the toolbox of a run outside any Session: no sandbox tools
// (the MCP tools join it through newTurnTools).
type NoTools struct{}

func (NoTools) Tools() []llm.Tool { return nil }
func (NoTools) Call(_ context.Context, name string, _ json.RawMessage) tools.Result {
	return tools.Result{Output: fmt.Sprintf("no tool %q outside a Session", name), IsError: true}
}

// QuietTurn observes a run nobody streams: its record is written when it
// ends.
type QuietTurn struct{}

func (QuietTurn) Started(string) error                                       { return nil }
func (QuietTurn) Delta(string, string)                                       {}
func (QuietTurn) Step(agent.StepOutput) error                                { return nil }
func (QuietTurn) ToolStarted(agent.Call) error                               { return nil }
func (QuietTurn) ToolFinished(agent.Call, tools.Result, time.Duration) error { return nil }
