package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"lathe/commands/chats"
	"lathe/commands/core"

	"github.com/julienschmidt/httprouter"
	"github.com/oklog/ulid/v2"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/usage"
)

// The compatibility Chats (commands.Chats), their attachments and the
// shared file store (commands.SharedFiles), and the chat-turn / chat-stop
// /ws commands, whose frames go only to the connection that sent them.
//
//	GET    /api/chat?q=                     → 200 [projections.ChatInfo…] (no messages)
//	POST   /api/chat {agent_id, name?}      → 201 chat; 404 unknown Agent
//	GET    /api/chat/:id                    → 200 chat
//	PATCH  /api/chat/:id {name?, starred?, system_override?, model_override?}
//	                                        → 200 chat; null clears an override
//	DELETE /api/chat/:id                    → 200 {id, deleted}
//	POST   /api/chat/:id/fork {truncate_at, replacement_content?, replacement_role?}
//	                                        → 201 the new chat
//	GET    /api/chat/:id/export?format=markdown|md|json
//	POST   /api/chat/:id/attach?pinned=     multipart, one file → 201 attachment
//	PUT    /api/chat/:id/attach {file_id, pinned?} → 200 attachment
//	GET    /api/chat/:id/attach/:file_id    → the bytes (404 unless the Chat holds it)
//	PATCH  /api/chat/:id/attach/:file_id {pinned} → 200 attachment
//	DELETE /api/chat/:id/attach/:file_id    → 200 {file_id, detached}
//	GET    /api/files?q=&tag=               → 200 [projections.SharedFile…]
//	POST   /api/files?tags=a,b              multipart, one file → 201 entry
//	GET    /api/files/:id                   → 200 entry
//	PATCH  /api/files/:id {name?, tags?}    → 200 entry
//	DELETE /api/files/:id                   → 200 {id, deleted}; 409 retained
//	GET    /api/files/:id/bytes             → the bytes

// ChatCommands are the Chat routes' and /ws Chat commands' commands
// (commands.Chats).
type ChatCommands interface {
	CreateChat(ctx context.Context, agentID string, name *string) (projections.Chat, error)
	PatchChat(ctx context.Context, id string, p chats.ChatPatch) (projections.Chat, error)
	DeleteChat(ctx context.Context, id string) error
	ForkChat(ctx context.Context, id string, req chats.ChatForkRequest) (projections.Chat, error)
	// ChatTurn begins turn turnID, a ULID; its frames come as live deltas
	// (Server.SendLive).
	ChatTurn(ctx context.Context, chatID, turnID, content string) error
	StopChat(chatID string) error
}

// SharedFileCommands are the shared store's and the Chat attachment
// routes' commands (commands.SharedFiles).
type SharedFileCommands interface {
	Upload(ctx context.Context, up chats.FileUpload) (projections.SharedFile, error)
	PatchFile(ctx context.Context, id string, name *string, tags *[]string) (projections.SharedFile, error)
	DeleteFile(ctx context.Context, id string) error
	OpenFile(id string) (projections.SharedFile, io.ReadCloser, error)
	AttachUpload(ctx context.Context, chatID string, up chats.FileUpload, pinned bool) (projections.ChatAttachment, error)
	AttachFile(ctx context.Context, chatID, fileID string, pinned bool) (projections.ChatAttachment, error)
	PinFile(ctx context.Context, chatID, fileID string, pinned bool) (projections.ChatAttachment, error)
	DetachFile(ctx context.Context, chatID, fileID string) error
	OpenChatFile(chatID, fileID string) (projections.SharedFile, io.ReadCloser, error)
}

// chatAttachmentView is a Chat's relation with the entry it names.
type chatAttachmentView struct {
	projections.ChatAttachment
	File *projections.SharedFile `json:"file,omitempty"`
}

// chatView is a Chat with its attachments' entries.
type chatView struct {
	projections.Chat
	Attachments []chatAttachmentView `json:"attachments"`
}

func (s *chatRoutes) attachmentView(a projections.ChatAttachment) chatAttachmentView {
	v := chatAttachmentView{ChatAttachment: a}
	if f, ok := s.read.SharedFile(a.FileID); ok {
		v.File = &f
	}
	return v
}

func (s *chatRoutes) chatView(c projections.Chat) chatView {
	v := chatView{Chat: c, Attachments: make([]chatAttachmentView, len(c.Attachments))}
	for i, a := range c.Attachments {
		v.Attachments[i] = s.attachmentView(a)
	}
	return v
}

func (s *chatRoutes) listChats(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.read.Chats(r.URL.Query().Get("q")))
}

// createChatBody is the body of createChat.
type createChatBody struct {
	AgentID *string `json:"agent_id" required:"true" minLength:"1"`
	Name    *string `json:"name"`
}

func (s *chatRoutes) createChat(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req createChatBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.AgentID == nil || *req.AgentID == "" {
		writeError(w, http.StatusBadRequest, "agent_id is required")
		return
	}
	c, err := s.chats.CreateChat(r.Context(), *req.AgentID, req.Name)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.chatView(c))
}

// pathChat answers the Chat the path names, or 404.
func (s *chatRoutes) pathChat(w http.ResponseWriter, p httprouter.Params) (projections.Chat, bool) {
	c, ok := s.read.Chat(p.ByName("id"))
	if !ok {
		fail(w, errMissing("chat", p.ByName("id")))
	}
	return c, ok
}

func (s *chatRoutes) getChat(w http.ResponseWriter, _ *http.Request, p httprouter.Params) {
	if c, ok := s.pathChat(w, p); ok {
		writeJSON(w, http.StatusOK, s.chatView(c))
	}
}

// override decodes a PATCH override field: absent is nil, null clears.
func override(field string, raw json.RawMessage) (*events.Override, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v *string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: field %q must be a string or null", core.ErrInvalid, field)
	}
	return &events.Override{Value: v}, nil
}

// patchChatBody is the body of patchChat.
type patchChatBody struct {
	Name           *string         `json:"name"`
	Starred        *bool           `json:"starred"`
	SystemOverride json.RawMessage `json:"system_override"`
	ModelOverride  json.RawMessage `json:"model_override"`
}

func (s *chatRoutes) patchChat(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req patchChatBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	patch := chats.ChatPatch{Name: req.Name, Starred: req.Starred}
	var err error
	if patch.SystemOverride, err = override("system_override", req.SystemOverride); err != nil {
		fail(w, err)
		return
	}
	if patch.ModelOverride, err = override("model_override", req.ModelOverride); err != nil {
		fail(w, err)
		return
	}
	c, err := s.chats.PatchChat(r.Context(), p.ByName("id"), patch)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.chatView(c))
}

func (s *chatRoutes) deleteChat(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	if err := s.chats.DeleteChat(r.Context(), id); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// forkChatBody is the body of forkChat.
type forkChatBody struct {
	TruncateAt         *int    `json:"truncate_at" required:"true"`
	ReplacementContent *string `json:"replacement_content"`
	ReplacementRole    *string `json:"replacement_role"`
}

func (s *chatRoutes) forkChat(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req forkChatBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.TruncateAt == nil {
		writeError(w, http.StatusBadRequest, "truncate_at is required")
		return
	}
	c, err := s.chats.ForkChat(r.Context(), p.ByName("id"), chats.ChatForkRequest{
		TruncateAt: *req.TruncateAt, ReplacementContent: req.ReplacementContent, ReplacementRole: req.ReplacementRole})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.chatView(c))
}

// exportChat answers a Chat's transcript as Markdown (the default) or,
// with ?format=json, as the Chat record.
func (s *chatRoutes) exportChat(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	format := r.URL.Query().Get("format")
	switch format {
	case "", "markdown", "md", "json":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("format must be markdown, md or json, not %q", format))
		return
	}
	c, ok := s.pathChat(w, p)
	if !ok {
		return
	}
	ext := "md"
	if format == "json" {
		ext = "json"
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": "chat-" + c.ID + "." + ext}))
	if ext == "json" {
		writeJSON(w, http.StatusOK, s.chatView(c))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/markdown; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(chatMarkdown(c))
}

// chatMarkdown renders a Chat as a Markdown transcript.
func chatMarkdown(c projections.Chat) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\nAgent: `%s`", c.Name, c.AgentID)
	if c.ModelOverride != nil {
		fmt.Fprintf(&b, " · model `%s`", *c.ModelOverride)
	}
	b.WriteString("\n")
	if c.SystemOverride != nil {
		fmt.Fprintf(&b, "\nSystem prompt:\n\n> %s\n", strings.ReplaceAll(*c.SystemOverride, "\n", "\n> "))
	}
	for _, m := range c.Messages {
		title := "User"
		if m.Role == events.RoleAssistant {
			title = "Assistant"
		}
		fmt.Fprintf(&b, "\n## %s · %s\n\n", title, m.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"))
		for _, tc := range m.ToolCalls {
			mark := "✓"
			if tc.IsError {
				mark = "✕"
			}
			fmt.Fprintf(&b, "- tool `%s` %s: %s\n", tc.Name, mark, strings.ReplaceAll(tc.Result.String(), "\n", " "))
		}
		if len(m.ToolCalls) > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s\n", m.Content.String())
		if m.Refused {
			b.WriteString("\n_(refused by a hook: no model saw it)_\n")
		}
		if m.Error != "" {
			fmt.Fprintf(&b, "\n_(%s: %s)_\n", m.Outcome, m.Error)
		} else if m.Outcome == events.ChatStopped {
			b.WriteString("\n_(stopped)_\n")
		}
		if u := m.Usage; u != nil {
			known := ""
			if !u.TokenUsageKnown {
				known = " (subtotal)"
			}
			fmt.Fprintf(&b, "\n_Tokens: %d in, %d out, %d reasoning, %d total%s_\n", u.InputTokens, u.OutputTokens, u.ReasoningTokens, u.TotalTokens, known)
		}
	}
	return b.Bytes()
}

// upload reads a multipart body with one file part; tags come as ?tags=a,b
// or as "tags" fields (comma-separated, repeatable) before the file, and
// ?pinned= or a "pinned" field says whether a Chat attachment is pinned.
func upload(r *http.Request) (chats.FileUpload, bool, error) {
	q := r.URL.Query()
	var tags []string
	if q.Has("tags") {
		tags = splitTags(q.Get("tags"))
	}
	pinned, err := boolField("pinned", q.Get("pinned"))
	if err != nil {
		return chats.FileUpload{}, false, err
	}
	file, finish, err := singleFile(r, func(part *multipart.Part) error {
		switch part.FormName() {
		case "tags", "pinned":
			b, err := io.ReadAll(io.LimitReader(part, 4096))
			if err != nil {
				return multipartError(err)
			}
			if part.FormName() == "tags" {
				tags = append(tags, splitTags(string(b))...)
			} else if pinned, err = boolField("pinned", string(b)); err != nil {
				return err
			}
		}
		return skipPart(part)
	}, skipPart)
	if err != nil {
		return chats.FileUpload{}, false, err
	}
	return chats.FileUpload{Name: file.FileName(), MediaType: file.Header.Get("Content-Type"), Body: partReader{file},
		Finish: finish, Tags: tags}, pinned, nil
}

func splitTags(s string) []string {
	var out []string
	for t := range strings.SplitSeq(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func boolField(name, v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s must be true or false", core.ErrInvalid, name)
	}
	return b, nil
}

func (s *chatRoutes) attachUpload(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	up, pinned, err := upload(r)
	if err != nil {
		fail(w, err)
		return
	}
	a, err := s.files.AttachUpload(r.Context(), id, up, pinned)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.attachmentView(a))
}

// attachFileBody is the body of attachFile.
type attachFileBody struct {
	FileID *string `json:"file_id" required:"true" minLength:"1"`
	Pinned *bool   `json:"pinned"`
}

func (s *chatRoutes) attachFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req attachFileBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.FileID == nil || *req.FileID == "" {
		writeError(w, http.StatusBadRequest, "file_id is required")
		return
	}
	a, err := s.files.AttachFile(r.Context(), p.ByName("id"), *req.FileID, req.Pinned != nil && *req.Pinned)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.attachmentView(a))
}

func (s *chatRoutes) chatFileBytes(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	f, rc, err := s.files.OpenChatFile(p.ByName("id"), p.ByName("file_id"))
	s.serveFile(w, r, f, rc, err)
}

func (s logged) serveFile(w http.ResponseWriter, r *http.Request, f projections.SharedFile, rc io.ReadCloser, err error) {
	if err != nil {
		fail(w, err)
		return
	}
	defer rc.Close()
	if err := serveBytes(w, r, f.Name, f.ContentType, f.Size, rc); err != nil {
		s.log.Warn("shared file bytes", "file", f.ID, "err", err)
	}
}

// pinChatFileBody is the body of pinChatFile.
type pinChatFileBody struct {
	Pinned *bool `json:"pinned" required:"true"`
}

func (s *chatRoutes) pinChatFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req pinChatFileBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.Pinned == nil {
		writeError(w, http.StatusBadRequest, "pinned is required")
		return
	}
	a, err := s.files.PinFile(r.Context(), p.ByName("id"), p.ByName("file_id"), *req.Pinned)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.attachmentView(a))
}

func (s *chatRoutes) detachChatFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	fid := p.ByName("file_id")
	if err := s.files.DetachFile(r.Context(), p.ByName("id"), fid); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, detachedBody{FileID: fid, Detached: true})
}

// detachedBody is DELETE /api/chat/{id}/attach/{file_id}.
type detachedBody struct {
	FileID   string `json:"file_id"`
	Detached bool   `json:"detached"`
}

func (s *sharedFileRoutes) listFiles(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	writeJSON(w, http.StatusOK, s.read.SharedFiles(q.Get("q"), q.Get("tag")))
}

func (s *sharedFileRoutes) uploadFile(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	up, _, err := upload(r)
	if err != nil {
		fail(w, err)
		return
	}
	f, err := s.files.Upload(r.Context(), up)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, f)
}

func (s *sharedFileRoutes) getFile(w http.ResponseWriter, _ *http.Request, p httprouter.Params) {
	f, ok := s.read.SharedFile(p.ByName("id"))
	if !ok {
		fail(w, errMissing("file", p.ByName("id")))
		return
	}
	writeJSON(w, http.StatusOK, f)
}

// patchFileBody is the body of patchFile.
type patchFileBody struct {
	Name *string   `json:"name"`
	Tags *[]string `json:"tags"`
}

func (s *sharedFileRoutes) patchFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req patchFileBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	f, err := s.files.PatchFile(r.Context(), p.ByName("id"), req.Name, req.Tags)
	respond(w, f, err)
}

func (s *sharedFileRoutes) deleteFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	if err := s.files.DeleteFile(r.Context(), id); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

func (s *sharedFileRoutes) fileBytes(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	f, rc, err := s.files.OpenFile(p.ByName("id"))
	s.serveFile(w, r, f, rc, err)
}

// Chat frames (spec: Server frames: Chat), sent only to the connection
// that issued the chat-turn.

type chatStartFrame struct {
	Kind   string `json:"kind"` // "chat-start"
	ChatID string `json:"chat_id"`
	TurnID string `json:"turn_id"`
	Agent  string `json:"agent"`
}

type chatDeltaFrame struct {
	Kind   string `json:"kind"` // "chat-token" or "chat-reasoning"
	ChatID string `json:"chat_id"`
	TurnID string `json:"turn_id"`
	Delta  string `json:"delta"`
}

type chatToolFrame struct {
	Kind      string          `json:"kind"` // "chat-tool-start" or "chat-tool-result"
	ChatID    string          `json:"chat_id"`
	TurnID    string          `json:"turn_id"`
	Agent     string          `json:"agent"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    *string         `json:"result,omitempty"`
	IsError   *bool           `json:"is_error,omitempty"`
}

// chatEndFrame is chat-done, chat-stopped or chat-error.
type chatEndFrame struct {
	Kind   string `json:"kind"`
	ChatID string `json:"chat_id"`
	TurnID string `json:"turn_id"`
	Error  string `json:"error,omitempty"`
	usage.View
}

// chatFrame is the frame of a Chat turn's live delta (events.DeltaChat*),
// and whether it is the turn's last; nil for a delta of no known kind.
func chatFrame(d events.LiveDelta) (frame any, last bool) {
	switch d.Kind {
	case events.DeltaChatStart:
		return chatStartFrame{Kind: "chat-start", ChatID: d.Chat, TurnID: d.TurnID, Agent: d.Agent}, false
	case events.DeltaChatToken, events.DeltaChatReasoning:
		return chatDeltaFrame{Kind: d.Kind, ChatID: d.Chat, TurnID: d.TurnID, Delta: d.Delta}, false
	case events.DeltaChatToolStart:
		return chatToolFrame{Kind: "chat-tool-start", ChatID: d.Chat, TurnID: d.TurnID, Agent: d.Agent, CallID: d.Tool.CallID,
			Name: d.Tool.Name, Arguments: d.Tool.Arguments}, false
	case events.DeltaChatToolResult:
		return chatToolFrame{Kind: "chat-tool-result", ChatID: d.Chat, TurnID: d.TurnID, Agent: d.Agent, CallID: d.Tool.CallID,
			Name: d.Tool.Name, Result: &d.Tool.Result, IsError: &d.Tool.IsError}, false
	case events.DeltaChatEnd:
		e := d.ChatEnd
		return chatEndFrame{Kind: "chat-" + e.Outcome, ChatID: d.Chat, TurnID: d.TurnID, Error: e.Error, View: e.Usage}, true
	}
	return nil, false
}

// sendChat sends a Chat turn's live delta as its frame to the connection
// that issued the turn, by the hub's routes.
func (s *Server) sendChat(d events.LiveDelta) {
	f, last := chatFrame(d)
	if f == nil {
		return
	}
	data, err := json.Marshal(f)
	if err != nil {
		s.log.Error("encode chat frame", "err", err)
		return
	}
	s.hub.chats.send(d.TurnID, data, last)
}

// chatTurnCommand is the chat-turn /ws command.
type chatTurnCommand struct {
	ChatID  string `json:"chat_id" required:"true" minLength:"1"`
	Content string `json:"content"`
}

// handleChatTurn begins a Chat turn. A refused one (unknown Chat, busy
// Chat, bad content) is a chat-error with no turn and no usage.
func (s *chatRoutes) handleChatTurn(ctx context.Context, c *Client, raw json.RawMessage) {
	var cmd chatTurnCommand
	if !decodeCommand(c, "chat-turn", raw, &cmd) {
		return
	}
	if cmd.ChatID == "" {
		c.Send(ErrorFrame(`malformed chat-turn command: "chat_id" is required`))
		return
	}
	// The turn's frames are routed to c before it begins: its first may
	// come before ChatTurn returns.
	turn := ulid.Make().String()
	s.routes.register(turn, c)
	if err := s.chats.ChatTurn(ctx, cmd.ChatID, turn, cmd.Content); err != nil {
		s.routes.drop(turn)
		s.sendTo(c, chatEndFrame{Kind: "chat-error", ChatID: cmd.ChatID, Error: errorMessage(err),
			View: usage.Tokens{TokenUsageKnown: true}.View()})
	}
}

// chatStopCommand is the chat-stop /ws command.
type chatStopCommand struct {
	ChatID string `json:"chat_id" required:"true" minLength:"1"`
}

// handleChatStop asks the Chat's running turn to stop; its terminal frame
// goes to the connection that began it. Nothing to stop is an error frame.
func (s *chatRoutes) handleChatStop(_ context.Context, c *Client, raw json.RawMessage) {
	var cmd chatStopCommand
	if !decodeCommand(c, "chat-stop", raw, &cmd) {
		return
	}
	if cmd.ChatID == "" {
		c.Send(ErrorFrame(`malformed chat-stop command: "chat_id" is required`))
		return
	}
	if err := s.chats.StopChat(cmd.ChatID); err != nil {
		c.Send(ErrorFrame("chat-stop: " + errorMessage(err)))
	}
}
