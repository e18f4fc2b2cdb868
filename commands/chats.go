package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// Chats are the lightweight compatibility Chats: a conversation with one
// Agent outside any Session and sandbox. Every change is a chat-* event;
// a turn journals its user message when it begins (chat-turn-started) and
// its reply when it ends (chat-turn-ended), so both are durable whoever
// watches. A turn runs the Agent's tool loop (agent.RunTurn) with the MCP
// tools open to the Agent, and no sandbox tools.
type Chats struct {
	*core
	turns *turnRuns // the runs of Chat turns (commands/turns.go)
}

// Chat bounds.
const (
	maxChatContent  = 512 << 10
	maxSystemPrompt = 64 << 10
)

// ChatPatch is a PATCH of a Chat: nil leaves a field as it is; an override
// whose Value is nil clears it.
type ChatPatch struct {
	Name           *string
	Starred        *bool
	SystemOverride *events.Override
	ModelOverride  *events.Override
}

// ChatForkRequest is a fork: the messages before TruncateAt, then the
// replacement message if one is given (role user unless named).
type ChatForkRequest struct {
	TruncateAt         int
	ReplacementContent *string
	ReplacementRole    *string
}

// chatAgent checks that an Agent is configured.
func (s *Chats) chatAgent(id string) error {
	known := s.agents[id]
	if s.opts.Runtime != nil {
		_, err := s.opts.Runtime.Agent(id)
		known = err == nil
	}
	if !known {
		return fmt.Errorf("%w: agent %q is not configured", ErrNotFound, id)
	}
	return nil
}

func chatInfo(store Reader, id string) (projections.ChatInfo, error) {
	c, ok := store.ChatInfo(id)
	if !ok {
		return c, fmt.Errorf("%w: chat %q", ErrNotFound, id)
	}
	return c, nil
}

func readChat(store Reader, id string) (projections.Chat, error) {
	c, ok := store.Chat(id)
	if !ok {
		return c, fmt.Errorf("%w: chat %q", ErrNotFound, id)
	}
	return c, nil
}

// CreateChat starts an empty Chat with an Agent; an unknown Agent is
// ErrNotFound.
func (s *Chats) CreateChat(ctx context.Context, agentID string, name *string) (projections.Chat, error) {
	if agentID == "" {
		return projections.Chat{}, fmt.Errorf("%w: agent_id is required", ErrInvalid)
	}
	if err := s.chatAgent(agentID); err != nil {
		return projections.Chat{}, err
	}
	n := "Chat with " + agentID
	if name != nil {
		var err error
		if n, err = cleanName("name", *name); err != nil {
			return projections.Chat{}, err
		}
	}
	id := ulid.Make().String()
	if err := s.appendExpecting(ctx, id, 0, events.ChatCreated{AgentID: agentID, Name: n}); err != nil {
		return projections.Chat{}, err
	}
	return readChat(s.store, id)
}

// checkModel validates a model name (a model of the Agent's provider).
func checkModel(field string, m *string) error {
	if m != nil && (strings.TrimSpace(*m) == "" || len(*m) > maxModelName || strings.ContainsFunc(*m, isControl)) {
		return fmt.Errorf("%w: %s must be a model name (or null)", ErrInvalid, field)
	}
	return nil
}

// PatchChat renames, stars and changes the overrides of a Chat.
func (s *Chats) PatchChat(ctx context.Context, id string, p ChatPatch) (projections.Chat, error) {
	ev := events.ChatPatched{Starred: p.Starred, SystemOverride: p.SystemOverride, ModelOverride: p.ModelOverride}
	if p.Name != nil {
		n, err := cleanName("name", *p.Name)
		if err != nil {
			return projections.Chat{}, err
		}
		ev.Name = &n
	}
	if o := p.SystemOverride; o != nil && o.Value != nil && (len(*o.Value) > maxSystemPrompt || !utf8.ValidString(*o.Value)) {
		return projections.Chat{}, fmt.Errorf("%w: system_override must be valid UTF-8 of at most %d bytes (or null)", ErrInvalid, maxSystemPrompt)
	}
	if o := p.ModelOverride; o != nil {
		if err := checkModel("model_override", o.Value); err != nil {
			return projections.Chat{}, err
		}
	}
	err := s.retry(ctx, func() error {
		c, err := chatInfo(s.store, id)
		if err != nil {
			return err
		}
		if ev == (events.ChatPatched{}) {
			return nil
		}
		return s.appendExpecting(ctx, id, c.Version, ev)
	})
	if err != nil {
		return projections.Chat{}, err
	}
	return readChat(s.store, id)
}

// DeleteChat deletes a Chat; refused while a turn runs in it.
func (s *Chats) DeleteChat(ctx context.Context, id string) error {
	return s.retry(ctx, func() error {
		c, err := chatInfo(s.store, id)
		if err != nil {
			return err
		}
		if c.ActiveTurn != "" {
			return fmt.Errorf("%w: turn %q is running in chat %q; stop it first", ErrConflict, c.ActiveTurn, id)
		}
		return s.appendExpecting(ctx, id, c.Version, events.ChatDeleted{})
	})
}

// ForkChat creates a new Chat with the messages of Chat id before
// TruncateAt, plus the replacement message if one is given. The original
// is untouched.
func (s *Chats) ForkChat(ctx context.Context, id string, req ChatForkRequest) (projections.Chat, error) {
	role := events.RoleUser
	if req.ReplacementRole != nil {
		role = *req.ReplacementRole
		if role != events.RoleUser && role != events.RoleAssistant {
			return projections.Chat{}, fmt.Errorf("%w: replacement_role must be %q or %q, not %q", ErrInvalid, events.RoleUser, events.RoleAssistant, role)
		}
		if req.ReplacementContent == nil {
			return projections.Chat{}, fmt.Errorf("%w: replacement_role needs replacement_content", ErrInvalid)
		}
	}
	if c := req.ReplacementContent; c != nil {
		if err := checkChatContent("replacement_content", *c); err != nil {
			return projections.Chat{}, err
		}
	}
	fork := ulid.Make().String()
	err := s.retry(ctx, func() error {
		src, err := chatInfo(s.store, id)
		if err != nil {
			return err
		}
		if req.TruncateAt < 0 || req.TruncateAt > src.MessageCount {
			return fmt.Errorf("%w: truncate_at %d is out of range: chat %q has %d messages", ErrInvalid, req.TruncateAt, id, src.MessageCount)
		}
		evs := []journal.Event{events.New(fork, events.ChatCreated{AgentID: src.AgentID, Name: forkName(src.Name),
			ForkOf: &events.ChatFork{ChatID: id, TruncateAt: req.TruncateAt}})}
		if c := req.ReplacementContent; c != nil {
			evs = append(evs, events.New(fork, events.ChatMessageAdded{MessageID: ulid.Make().String(), Role: role, Content: events.NewText(*c)}))
		}
		// The source's version is expected too: the fork copies its
		// messages as they stand at this version.
		err = s.append(ctx, evs, journal.Expectation{AggregateID: fork}, journal.Expectation{AggregateID: id, Version: src.Version})
		if errors.Is(err, ErrConflict) {
			return raced{err}
		}
		return err
	})
	if err != nil {
		return projections.Chat{}, err
	}
	return readChat(s.store, fork)
}

func forkName(name string) string {
	const suffix = " (fork)"
	if utf8.RuneCountInString(name)+len(suffix) > maxNameLen {
		return name
	}
	return name + suffix
}

func checkChatContent(field, c string) error {
	if strings.TrimSpace(c) == "" {
		return fmt.Errorf("%w: %s must not be empty", ErrInvalid, field)
	}
	if len(c) > maxChatContent || !utf8.ValidString(c) {
		return fmt.Errorf("%w: %s must be valid UTF-8 of at most %d bytes", ErrInvalid, field, maxChatContent)
	}
	return nil
}

// ChatSink hears one Chat turn as it runs, in order, from the goroutine
// running it: the /ws connection that issued it. A sink that went away
// misses nothing durable: the user message and the reply are journaled.
type ChatSink interface {
	ChatStart(turnID, agent string)
	ChatDelta(turnID, kind, text string)
	ChatToolStart(turnID, agent string, c agent.Call)
	ChatToolResult(turnID, agent string, c agent.Call, r tools.Result)
	ChatEnd(end ChatTurnEnd)
}

// ChatTurnEnd is how a Chat turn ended.
type ChatTurnEnd struct {
	ChatID, TurnID string
	// Outcome is events.ChatDone, ChatStopped or ChatError.
	Outcome string
	Error   string
	Usage   usage.View
}

// chatRunKey is the key of a Chat's runs among the turns.
func chatRunKey(chatID string) string { return "chat/" + chatID }

// ChatTurn begins a turn with the user message content and runs it in the
// background, telling sink. A Chat whose turn runs refuses (ErrConflict).
// It returns the turn's ID once the user message is durable.
func (s *Chats) ChatTurn(ctx context.Context, chatID, content string, sink ChatSink) (string, error) {
	if err := checkChatContent("content", content); err != nil {
		return "", err
	}
	info, err := chatInfo(s.store, chatID)
	if err != nil {
		return "", err
	}
	if s.opts.Runtime == nil {
		return "", fmt.Errorf("%w: no Agent runtime is configured", ErrUnavailable)
	}
	if info.ActiveTurn != "" {
		return "", chatBusy(chatID, info.ActiveTurn)
	}
	if err := s.chatAgent(info.AgentID); err != nil {
		return "", err
	}
	turnID := ulid.Make().String()
	run, err := s.turns.reserve(chatRunKey(chatID), turnID)
	if err != nil {
		return "", err
	}
	var files []projections.SharedFile
	var model string
	err = s.retry(ctx, func() error {
		c, err := readChat(s.store, chatID)
		if err != nil {
			return err
		}
		if c.ActiveTurn != "" {
			return chatBusy(chatID, c.ActiveTurn)
		}
		if model, err = s.opts.Runtime.Model(c.AgentID, c.ModelOverride); err != nil {
			return fmt.Errorf("%w: agent %q: %v", ErrNotFound, c.AgentID, err)
		}
		ev := events.ChatTurnStarted{TurnID: turnID, MessageID: ulid.Make().String(), Content: events.NewText(content), Agent: c.AgentID, Model: model}
		expect := []journal.Expectation{{AggregateID: chatID, Version: c.Version}}
		files = files[:0]
		for _, a := range c.Attachments {
			f, ok := s.store.SharedFile(a.FileID)
			if !ok || !(a.Pinned || !a.Consumed) {
				continue
			}
			files = append(files, f)
			ev.Files = append(ev.Files, f.ID)
			// A file deleted meanwhile is no longer offered.
			expect = append(expect, journal.Expectation{AggregateID: f.ID, Version: f.Version})
		}
		err = s.append(ctx, []journal.Event{events.New(chatID, ev)}, expect...)
		if errors.Is(err, ErrConflict) {
			return raced{err}
		}
		return err
	})
	if err != nil {
		s.turns.release(chatRunKey(chatID), turnID, run)
		return "", err
	}
	c, err := readChat(s.store, chatID)
	if err != nil { // deleted the instant after: impossible while the turn is live
		s.turns.release(chatRunKey(chatID), turnID, run)
		return "", err
	}
	go func() {
		defer s.turns.release(chatRunKey(chatID), turnID, run)
		s.runChatTurn(s.turns.ctx, c, turnID, content, files, run.stop, sink)
	}()
	return turnID, nil
}

func chatBusy(chatID, turnID string) error {
	return fmt.Errorf("%w: chat %q is busy: turn %q is running; stop it or wait for it to end", ErrConflict, chatID, turnID)
}

// runChatTurn runs a begun turn to its one chat-turn-ended.
func (s *Chats) runChatTurn(ctx context.Context, c projections.Chat, turnID, content string, files []projections.SharedFile, stop <-chan struct{}, sink ChatSink) {
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
		Error: end.Error, Refused: refusedPrompt(res.Err), Tokens: tokens, Inferences: obs.clock.done}
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

// StopChat asks the Chat's running turn for a cooperative Stop: its
// terminal frame follows once it reaches a safe boundary. A Chat with no
// running turn is ErrConflict.
func (s *Chats) StopChat(chatID string) error {
	c, err := chatInfo(s.store, chatID)
	if err != nil {
		return err
	}
	if c.ActiveTurn == "" {
		return fmt.Errorf("%w: chat %q has no running turn", ErrConflict, chatID)
	}
	run := s.turns.running(chatRunKey(chatID), c.ActiveTurn)
	if run == nil {
		return fmt.Errorf("%w: turn %q of chat %q is not running in this daemon", ErrConflict, c.ActiveTurn, chatID)
	}
	run.stopOnce.Do(func() { close(run.stop) })
	return nil
}

// ReconcileChats ends, at start, every Chat turn the journal shows begun
// but not ended: the daemon stopped under it. Each gets exactly one
// chat-turn-ended (error, interrupted).
func (s *Chats) ReconcileChats(ctx context.Context) error {
	for _, c := range s.store.LiveChatTurns() {
		if s.turns.running(chatRunKey(c.ID), c.ActiveTurn) != nil {
			continue
		}
		err := s.append(ctx, []journal.Event{events.New(c.ID, events.ChatTurnEnded{TurnID: c.ActiveTurn, Outcome: events.ChatError,
			Error: "interrupted: the daemon stopped during this turn"})}, journal.Expectation{AggregateID: c.ID, Version: c.Version})
		if err != nil && !errors.Is(err, ErrConflict) {
			return fmt.Errorf("end interrupted turn %s of chat %s: %w", c.ActiveTurn, c.ID, err)
		}
	}
	return nil
}
