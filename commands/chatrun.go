package commands

import (
	"context"
	"strings"
	"time"

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
type ChatRunner struct{ *core }

// start runs a begun turn in its own goroutine, under the daemon's turn
// context, releasing its run when it ends.
func (s *ChatRunner) start(c projections.Chat, turnID, content string, files []projections.SharedFile, run *turnRun, sink ChatSink) {
	go func() {
		defer s.turns.release(chatRunKey(c.ID), turnID, run)
		s.run(s.turns.ctx, c, turnID, content, files, run.stop, sink)
	}()
}

// run runs a begun turn to its one chat-turn-ended.
func (s *ChatRunner) run(ctx context.Context, c projections.Chat, turnID, content string, files []projections.SharedFile, stop <-chan struct{}, sink ChatSink) {
	obs := &chatObserver{s: s.core, chatID: c.ID, turnID: turnID, agent: c.AgentID, sink: sink, clock: inferenceClock{agent: c.AgentID}}
	history := chatHistory(c.Messages[:len(c.Messages)-1])
	input := content
	if len(files) > 0 {
		var b strings.Builder
		b.WriteString(content)
		for _, f := range files {
			text, ok, err := s.sharedText(f)
			writeAttachment(&b, f.Name, f.ContentType, f.Size, text, ok, err)
		}
		input = b.String()
	}
	rh, done := chatHooks(s.core, c.ID, turnID, c.AgentID, len(history) == 0) // commands/hooks.go
	defer done()
	input, err := rh.prompt(ctx, input)
	res := agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}
	if err == nil {
		res = s.opts.Runtime.RunTurn(ctx, agent.TurnRequest{
			AgentID: c.AgentID, Model: c.ModelOverride, System: c.SystemOverride, History: history, Input: input,
			Tools: rh.tools(newTurnTools(s.core, noTools{}, ApprovalRequest{Run: chatRunKey(c.ID), TurnID: turnID, AgentID: c.AgentID}, stop)),
			Stop:  stop, MaxSteps: s.opts.Turns.MaxSteps, StallTimeout: s.opts.Turns.StallTimeout,
		}, obs)
		rh.stop(ctx)
	}
	if res.Err != nil && ctx.Err() != nil {
		res.Err = context.Cause(ctx)
	}
	end := ChatTurnEnd{ChatID: c.ID, TurnID: turnID, Outcome: events.ChatError}
	reply := obs.text
	switch res.Outcome {
	case agent.OutcomeDone:
		end.Outcome, reply = events.ChatDone, res.Output
	case agent.OutcomeCancelled:
		end.Outcome = events.ChatStopped
	default:
		end.Error = "the turn failed"
		if res.Err != nil {
			end.Error = res.Err.Error()
		}
	}
	tokens := res.Usage
	end.Usage = tokens.View()
	ev := events.ChatTurnEnded{TurnID: turnID, Outcome: end.Outcome, Content: events.NewText(reply), Reasoning: events.NewText(obs.reasoning),
		Error: end.Error, Tokens: tokens, Inferences: obs.clock.done}
	if reply != "" || end.Outcome == events.ChatDone {
		ev.MessageID = ulid.Make().String()
	}
	// The journal may be closing under a shutdown: then the next start's
	// ReconcileChats ends the turn instead.
	if err := s.append(context.Background(), []journal.Event{events.New(c.ID, ev)}); err != nil {
		s.log.Warn("end chat turn", "chat", c.ID, "turn", turnID, "err", err)
		if end.Outcome != events.ChatError {
			end.Outcome, end.Error = events.ChatError, "the reply could not be recorded: "+err.Error()
		}
	}
	sink.ChatEnd(end)
}

// chatHistory turns a Chat's messages into the model's conversation.
func chatHistory(msgs []projections.ChatMessage) []llm.Message {
	out := make([]llm.Message, 0, len(msgs))
	for _, m := range msgs {
		text := m.Content.String()
		if text == "" {
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

// chatObserver passes a running Chat turn to its sink and journals its
// tool calls. text and reasoning are the last step's that had any: the
// reply so far.
type chatObserver struct {
	s                     *core
	chatID, turnID, agent string
	sink                  ChatSink
	text, reasoning       string
	clock                 inferenceClock
}

func (o *chatObserver) Started(string) error {
	o.clock.ask()
	o.sink.ChatStart(o.turnID, o.agent)
	return nil
}

func (o *chatObserver) Delta(kind, text string) {
	o.clock.delta()
	o.sink.ChatDelta(o.turnID, kind, text)
}

func (o *chatObserver) Step(st agent.StepOutput) error {
	o.clock.step(st)
	if st.Text != "" {
		o.text = st.Text
	}
	if st.Reasoning != "" {
		o.reasoning = st.Reasoning
	}
	return nil
}

func (o *chatObserver) ToolStarted(c agent.Call) error {
	o.sink.ChatToolStart(o.turnID, o.agent, c)
	return nil
}

func (o *chatObserver) ToolFinished(c agent.Call, r tools.Result, took time.Duration) error {
	defer o.clock.ask()
	err := o.s.append(context.Background(), []journal.Event{events.New(o.chatID, events.ChatToolCalled{TurnID: o.turnID, CallID: c.CallID,
		Name: c.Name, Arguments: events.NewJSON(validArgs(c.Arguments)), Result: events.NewText(r.Output), IsError: r.IsError, DurationMS: took.Milliseconds()})})
	o.sink.ChatToolResult(o.turnID, o.agent, c, r)
	return err
}

// sharedText returns an entry's extracted text, or ok false when it has none.
func (s *ChatRunner) sharedText(f projections.SharedFile) (string, bool, error) {
	if !f.TextExtracted {
		return "", false, nil
	}
	b, err := s.opts.Blobs.Text(f.SHA256)
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}
