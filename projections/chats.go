package projections

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
)

// The compatibility Chats and the shared file store. A Chat is a
// conversation with one Agent outside any Session: its messages, its
// overrides, its attachments (relations to shared files) and the turn that
// runs, if one does. The list and its search (literal, case-insensitive,
// over names and message text) are answered from a lower-cased index kept
// beside each Chat, so a search is one substring scan per Chat.

// ChatMessage is one message of a Chat.
type ChatMessage struct {
	ID        string      `json:"id"`
	Role      string      `json:"role"`
	Content   events.Text `json:"content"`
	CreatedAt time.Time   `json:"created_at"`
	TurnID    string      `json:"turn_id,omitempty"`
	// Files are a user message's attachments: the shared files whose text
	// its turn took as context (events.ChatTurnStarted.Files).
	Files []string `json:"files,omitempty"`
	// Refused marks a user message a UserPromptSubmit hook blocked: listed
	// here, never sent to a model.
	Refused bool `json:"refused,omitempty"`
	// Outcome is a reply's turn outcome (done, stopped, error).
	Outcome string      `json:"outcome,omitempty"`
	Error   string      `json:"error,omitempty"`
	Usage   *usage.View `json:"usage,omitempty"`
	// Reasoning and ToolCalls are a reply's: what the model reasoned and
	// the tool calls its turn made, in order.
	Reasoning events.Text    `json:"reasoning,omitzero"`
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
}

// ChatToolCall is one tool call of a Chat turn, as its reply keeps it.
type ChatToolCall struct {
	CallID    string      `json:"call_id"`
	Name      string      `json:"name"`
	Arguments events.JSON `json:"arguments"`
	Result    events.Text `json:"result"`
	IsError   bool        `json:"is_error"`
}

// ChatAttachment is a Chat's relation to a shared file. An unpinned one
// goes into the next turn's context only (it is then Consumed); a pinned
// one into every turn's.
type ChatAttachment struct {
	FileID     string    `json:"file_id"`
	Pinned     bool      `json:"pinned"`
	Consumed   bool      `json:"consumed"`
	AttachedAt time.Time `json:"attached_at"`
}

// ChatInfo is a Chat without its messages: the list's entry.
type ChatInfo struct {
	ID             string           `json:"id"`
	AgentID        string           `json:"agent_id"`
	Name           string           `json:"name"`
	Starred        bool             `json:"starred"`
	SystemOverride *string          `json:"system_override"`
	ModelOverride  *string          `json:"model_override"`
	ForkOf         *events.ChatFork `json:"fork_of,omitempty"`
	ActiveTurn     string           `json:"active_turn,omitempty"`
	MessageCount   int              `json:"message_count"`
	CreatedAt      time.Time        `json:"created_at"`
	UpdatedAt      time.Time        `json:"updated_at"`
	Version        uint64           `json:"-"`
}

// Chat is the read model of a Chat.
type Chat struct {
	ChatInfo
	Messages    []ChatMessage    `json:"messages"`
	Attachments []ChatAttachment `json:"attachments"`
	// Calls are the running turn's tool calls so far, for its reply.
	Calls []ChatToolCall `json:"-"`
	// Evicted counts the first messages, not in Messages, that a read
	// folds again from the journal (evicted.go): Messages holds the rest.
	Evicted int `json:"-"`
	// EvictedFiles holds, for each file an evicted message took as
	// context, the index of the first such message: a fork that keeps it
	// keeps that file consumed.
	EvictedFiles map[string]int `json:"-"`
	// Index is the lower-cased text of every message, each after a NUL
	// (a NUL of the text is a space in it); name the lower-cased name,
	// rebuilt on load.
	Index []byte `json:"-"`
	name  string
}

// chatResident is how many messages a Chat holds in memory, at most, when
// no turn of it runs: past it, they are evicted.
const chatResident = 32

// refoldChats is how many Chats' evicted messages stay cached, and
// refoldChatMessages how many messages one Chat's entry may hold.
const (
	refoldChats        = 4
	refoldChatMessages = 2048
)

// SharedFile is an entry of the shared file store.
type SharedFile struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	Size          int64     `json:"size"`
	ContentType   string    `json:"content_type"`
	SHA256        string    `json:"sha256"`
	Tags          []string  `json:"tags"`
	TextExtracted bool      `json:"text_extracted"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	// Chats are the Chats holding a relation to it, oldest first.
	Chats []string `json:"chats"`
	// Retained: a turn used it as context, so the historical context keeps
	// it and it may not be deleted.
	Retained bool `json:"retained"`
	// ChatIDs is Chats as a set (the projection's own).
	ChatIDs map[string]bool `json:"-"`
	Version uint64          `json:"-"`
}

// ChatModel is the read model of the compatibility Chats, of the shared
// file store their turns draw on, and of the inbound A2A tasks.
type ChatModel struct {
	sh    *shared
	chats map[string]*Chat
	files map[string]*SharedFile
	a2a   map[string]*A2ATask // by ID
	// refolded are the evicted messages of the Chats last read, by Chat
	// (evicted.go).
	refolded *refoldCache[[]ChatMessage]
}

func newChatModel(sh *shared) *ChatModel {
	return &ChatModel{sh: sh, chats: map[string]*Chat{}, files: map[string]*SharedFile{}, a2a: map[string]*A2ATask{},
		refolded: &refoldCache[[]ChatMessage]{max: refoldChats}}
}

// The Chats', the shared files' and the A2A tasks' events.
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error { return s.ChatModel.fold(env, p) }
	claimFor("chats", fold,
		events.ChatCreated{}, events.ChatPatched{}, events.ChatDeleted{}, events.ChatMessageAdded{}, events.ChatTurnStarted{},
		events.ChatToolCalled{}, events.ChatHookRan{}, events.ChatTurnEnded{},
		events.ChatFileAttached{}, events.ChatFilePinned{}, events.ChatFileDetached{},
		events.SharedFileStored{}, events.SharedFilePatched{}, events.SharedFileDeleted{},
		events.A2ATaskReceived{}, events.A2ATaskEnded{})
}

// fold applies an event of a Chat, a shared file or an A2A task.
func (m *ChatModel) fold(env journal.Envelope, p events.Payload) error {
	switch p.(type) {
	case events.SharedFileStored, events.SharedFilePatched, events.SharedFileDeleted:
		return m.foldSharedFile(env.AggregateID, env.At, p)
	case events.A2ATaskReceived, events.A2ATaskEnded:
		return m.foldA2A(env.AggregateID, env.At, p)
	}
	return m.foldChat(env.AggregateID, env.At, p)
}

// forkAttachments gives a fork its source's attachments as they stand: a
// one-turn attachment stays consumed only if a message the fork kept used
// it, so a fork from before that message offers it to the next turn again.
func (m *ChatModel) forkAttachments(c, src *Chat, keep int) {
	used := map[string]bool{}
	for _, msg := range c.Messages {
		for _, fid := range msg.Files {
			used[fid] = true
		}
	}
	for fid, at := range src.EvictedFiles { // the kept messages out of memory
		if at < keep {
			used[fid] = true
			if c.EvictedFiles == nil {
				c.EvictedFiles = map[string]int{}
			}
			if at < c.Evicted {
				c.EvictedFiles[fid] = at
			}
		}
	}
	for _, a := range src.Attachments {
		a.Consumed = a.Consumed && used[a.FileID]
		c.Attachments = append(c.Attachments, a)
		if f := m.files[a.FileID]; f != nil {
			f.ChatIDs[c.ID] = true
		}
	}
}

func (m *ChatModel) foldChat(id string, at time.Time, p events.Payload) error {
	if e, ok := p.(events.ChatCreated); ok {
		c := &Chat{ChatInfo: ChatInfo{ID: id, AgentID: e.AgentID, Name: e.Name, ForkOf: e.ForkOf, CreatedAt: at, UpdatedAt: at, Version: 1},
			Messages: []ChatMessage{}, Attachments: []ChatAttachment{}}
		if f := e.ForkOf; f != nil {
			src, ok := m.chats[f.ChatID]
			if !ok || f.TruncateAt < 0 || f.TruncateAt > src.MessageCount {
				return fmt.Errorf("chat %s forks unknown chat %s or its message %d", id, f.ChatID, f.TruncateAt)
			}
			if f.TruncateAt <= src.Evicted {
				c.Evicted = f.TruncateAt
			} else {
				c.Evicted = src.Evicted
				c.Messages = slices.Clone(src.Messages[:f.TruncateAt-src.Evicted])
			}
			c.Index = indexPrefix(src.Index, f.TruncateAt)
			m.forkAttachments(c, src, f.TruncateAt)
		}
		c.name, c.MessageCount = strings.ToLower(c.Name), c.Evicted+len(c.Messages)
		m.chats[id] = c
		return nil
	}
	c, ok := m.chats[id]
	if !ok {
		return fmt.Errorf("unknown chat %s", id)
	}
	c.UpdatedAt = at
	c.Version++
	switch e := p.(type) {
	case events.ChatPatched:
		if e.Name != nil {
			c.Name = *e.Name
			c.name = strings.ToLower(c.Name)
		}
		if e.Starred != nil {
			c.Starred = *e.Starred
		}
		if e.SystemOverride != nil {
			c.SystemOverride = e.SystemOverride.Value
		}
		if e.ModelOverride != nil {
			c.ModelOverride = e.ModelOverride.Value
		}
	case events.ChatDeleted:
		for _, a := range c.Attachments {
			if f := m.files[a.FileID]; f != nil {
				delete(f.ChatIDs, id)
			}
		}
		delete(m.chats, id)
	case events.ChatMessageAdded:
		c.add(ChatMessage{ID: e.MessageID, Role: e.Role, Content: e.Content, CreatedAt: at})
		m.evict(id, c)
	case events.ChatTurnStarted:
		c.ActiveTurn = e.TurnID
		c.add(ChatMessage{ID: e.MessageID, Role: events.RoleUser, Content: e.Content, CreatedAt: at, TurnID: e.TurnID, Files: e.Files})
		for _, fid := range e.Files {
			for i := range c.Attachments {
				if a := &c.Attachments[i]; a.FileID == fid && !a.Pinned {
					a.Consumed = true
				}
			}
			if f := m.files[fid]; f != nil {
				f.Retained = true
			}
		}
	case events.ChatToolCalled:
		c.Calls = append(c.Calls, ChatToolCall{CallID: e.CallID, Name: e.Name, Arguments: e.Arguments, Result: e.Result, IsError: e.IsError})
	case events.ChatHookRan: // in the journal; a block shows in the call's result or the turn's error
	case events.ChatTurnEnded:
		if c.ActiveTurn == e.TurnID {
			c.ActiveTurn = ""
		}
		if e.Refused {
			c.refuse(e.TurnID)
		}
		if e.MessageID != "" {
			u := e.Tokens.View()
			c.add(ChatMessage{ID: e.MessageID, Role: events.RoleAssistant, Content: e.Content, CreatedAt: at, TurnID: e.TurnID,
				Outcome: e.Outcome, Error: e.Error, Usage: &u, Reasoning: e.Reasoning, ToolCalls: c.Calls})
		}
		c.Calls = nil
		m.evict(id, c)
	case events.ChatFileAttached:
		c.Attachments = append(c.Attachments, ChatAttachment{FileID: e.FileID, Pinned: e.Pinned, AttachedAt: at})
		if f := m.files[e.FileID]; f != nil {
			f.ChatIDs[id] = true
		}
	case events.ChatFilePinned:
		for i := range c.Attachments {
			if a := &c.Attachments[i]; a.FileID == e.FileID {
				a.Pinned = e.Pinned
				if e.Pinned {
					a.Consumed = false
				}
			}
		}
	case events.ChatFileDetached:
		c.Attachments = slices.DeleteFunc(c.Attachments, func(a ChatAttachment) bool { return a.FileID == e.FileID })
		if f := m.files[e.FileID]; f != nil {
			delete(f.ChatIDs, id)
		}
	default:
		return fmt.Errorf("no chat projection for %T", p)
	}
	return nil
}

func (m *ChatModel) foldSharedFile(id string, at time.Time, p events.Payload) error {
	if e, ok := p.(events.SharedFileStored); ok {
		m.files[id] = &SharedFile{ID: id, Name: e.Name, Size: e.Size, ContentType: e.ContentType, SHA256: e.SHA256,
			Tags: nonNil(e.Tags), TextExtracted: e.TextExtracted, CreatedAt: at, UpdatedAt: at, ChatIDs: map[string]bool{}, Version: 1}
		return nil
	}
	f, ok := m.files[id]
	if !ok {
		return fmt.Errorf("unknown shared file %s", id)
	}
	f.UpdatedAt = at
	f.Version++
	switch e := p.(type) {
	case events.SharedFilePatched:
		if e.Name != nil {
			f.Name = *e.Name
		}
		if e.Tags != nil {
			f.Tags = nonNil(*e.Tags)
		}
	case events.SharedFileDeleted:
		for cid := range f.ChatIDs {
			if c := m.chats[cid]; c != nil {
				c.Attachments = slices.DeleteFunc(c.Attachments, func(a ChatAttachment) bool { return a.FileID == id })
			}
		}
		delete(m.files, id)
	default:
		return fmt.Errorf("no shared file projection for %T", p)
	}
	return nil
}

// citesFile marks context references that may name a shared file.
var citesFile = []byte(`"file_id"`)

// noteCitations marks the shared files a Session turn's context references
// cite ({"file_id": …}) as retained: that turn's historical context keeps
// them. An offloaded reference is not read (a citation is small).
func (m *ChatModel) noteCitations(e events.TurnAccepted) {
	for _, r := range e.ContextReferences {
		if r.Blob != nil || !bytes.Contains(r.Inline, citesFile) {
			continue
		}
		var ref struct {
			FileID string `json:"file_id"`
		}
		if json.Unmarshal(r.Inline, &ref) == nil {
			if f := m.files[ref.FileID]; f != nil {
				f.Retained = true
			}
		}
	}
}

// add appends a message and indexes its text.
func (c *Chat) add(m ChatMessage) {
	c.Messages = append(c.Messages, m)
	c.MessageCount = c.Evicted + len(c.Messages)
	c.Index = appendLower(c.Index, m.Content.String())
}

// refuse marks the user message of turn turnID refused. It is resident:
// nothing is evicted while its turn runs.
func (c *Chat) refuse(turnID string) {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if m := &c.Messages[i]; m.TurnID == turnID && m.Role == events.RoleUser {
			m.Refused = true
			return
		}
	}
}

// evict drops the messages Chat id holds once they reach chatResident and
// no turn runs, when the store evicts. They extend the Chat's cached
// first messages, if those end where they begin, so the Chat's next turn
// reads no journal; a cached prefix past refoldChatMessages is dropped.
func (m *ChatModel) evict(id string, c *Chat) {
	if !m.sh.evicts() || c.ActiveTurn != "" || len(c.Messages) < chatResident {
		return
	}
	key := refoldKey{id: id}
	if c.Evicted == 0 {
		m.refolded.put(key, c.Messages)
	} else if msgs, ok := m.refolded.get(key); ok && len(msgs) == c.Evicted && len(msgs)+len(c.Messages) <= refoldChatMessages {
		m.refolded.put(key, slices.Concat(msgs, c.Messages))
	} else if ok {
		m.refolded.drop(key)
	}
	for i, msg := range c.Messages {
		for _, fid := range msg.Files {
			if _, ok := c.EvictedFiles[fid]; !ok {
				if c.EvictedFiles == nil {
					c.EvictedFiles = map[string]int{}
				}
				c.EvictedFiles[fid] = c.Evicted + i
			}
		}
	}
	c.Evicted += len(c.Messages)
	c.Messages = []ChatMessage{}
}

func appendLower(b []byte, text string) []byte {
	b = append(b, 0)
	text = strings.ToLower(text)
	if strings.IndexByte(text, 0) >= 0 {
		text = strings.ReplaceAll(text, "\x00", " ") // a NUL separates messages
	}
	return append(b, text...)
}

// indexPrefix is the part of a Chat's index that holds its first n
// messages.
func indexPrefix(index []byte, n int) []byte {
	end := 0
	for range n {
		i := -1
		if end < len(index) {
			i = bytes.IndexByte(index[end+1:], 0)
		}
		if i < 0 {
			return slices.Clone(index)
		}
		end += 1 + i
	}
	return slices.Clone(index[:end])
}

// Chats lists the Chats without their messages, starred first, then the
// most recently updated. A non-empty q keeps those whose name or any
// message holds q, literally and ignoring case. A search of many Chats
// scans them on every core.
func (m *ChatModel) Chats(q string) []ChatInfo {
	q = strings.ToLower(q)
	qb, rare := []byte(q), rarest(q)
	match := func(c *Chat) bool { return q == "" || strings.Contains(c.name, q) || containsAt(c.Index, qb, rare) }
	m.sh.mu.RLock()
	var out []ChatInfo
	if workers := runtime.GOMAXPROCS(0); q != "" && workers > 1 && len(m.chats) >= parallelSearch {
		all := make([]*Chat, 0, len(m.chats))
		for _, c := range m.chats {
			all = append(all, c)
		}
		parts := make([][]ChatInfo, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for _, c := range all[w*len(all)/workers : (w+1)*len(all)/workers] {
					if match(c) {
						parts[w] = append(parts[w], c.ChatInfo)
					}
				}
			})
		}
		wg.Wait()
		out = slices.Concat(parts...)
	} else {
		out = make([]ChatInfo, 0, len(m.chats))
		for _, c := range m.chats {
			if match(c) {
				out = append(out, c.ChatInfo)
			}
		}
	}
	m.sh.mu.RUnlock()
	if out == nil {
		out = []ChatInfo{}
	}
	slices.SortFunc(out, func(a, b ChatInfo) int {
		if a.Starred != b.Starred {
			if a.Starred {
				return -1
			}
			return 1
		}
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), compareIDs(b.ID, a.ID))
	})
	return out
}

// commonBytes ranks bytes by how often they occur in text, the most
// common first: a search looks for its query's rarest byte, and checks
// the query around each one it finds.
const commonBytes = " etaoinsrhldcumfpgwybvkxjqz0123456789.,-_/'\"():;"

// rarest returns the index in q of the byte least likely in text.
func rarest(q string) int {
	best, rank := 0, -1
	for i := 0; i < len(q); i++ {
		r := strings.IndexByte(commonBytes, q[i])
		if r < 0 {
			r = len(commonBytes) // punctuation, bytes of other scripts: rarer still
		}
		if r > rank {
			best, rank = i, r
		}
	}
	return best
}

// containsAt reports whether hay holds needle, finding the candidates by
// needle[at] (its rarest byte) with the vectorised IndexByte.
func containsAt(hay, needle []byte, at int) bool {
	if len(needle) == 0 {
		return true
	}
	r := needle[at]
	for i := at; i < len(hay); {
		j := bytes.IndexByte(hay[i:], r)
		if j < 0 {
			return false
		}
		start := i + j - at
		if start+len(needle) <= len(hay) && bytes.Equal(hay[start:start+len(needle)], needle) {
			return true
		}
		i += j + 1
	}
	return false
}

// parallelSearch is how many Chats make a search worth splitting.
const parallelSearch = 2048

// Chat returns one Chat with its messages, their content resolved. The
// messages out of memory are folded again from the journal.
func (m *ChatModel) Chat(id string) (Chat, bool) {
	m.sh.mu.RLock()
	c, ok := m.chats[id]
	var out Chat
	evicted := 0
	if ok {
		out = Chat{ChatInfo: c.ChatInfo, Messages: slices.Clone(c.Messages), Attachments: slices.Clone(c.Attachments)}
		evicted = c.Evicted
	}
	r, j := m.sh.blobs, m.sh.journal
	m.sh.mu.RUnlock()
	if evicted > 0 {
		out.Messages = append(m.evictedMessages(j, id, evicted), out.Messages...)
	}
	for i := range out.Messages {
		m := &out.Messages[i]
		m.Content, m.Reasoning = resolveText(r, m.Content), resolveText(r, m.Reasoning)
		if len(m.ToolCalls) > 0 {
			m.ToolCalls = slices.Clone(m.ToolCalls)
			for j := range m.ToolCalls {
				m.ToolCalls[j].Arguments, m.ToolCalls[j].Result = resolveJSON(r, m.ToolCalls[j].Arguments), resolveText(r, m.ToolCalls[j].Result)
			}
		}
	}
	return out, ok
}

// evictedMessages are the first n messages of Chat id, folded again from
// the journal or taken from the cache. A journal that cannot be read gives
// none (the Chat's message_count still counts them).
func (m *ChatModel) evictedMessages(j RefoldJournal, id string, n int) []ChatMessage {
	key := refoldKey{id: id} // one entry per Chat: its first messages never change
	if msgs, ok := m.refolded.get(key); ok && len(msgs) >= n {
		return slices.Clone(msgs[:n])
	}
	c, err := refoldChat(context.Background(), j, id, math.MaxUint64)
	if err != nil || len(c.Messages) < n {
		return nil
	}
	msgs := c.Messages[:n:n]
	if n <= refoldChatMessages {
		m.refolded.put(key, msgs)
	}
	return slices.Clone(msgs)
}

// refoldChat folds Chat id again, whole, from its events up to seq upTo;
// a fork's source is folded again up to the fork.
func refoldChat(ctx context.Context, j RefoldJournal, id string, upTo uint64) (*Chat, error) {
	tmp := newChatModel(&shared{}) // evicts nothing
	err := refoldEvents(ctx, j, id, upTo, func(env journal.Envelope, p events.Payload) error {
		if e, ok := p.(events.ChatCreated); ok && e.ForkOf != nil {
			src, err := refoldChat(ctx, j, e.ForkOf.ChatID, env.Seq)
			if err != nil {
				return err
			}
			tmp.chats[e.ForkOf.ChatID] = src
		}
		return tmp.foldChat(id, env.At, p)
	})
	if c := tmp.chats[id]; c != nil && err == nil {
		return c, nil
	}
	return nil, cmp.Or(err, fmt.Errorf("chat %s: no events", id))
}

// ChatInfo returns one Chat without its messages.
func (m *ChatModel) ChatInfo(id string) (ChatInfo, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	if c, ok := m.chats[id]; ok {
		return c.ChatInfo, true
	}
	return ChatInfo{}, false
}

// LiveChatTurns lists the Chats whose turn has begun and not ended.
func (m *ChatModel) LiveChatTurns() []ChatInfo {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	var out []ChatInfo
	for _, c := range m.chats {
		if c.ActiveTurn != "" {
			out = append(out, c.ChatInfo)
		}
	}
	return out
}

func (f *SharedFile) copy() SharedFile {
	out := *f
	out.Tags = slices.Clone(f.Tags)
	out.Chats = make([]string, 0, len(f.ChatIDs))
	for id := range f.ChatIDs {
		out.Chats = append(out.Chats, id)
	}
	slices.SortFunc(out.Chats, compareIDs)
	out.ChatIDs = nil
	return out
}

// SharedFiles lists the shared store's entries, oldest first. A non-empty
// q keeps those whose name holds it (ignoring case); a non-empty tag those
// tagged with it.
func (m *ChatModel) SharedFiles(q, tag string) []SharedFile {
	q = strings.ToLower(q)
	m.sh.mu.RLock()
	out := []SharedFile{}
	for _, f := range m.files {
		if (q == "" || strings.Contains(strings.ToLower(f.Name), q)) && (tag == "" || slices.Contains(f.Tags, tag)) {
			out = append(out, f.copy())
		}
	}
	m.sh.mu.RUnlock()
	slices.SortFunc(out, func(a, b SharedFile) int { return compareIDs(a.ID, b.ID) })
	return out
}

// SharedFile returns one entry of the shared store.
func (m *ChatModel) SharedFile(id string) (SharedFile, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	if f, ok := m.files[id]; ok {
		return f.copy(), true
	}
	return SharedFile{}, false
}

// A2ATask is an inbound A2A task: what was received and how it ended.
type A2ATask struct {
	ID         string      `json:"id"`
	ReceiverID string      `json:"receiver_id"`
	AgentID    string      `json:"agent_id"`
	ContextID  string      `json:"context_id"`
	Message    events.JSON `json:"message"`
	Text       events.Text `json:"text"`
	// State is "working" until the task ends "completed" or "failed".
	State     string      `json:"state"`
	Output    events.Text `json:"output"`
	Error     string      `json:"error,omitempty"`
	Usage     usage.View  `json:"usage"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
	Version   uint64      `json:"-"`
}

func (m *ChatModel) foldA2A(id string, at time.Time, p events.Payload) error {
	switch e := p.(type) {
	case events.A2ATaskReceived:
		m.a2a[id] = &A2ATask{ID: id, ReceiverID: e.ReceiverID, AgentID: e.AgentID, ContextID: e.ContextID, Message: e.Message, Text: e.Text,
			State: "working", CreatedAt: at, UpdatedAt: at, Version: 1}
	case events.A2ATaskEnded:
		t, ok := m.a2a[id]
		if !ok {
			return fmt.Errorf("unknown a2a task %s", id)
		}
		t.State, t.Output, t.Error, t.Usage = e.State, e.Output, e.Error, e.Tokens.View()
		t.UpdatedAt = at
		t.Version++
	}
	return nil
}

// A2ATask returns one inbound A2A task, its content resolved.
func (m *ChatModel) A2ATask(id string) (A2ATask, bool) {
	m.sh.mu.RLock()
	t, ok := m.a2a[id]
	var out A2ATask
	if ok {
		out = *t
	}
	r := m.sh.blobs
	m.sh.mu.RUnlock()
	out.Message, out.Text, out.Output = resolveJSON(r, out.Message), resolveText(r, out.Text), resolveText(r, out.Output)
	return out, ok
}

// LiveA2ATasks lists the A2A tasks received and not ended.
func (m *ChatModel) LiveA2ATasks() []A2ATask {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	var out []A2ATask
	for _, t := range m.a2a {
		if t.State == "working" {
			out = append(out, *t)
		}
	}
	return out
}
