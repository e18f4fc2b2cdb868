package commands

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

// noTools is the toolbox of a run outside any Session: no sandbox tools
// (the MCP tools join it through newTurnTools).
type noTools struct{}

func (noTools) Tools() []llm.Tool { return nil }
func (noTools) Call(_ context.Context, name string, _ json.RawMessage) tools.Result {
	return tools.Result{Output: fmt.Sprintf("no tool %q outside a Session", name), IsError: true}
}

// quietTurn observes a run nobody streams: its record is written when it
// ends.
type quietTurn struct{}

func (quietTurn) Started(string) error                                       { return nil }
func (quietTurn) Delta(string, string)                                       {}
func (quietTurn) Step(agent.StepOutput) error                                { return nil }
func (quietTurn) ToolStarted(agent.Call) error                               { return nil }
func (quietTurn) ToolFinished(agent.Call, tools.Result, time.Duration) error { return nil }
