package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"strings"

	a2acmd "lathe/commands/a2a"
	"lathe/commands/core"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/julienschmidt/httprouter"

	"lathe/projections"
)

// Inbound A2A (agent-to-agent), on the A2A project's Go SDK: its types, and
// its JSON-RPC 2.0 transport (a2asrv.NewJSONRPCHandler) over a request
// handler of ours that journals each task (commands.A2A). Lathe never calls
// out. Both routes are behind the Guard's authentication.
//
//	GET  /.well-known/agent-card.json (and agent.json) → the agent card: one
//	                               skill per receiver, the security schemes
//	POST /a2a/tasks              → JSON-RPC: message/send dispatches to the
//	                               receiver named by metadata.receiver_id (of
//	                               the params or the message) or ?receiver_id=
//	                               (optional with one receiver); tasks/get
//	                               reads a task back. Streaming, cancel and
//	                               push notifications are unsupported.

// A2ACommands are the A2A routes' commands (commands.A2A).
type A2ACommands interface {
	Receivers() []core.A2AReceiver
	Dispatch(ctx context.Context, t a2acmd.A2ATask) (projections.A2ATask, error)
	Task(id string) (projections.A2ATask, error)
}

// a2aProtocolVersion is the A2A protocol version the card declares.
const a2aProtocolVersion = "0.3.0"

// tasks is POST /a2a/tasks: the SDK's JSON-RPC transport over commands.A2A.
func (s *a2aRoutes) tasks(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	r.Body = http.MaxBytesReader(w, r.Body, maxJSONBytes)
	ctx := context.WithValue(r.Context(), receiverKey{}, r.URL.Query().Get("receiver_id"))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	rw := &rpcMessages{ResponseWriter: w}
	s.rpc.ServeHTTP(rw, r.WithContext(ctx))
	rw.flush()
}

// agentCard serves the A2A discovery card; its url is this listener's
// /a2a/tasks (cardHost).
func (s *a2aRoutes) agentCard(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	card := a2a.AgentCard{
		Name:               "Lathe",
		Description:        "Lathe's configured Agents, each reachable as a skill: send a message with metadata.receiver_id naming the skill.",
		URL:                scheme + "://" + cardHost(r, s.apiKeys || s.bearers) + "/a2a/tasks",
		Version:            s.version,
		ProtocolVersion:    a2aProtocolVersion,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities:       a2a.AgentCapabilities{},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills:             []a2a.AgentSkill{},
	}
	card.SecuritySchemes, card.Security = a2aSecurity(s.apiKeys, s.bearers)
	for _, rc := range s.cmds.Receivers() {
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: rc.ID, Name: rc.Name, Description: rc.Description, Tags: []string{"agent:" + rc.AgentID}})
	}
	writeJSON(w, http.StatusOK, card)
}

// cardHost is the host the card's url names. In loopback mode the Guard
// has checked Host; with credentials it accepts any Host, so the card names
// the address the connection reached (the listener's), never the request's
// Host header, which a client or a proxy in between chooses (issue 23).
func cardHost(r *http.Request, credentials bool) string {
	if !credentials {
		return r.Host
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return a.String()
	}
	return "localhost"
}

type receiverKey struct{}

// a2aHandler is the SDK's request handler over commands.A2A.
type a2aHandler struct{ cmds A2ACommands }

var _ a2asrv.RequestHandler = a2aHandler{}

// a2aInput reads a message/send: the receiver it names and the text of its
// parts. A file part is refused; a data part is sent as its JSON.
func a2aInput(ctx context.Context, p *a2a.MessageSendParams, receivers []core.A2AReceiver) (a2acmd.A2ATask, error) {
	m := p.Message
	if m == nil {
		return a2acmd.A2ATask{}, fmt.Errorf("params.message is required: %w", a2a.ErrInvalidParams)
	}
	if m.TaskID != "" {
		return a2acmd.A2ATask{}, fmt.Errorf("each message/send starts a new task; taskId is not accepted: %w", a2a.ErrUnsupportedOperation)
	}
	var id string
	for _, meta := range []map[string]any{p.Metadata, m.Metadata} {
		if v, ok := meta["receiver_id"]; ok {
			s, isStr := v.(string)
			if !isStr || s == "" {
				return a2acmd.A2ATask{}, fmt.Errorf("metadata.receiver_id must be a non-empty string: %w", a2a.ErrInvalidParams)
			}
			id = s
			break
		}
	}
	if q, _ := ctx.Value(receiverKey{}).(string); id == "" && q != "" {
		id = q
	}
	if id == "" {
		if len(receivers) != 1 {
			return a2acmd.A2ATask{}, fmt.Errorf("metadata.receiver_id is required: name one of the agent card's skills: %w", a2a.ErrInvalidParams)
		}
		id = receivers[0].ID
	}
	var text []string
	for _, part := range m.Parts {
		switch pt := part.(type) {
		case a2a.TextPart:
			text = append(text, pt.Text)
		case a2a.DataPart:
			b, err := json.Marshal(pt.Data)
			if err != nil {
				return a2acmd.A2ATask{}, fmt.Errorf("a data part: %v: %w", err, a2a.ErrInvalidParams)
			}
			text = append(text, string(b))
		default:
			return a2acmd.A2ATask{}, fmt.Errorf("only text and data parts are accepted: %w", a2a.ErrUnsupportedContentType)
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return a2acmd.A2ATask{}, fmt.Errorf("%v: %w", err, a2a.ErrInvalidParams)
	}
	return a2acmd.A2ATask{ReceiverID: id, ContextID: m.ContextID, Message: raw, Text: strings.Join(text, "\n")}, nil
}

// a2aError turns a command's error into the A2A error it is.
func a2aError(err error) error {
	switch {
	case errors.Is(err, core.ErrNotFound), errors.Is(err, core.ErrInvalid):
		return fmt.Errorf("%s: %w", errorMessage(err), a2a.ErrInvalidParams)
	case errors.Is(err, core.ErrUnavailable):
		return fmt.Errorf("%s: %w", errorMessage(err), a2a.ErrServerError)
	}
	return fmt.Errorf("%s: %w", err.Error(), a2a.ErrInternalError)
}

func (h a2aHandler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	in, err := a2aInput(ctx, p, h.cmds.Receivers())
	if err != nil {
		return nil, err
	}
	t, err := h.cmds.Dispatch(ctx, in)
	if err != nil {
		return nil, a2aError(err)
	}
	var limit *int
	if p.Config != nil {
		limit = p.Config.HistoryLength
	}
	return a2aTask(t, limit), nil
}

func (h a2aHandler) OnGetTask(_ context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	if q.ID == "" {
		return nil, fmt.Errorf("params.id is required: %w", a2a.ErrInvalidParams)
	}
	t, err := h.cmds.Task(string(q.ID))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", errorMessage(err), a2a.ErrTaskNotFound)
	}
	return a2aTask(t, q.HistoryLength), nil
}

// a2aTask renders a journaled task as the protocol's Task: its status with
// the Agent's message, its answer as an artifact, and its history.
func a2aTask(t projections.A2ATask, historyLength *int) *a2a.Task {
	at := t.UpdatedAt
	task := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: a2a.TaskStatus{State: a2a.TaskState(t.State), Timestamp: &at},
		Metadata: map[string]any{"receiver_id": t.ReceiverID, "agent_id": t.AgentID, "usage": t.Usage}}
	var user a2a.Message
	if json.Unmarshal(t.Message.Value(), &user) != nil {
		user = *a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: t.Text.String()})
	}
	user.TaskID, user.ContextID = task.ID, t.ContextID
	task.History = []*a2a.Message{&user}
	var reply string
	switch t.State {
	case a2acmd.A2ACompleted:
		reply = t.Output.String()
		task.Artifacts = []*a2a.Artifact{{ID: "answer", Name: "answer", Parts: a2a.ContentParts{a2a.TextPart{Text: reply}}}}
	case a2acmd.A2AFailed:
		reply = a2aFailure(t.Error)
	}
	if reply != "" {
		agentMsg := &a2a.Message{ID: t.ID + "-reply", Role: a2a.MessageRoleAgent, TaskID: task.ID, ContextID: t.ContextID,
			Parts: a2a.ContentParts{a2a.TextPart{Text: reply}}}
		task.Status.Message = agentMsg
		task.History = append(task.History, agentMsg)
	}
	if historyLength != nil && *historyLength >= 0 && *historyLength < len(task.History) {
		task.History = task.History[len(task.History)-*historyLength:]
	}
	return task
}

func (a2aHandler) OnCancelTask(context.Context, *a2a.TaskIDParams) (*a2a.Task, error) {
	return nil, fmt.Errorf("a task runs to its end within its message/send: %w", a2a.ErrTaskNotCancelable)
}

func (a2aHandler) OnResubscribeToTask(context.Context, *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return unsupportedStream
}

func (a2aHandler) OnSendMessageStream(context.Context, *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return unsupportedStream
}

func unsupportedStream(yield func(a2a.Event, error) bool) {
	yield(nil, fmt.Errorf("streaming is not supported; use message/send: %w", a2a.ErrUnsupportedOperation))
}

func (a2aHandler) OnGetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (a2aHandler) OnListTaskPushConfig(context.Context, *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (a2aHandler) OnSetTaskPushConfig(context.Context, *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (a2aHandler) OnDeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigParams) error {
	return a2a.ErrPushNotificationNotSupported
}

func (a2aHandler) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}
