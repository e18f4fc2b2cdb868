package chats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
)

// Chats are the lightweight compatibility Chats: a conversation with one
// Agent outside any Session and sandbox. Every change is a chat-* event;
// a turn journals its user message when it begins (chat-turn-started) and
// its reply when it ends (chat-turn-ended), so both are durable whoever
// watches. A turn runs the Agent's tool loop (agent.RunTurn) with the MCP
// tools open to the Agent, and no sandbox tools.
type Chats struct {
	*core.Core
	// Runner runs the turns begun here (commands/chatrunner/chatrun.go).
	Runner chatStarter
}

// chatStarter runs a begun Chat turn to its one chat-turn-ended.
type chatStarter interface {
	Start(c projections.Chat, turnID, content string, files []projections.SharedFile, run *core.TurnRun)
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
	known := s.Agents[id]
	if s.Opts.Runtime != nil {
		_, err := s.Opts.Runtime.Agent(id)
		known = err == nil
	}
	if !known {
		return fmt.Errorf("%w: agent %q is not configured", core.ErrNotFound, id)
	}
	return nil
}

func chatInfo(store core.Reader, id string) (projections.ChatInfo, error) {
	c, ok := store.ChatInfo(id)
	if !ok {
		return c, fmt.Errorf("%w: chat %q", core.ErrNotFound, id)
	}
	return c, nil
}

func readChat(store core.Reader, id string) (projections.Chat, error) {
	c, ok := store.Chat(id)
	if !ok {
		return c, fmt.Errorf("%w: chat %q", core.ErrNotFound, id)
	}
	return c, nil
}

// CreateChat starts an empty Chat with an Agent; an unknown Agent is
// ErrNotFound.
func (s *Chats) CreateChat(ctx context.Context, agentID string, name *string) (projections.Chat, error) {
	if agentID == "" {
		return projections.Chat{}, fmt.Errorf("%w: agent_id is required", core.ErrInvalid)
	}
	if err := s.chatAgent(agentID); err != nil {
		return projections.Chat{}, err
	}
	n := "Chat with " + agentID
	if name != nil {
		var err error
		if n, err = core.CleanName("name", *name); err != nil {
			return projections.Chat{}, err
		}
	}
	id := ulid.Make().String()
	if err := s.AppendExpecting(ctx, id, 0, events.ChatCreated{AgentID: agentID, Name: n}); err != nil {
		return projections.Chat{}, err
	}
	return readChat(s.Store, id)
}

// checkModel validates a model name (a model of the Agent's provider).
func checkModel(field string, m *string) error {
	if m != nil && (strings.TrimSpace(*m) == "" || len(*m) > core.MaxModelName || strings.ContainsFunc(*m, core.IsControl)) {
		return fmt.Errorf("%w: %s must be a model name (or null)", core.ErrInvalid, field)
	}
	return nil
}

// PatchChat renames, stars and changes the overrides of a Chat.
func (s *Chats) PatchChat(ctx context.Context, id string, p ChatPatch) (projections.Chat, error) {
	ev := events.ChatPatched{Starred: p.Starred, SystemOverride: p.SystemOverride, ModelOverride: p.ModelOverride}
	if p.Name != nil {
		n, err := core.CleanName("name", *p.Name)
		if err != nil {
			return projections.Chat{}, err
		}
		ev.Name = &n
	}
	if o := p.SystemOverride; o != nil && o.Value != nil && (len(*o.Value) > maxSystemPrompt || !utf8.ValidString(*o.Value)) {
		return projections.Chat{}, fmt.Errorf("%w: system_override must be valid UTF-8 of at most %d bytes (or null)", core.ErrInvalid, maxSystemPrompt)
	}
	if o := p.ModelOverride; o != nil {
		if err := checkModel("model_override", o.Value); err != nil {
			return projections.Chat{}, err
		}
	}
	err := s.Retry(ctx, func() error {
		c, err := chatInfo(s.Store, id)
		if err != nil {
			return err
		}
		if ev == (events.ChatPatched{}) {
			return nil
		}
		return s.AppendExpecting(ctx, id, c.Version, ev)
	})
	if err != nil {
		return projections.Chat{}, err
	}
	return readChat(s.Store, id)
}

// DeleteChat deletes a Chat; refused while a turn runs in it.
func (s *Chats) DeleteChat(ctx context.Context, id string) error {
	return s.Retry(ctx, func() error {
		c, err := chatInfo(s.Store, id)
		if err != nil {
			return err
		}
		if c.ActiveTurn != "" {
			return fmt.Errorf("%w: turn %q is running in chat %q; stop it first", core.ErrConflict, c.ActiveTurn, id)
		}
		return s.AppendExpecting(ctx, id, c.Version, events.ChatDeleted{})
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
			return projections.Chat{}, fmt.Errorf("%w: replacement_role must be %q or %q, not %q", core.ErrInvalid, events.RoleUser, events.RoleAssistant, role)
		}
		if req.ReplacementContent == nil {
			return projections.Chat{}, fmt.Errorf("%w: replacement_role needs replacement_content", core.ErrInvalid)
		}
	}
	if c := req.ReplacementContent; c != nil {
		if err := CheckChatContent("replacement_content", *c); err != nil {
			return projections.Chat{}, err
		}
	}
	fork := ulid.Make().String()
	err := s.Retry(ctx, func() error {
		src, err := chatInfo(s.Store, id)
		if err != nil {
			return err
		}
		if req.TruncateAt < 0 || req.TruncateAt > src.MessageCount {
			return fmt.Errorf("%w: truncate_at %d is out of range: chat %q has %d messages", core.ErrInvalid, req.TruncateAt, id, src.MessageCount)
		}
		evs := []journal.Event{events.New(fork, events.ChatCreated{AgentID: src.AgentID, Name: forkName(src.Name),
			ForkOf: &events.ChatFork{ChatID: id, TruncateAt: req.TruncateAt}})}
		if c := req.ReplacementContent; c != nil {
			evs = append(evs, events.New(fork, events.ChatMessageAdded{MessageID: ulid.Make().String(), Role: role, Content: events.NewText(*c)}))
		}
		// The source's version is expected too: the fork copies its
		// messages as they stand at this version.
		err = s.Append(ctx, evs, journal.Expectation{AggregateID: fork}, journal.Expectation{AggregateID: id, Version: src.Version})
		if errors.Is(err, core.ErrConflict) {
			return core.LostRace(err)
		}
		return err
	})
	if err != nil {
		return projections.Chat{}, err
	}
	return readChat(s.Store, fork)
}

func forkName(name string) string {
	const suffix = " (fork)"
	if utf8.RuneCountInString(name)+len(suffix) > core.MaxNameLen {
		return name
	}
	return name + suffix
}

func CheckChatContent(field, c string) error {
	if strings.TrimSpace(c) == "" {
		return fmt.Errorf("%w: %s must not be empty", core.ErrInvalid, field)
	}
	if len(c) > maxChatContent || !utf8.ValidString(c) {
		return fmt.Errorf("%w: %s must be valid UTF-8 of at most %d bytes", core.ErrInvalid, field, maxChatContent)
	}
	return nil
}

// ChatRunKey is the key of a Chat's runs among the turns.
func ChatRunKey(chatID string) string { return "chat/" + chatID }

// ChatTurn begins turn turnID (a ULID the caller made, so that it can
// route the turn's live deltas before they flow) with the user message
// content and runs it in the background; its steps go out as live deltas
// on the Chat's live subject (events.ChatLiveSubject), the end once
// chat-turn-ended is committed. A Chat whose turn runs refuses
// (ErrConflict). It returns once the user message is durable.
func (s *Chats) ChatTurn(ctx context.Context, chatID, turnID, content string) error {
	if _, err := ulid.ParseStrict(turnID); err != nil {
		return fmt.Errorf("%w: turn_id %q is not a ULID", core.ErrInvalid, turnID)
	}
	if err := CheckChatContent("content", content); err != nil {
		return err
	}
	info, err := chatInfo(s.Store, chatID)
	if err != nil {
		return err
	}
	if s.Opts.Runtime == nil {
		return fmt.Errorf("%w: no Agent runtime is configured", core.ErrUnavailable)
	}
	if info.ActiveTurn != "" {
		return chatBusy(chatID, info.ActiveTurn)
	}
	if err := s.chatAgent(info.AgentID); err != nil {
		return err
	}
	run, err := s.Turns.Reserve(ChatRunKey(chatID), turnID)
	if err != nil {
		return err
	}
	var files []projections.SharedFile
	var model string
	err = s.Retry(ctx, func() error {
		c, err := readChat(s.Store, chatID)
		if err != nil {
			return err
		}
		if c.ActiveTurn != "" {
			return chatBusy(chatID, c.ActiveTurn)
		}
		if model, err = s.Opts.Runtime.Model(c.AgentID, c.ModelOverride); err != nil {
			return fmt.Errorf("%w: agent %q: %v", core.ErrNotFound, c.AgentID, err)
		}
		ev := events.ChatTurnStarted{TurnID: turnID, MessageID: ulid.Make().String(), Content: events.NewText(content), Agent: c.AgentID, Model: model}
		expect := []journal.Expectation{{AggregateID: chatID, Version: c.Version}}
		files = files[:0]
		for _, a := range c.Attachments {
			f, ok := s.Store.SharedFile(a.FileID)
			if !ok || !(a.Pinned || !a.Consumed) {
				continue
			}
			files = append(files, f)
			ev.Files = append(ev.Files, f.ID)
			// A file deleted meanwhile is no longer offered.
			expect = append(expect, journal.Expectation{AggregateID: f.ID, Version: f.Version})
		}
		err = s.Append(ctx, []journal.Event{events.New(chatID, ev)}, expect...)
		if errors.Is(err, core.ErrConflict) {
			return core.LostRace(err)
		}
		return err
	})
	if err != nil {
		s.Turns.Release(ChatRunKey(chatID), turnID, run)
		return err
	}
	c, err := readChat(s.Store, chatID)
	if err != nil { // deleted the instant after: impossible while the turn is live
		s.Turns.Release(ChatRunKey(chatID), turnID, run)
		return err
	}
	s.Runner.Start(c, turnID, content, files, run)
	return nil
}

func chatBusy(chatID, turnID string) error {
	return fmt.Errorf("%w: chat %q is busy: turn %q is running; stop it or wait for it to end", core.ErrConflict, chatID, turnID)
}

// StopChat asks the Chat's running turn for a cooperative Stop: its
// terminal frame follows once it reaches a safe boundary. A Chat with no
// running turn is ErrConflict.
func (s *Chats) StopChat(chatID string) error {
	c, err := chatInfo(s.Store, chatID)
	if err != nil {
		return err
	}
	if c.ActiveTurn == "" {
		return fmt.Errorf("%w: chat %q has no running turn", core.ErrConflict, chatID)
	}
	run := s.Turns.Running(ChatRunKey(chatID), c.ActiveTurn)
	if run == nil {
		return fmt.Errorf("%w: turn %q of chat %q is not running in this daemon", core.ErrConflict, c.ActiveTurn, chatID)
	}
	run.StopOnce.Do(func() { close(run.Stop) })
	return nil
}

// ReconcileChats ends, at start, every Chat turn the journal shows begun
// but not ended: the daemon stopped under it. Each gets exactly one
// chat-turn-ended (error, interrupted).
func (s *Chats) ReconcileChats(ctx context.Context) error {
	for _, c := range s.Store.LiveChatTurns() {
		if s.Turns.Running(ChatRunKey(c.ID), c.ActiveTurn) != nil {
			continue
		}
		err := s.Append(ctx, []journal.Event{events.New(c.ID, events.ChatTurnEnded{TurnID: c.ActiveTurn, Outcome: events.ChatError,
			Error: "interrupted: the daemon stopped during this turn"})}, journal.Expectation{AggregateID: c.ID, Version: c.Version})
		if err != nil && !errors.Is(err, core.ErrConflict) {
			return fmt.Errorf("end interrupted turn %s of chat %s: %w", c.ActiveTurn, c.ID, err)
		}
	}
	return nil
}
