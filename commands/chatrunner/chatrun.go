package chatrunner

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"lathe/commands/agentrun"
	"lathe/commands/attachments"
	"lathe/commands/chats"
	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// ChatRunner runs the Chat turns begun here: one inference path with the
// Chat's Agent and its MCP tools, no sandbox, each to its one
// chat-turn-ended.
type ChatRunner struct{ *core.Core }

// Start runs a begun turn in its own goroutine, under the daemon's turn
// context, releasing its run when it ends.
func (s *ChatRunner) Start(c projections.Chat, turnID, content string, files []projections.SharedFile, run *core.TurnRun) {
	go func() {
		defer s.Turns.Release(chats.ChatRunKey(c.ID), turnID, run)
		s.run(s.Turns.Ctx, c, turnID, content, files, run.Stop)
	}()
}

// run runs a begun turn to its one chat-turn-ended, publishing each step
// as a live delta (events.DeltaChat*) and its end once that is committed.
func (s *ChatRunner) run(ctx context.Context, c projections.Chat, turnID, content string, files []projections.SharedFile, stop <-chan struct{}) {
	obs := &chatObserver{s: s.Core, chatID: c.ID, turnID: turnID, agent: c.AgentID, clock: agentrun.InferenceClock{Agent: c.AgentID}}
	history := chatHistory(c.Messages[:len(c.Messages)-1])
	input := content
	if len(files) > 0 {
		var b strings.Builder
		b.WriteString(content)
		for _, f := range files {
			text, ok, err := s.sharedText(f)
			attachments.WriteAttachment(&b, f.Name, f.ContentType, f.Size, text, ok, err)
		}
		input = b.String()
	}
	rh, done := agentrun.ChatHooks(s.Core, c.ID, turnID, c.AgentID, len(history) == 0) // commands/agentrun/hooks.go
	defer done()
	input, err := rh.Prompt(ctx, input)
	res := agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}
	if err == nil {
		res = s.Opts.Runtime.RunTurn(ctx, agent.TurnRequest{
			AgentID: c.AgentID, Model: c.ModelOverride, System: c.SystemOverride, History: history, Input: input,
			Tools: rh.SandboxlessTools(core.ApprovalRequest{Run: chats.ChatRunKey(c.ID), TurnID: turnID, AgentID: c.AgentID}, stop),
			Stop:  stop, MaxSteps: s.Opts.Turns.MaxSteps, StallTimeout: s.Opts.Turns.StallTimeout,
		}, obs)
		rh.Stop(ctx)
	}
	if res.Err != nil && ctx.Err() != nil {
		res.Err = context.Cause(ctx)
	}
	end := events.ChatEnd{Outcome: events.ChatError}
	reply := obs.text
	switch res.Outcome {
	case agent.OutcomeDone:
		end.Outcome, reply = events.ChatDone, res.Output
	case agent.OutcomeCancelled:
		end.Outcome, end.Error = events.ChatStopped, events.ClipHookOutput(res.StopReason) // a hook's, if one ended it
	default:
		end.Error = "the turn failed"
		if res.Err != nil {
			end.Error = res.Err.Error()
		}
	}
	tokens := res.Usage
	end.Usage = tokens.View()
	ev := events.ChatTurnEnded{TurnID: turnID, Outcome: end.Outcome, Content: events.NewText(reply), Reasoning: events.NewText(obs.reasoning),
		Error: end.Error, Refused: agentrun.RefusedPrompt(res.Err), Tokens: tokens, Inferences: obs.clock.Done}
	if reply != "" || end.Outcome == events.ChatDone {
		ev.MessageID = ulid.Make().String()
	}
	// The journal may be closing under a shutdown: then the next start's
	// ReconcileChats ends the turn instead.
	if err := s.Append(context.Background(), []journal.Event{events.New(c.ID, ev)}); err != nil {
		s.Log.Warn("end chat turn", "chat", c.ID, "turn", turnID, "err", err)
		if end.Outcome != events.ChatError {
			end.Outcome, end.Error = events.ChatError, "the reply could not be recorded: "+err.Error()
		}
	}
	obs.publish(events.LiveDelta{Kind: events.DeltaChatEnd, ChatEnd: &end})
}

// chatHistory turns a Chat's messages into the model's conversation. A
// message a hook refused is left out: it never reaches a model.
func chatHistory(msgs []projections.ChatMessage) []llm.Message {
	out := make([]llm.Message, 0, len(msgs))
	for _, m := range msgs {
		text := m.Content.String()
		if text == "" || m.Refused {
			continue
		}
		role := llm.RoleUser
		if m.Role == events.RoleAssistant {
			role = llm.RoleAssistant
		}
		out = append(out, llm.Message{Role: role, Text: text})
	}
	return out
}

// chatObserver publishes a running Chat turn's steps as live deltas and
// journals its tool calls. text and reasoning are the last step's that had
// any: the reply so far.
type chatObserver struct {
	s                     *core.Core
	chatID, turnID, agent string
	text, reasoning       string
	clock                 agentrun.InferenceClock
}

// maxLiveToolField bounds a tool call's arguments and result in its live
// delta, well under a NATS message; the journaled chat-tool-called has them
// whole.
const maxLiveToolField = 1 << 20

// publish publishes one step of the turn. A delta that cannot be published
// costs its frame only: the turn's record has the reply.
func (o *chatObserver) publish(d events.LiveDelta) {
	if o.s.Opts.Live == nil {
		return
	}
	d.Chat, d.TurnID, d.Agent = o.chatID, o.turnID, o.agent
	if err := o.s.Opts.Live.PublishLive(d); err != nil {
		o.s.Log.Error("publish chat delta", "chat", o.chatID, "turn", o.turnID, "kind", d.Kind, "err", err)
	}
}

func (o *chatObserver) Started(string) error {
	o.clock.Ask()
	o.publish(events.LiveDelta{Kind: events.DeltaChatStart})
	return nil
}

func (o *chatObserver) Delta(kind, text string) {
	o.clock.Delta()
	k := events.DeltaChatToken
	if kind == agent.DeltaReasoning {
		k = events.DeltaChatReasoning
	}
	for text != "" {
		n := agentrun.LiveCut(text, agentrun.MaxLiveDelta)
		o.publish(events.LiveDelta{Kind: k, Delta: text[:n]})
		text = text[n:]
	}
}

// liveTool is a tool call as its live delta carries it: arguments that are
// not JSON, or too long, travel as a JSON string of their (first) bytes.
func liveTool(c agent.Call) *events.ChatTool {
	args := c.Arguments
	if !json.Valid(args) || len(args) > maxLiveToolField {
		args, _ = json.Marshal(string(args[:agentrun.LiveCut(string(args), maxLiveToolField)]))
	}
	return &events.ChatTool{CallID: c.CallID, Name: c.Name, Arguments: args}
}

func (o *chatObserver) Step(st agent.StepOutput) error {
	o.clock.Step(st)
	if st.Text != "" {
		o.text = st.Text
	}
	if st.Reasoning != "" {
		o.reasoning = st.Reasoning
	}
	return nil
}

func (o *chatObserver) ToolStarted(c agent.Call) error {
	o.publish(events.LiveDelta{Kind: events.DeltaChatToolStart, Tool: liveTool(c)})
	return nil
}

func (o *chatObserver) ToolFinished(c agent.Call, r tools.Result, took time.Duration) error {
	defer o.clock.Ask()
	err := o.s.Append(context.Background(), []journal.Event{events.New(o.chatID, events.ChatToolCalled{TurnID: o.turnID, CallID: c.CallID,
		Name: c.Name, Arguments: events.NewJSON(agentrun.ValidArgs(c.Arguments)), Result: events.NewText(r.Output), IsError: r.IsError, DurationMS: took.Milliseconds()})})
	tool := &events.ChatTool{CallID: c.CallID, Name: c.Name, Result: r.Output[:agentrun.LiveCut(r.Output, maxLiveToolField)], IsError: r.IsError}
	o.publish(events.LiveDelta{Kind: events.DeltaChatToolResult, Tool: tool})
	return err
}

// sharedText returns an entry's extracted text, or ok false when it has none.
func (s *ChatRunner) sharedText(f projections.SharedFile) (string, bool, error) {
	if !f.TextExtracted {
		return "", false, nil
	}
	b, err := s.Opts.Blobs.Text(f.SHA256)
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}
