// Package a2aserve serves inbound A2A for the transport (transport.A2AServer),
// beside it rather than in it: the A2A SDK's 0.3 layer brings the 0.3
// client's gRPC bindings, which the transport's closure must not hold
// (cmd/lathe/deps_test.go).
package a2aserve

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net"
	"net/http"
	"strings"

	a2acmd "lathe/commands/a2a"
	"lathe/commands/core"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"lathe/projections"
	"lathe/runtime/errs"
)

// Inbound A2A (agent-to-agent), on the A2A project's Go SDK (a2a-go/v2):
// its types, its A2A 1.0 JSON-RPC binding (a2asrv.NewJSONRPCHandler) and
// its A2A 0.3 one (a2av0.NewJSONRPCHandler), both over one request handler
// of ours that journals each task (commands.A2A). Lathe never calls out.
// Both routes are behind the Guard's authentication.
//
//	GET  /.well-known/agent-card.json (and agent.json) → the agent card, in
//	                               both versions' fields at once (a2av0's
//	                               union card): supportedInterfaces names
//	                               /a2a/tasks for 1.0 and for 0.3, url and
//	                               protocolVersion its 0.3 interface; one
//	                               skill per receiver; the security schemes
//	POST /a2a/tasks              → JSON-RPC, in the version the request's
//	                               A2A-Version names (header or query;
//	                               none is 0.3, as A2A 1.0 §3.6.2 says):
//	                               SendMessage (1.0) or message/send (0.3)
//	                               dispatches to the receiver named by
//	                               metadata.receiver_id (of the params or
//	                               the message) or ?receiver_id= (optional
//	                               with one receiver); GetTask or tasks/get
//	                               reads a task back. Streaming, listing,
//	                               cancel and push notifications are
//	                               unsupported.

// Commands are the A2A routes' commands (commands.A2A).
type Commands interface {
	Receivers() []core.A2AReceiver
	Dispatch(ctx context.Context, t a2acmd.A2ATask) (projections.A2ATask, error)
	Task(id string) (projections.A2ATask, error)
}

// Server serves inbound A2A over its commands.
type Server struct {
	cmds    Commands
	version string
	// v1 and v03 are the SDK's JSON-RPC bindings of A2A 1.0 and 0.3.
	v1, v03 http.Handler
	// apiKeys and bearers: the daemon requires such a credential, so the
	// card declares it and names this listener's own address rather than
	// the request's Host (cardHost).
	apiKeys, bearers bool
}

// MaxBody bounds a JSON-RPC request, as the transport bounds its bodies.
const MaxBody = 1 << 20

// New serves cmds in both protocol versions; version is Lathe's, for the
// card; apiKeys and bearers say which credentials the daemon requires.
func New(cmds Commands, version string, apiKeys, bearers bool) *Server {
	h := a2aHandler{cmds}
	return &Server{cmds: cmds, version: version, apiKeys: apiKeys, bearers: bearers,
		v1: a2asrv.NewJSONRPCHandler(h), v03: a2av0.NewJSONRPCHandler(h)}
}

// Tasks is POST /a2a/tasks: the SDK's JSON-RPC binding of the version the
// request asks for, over commands.A2A.
func (s *Server) Tasks(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	ctx := context.WithValue(r.Context(), receiverKey{}, r.URL.Query().Get("receiver_id"))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	version := r.Header.Get(a2a.SvcParamVersion)
	if version == "" {
		version = r.URL.Query().Get(a2a.SvcParamVersion)
	}
	var rpc http.Handler
	switch majorMinor(version) {
	case "", string(a2av0.Version):
		rpc = s.v03
	case string(a2a.Version):
		rpc = s.v1
	default:
		body, _ := json.Marshal(rpcVersionRefusal(r, version))
		w.WriteHeader(http.StatusOK)
		w.Write(append(body, '\n'))
		return
	}
	rw := &rpcMessages{ResponseWriter: w}
	rpc.ServeHTTP(rw, r.WithContext(ctx))
	rw.flush()
}

// majorMinor is a protocol version as versions are negotiated: its major
// and minor numbers, a patch number ignored (A2A 1.0 §3.6).
func majorMinor(v string) string {
	v = strings.TrimSpace(v)
	if parts := strings.SplitN(v, ".", 3); len(parts) == 3 {
		return parts[0] + "." + parts[1]
	}
	return v
}

// AgentCard serves the A2A discovery card; its interfaces are this
// listener's /a2a/tasks (cardHost), in 1.0 and in 0.3.
func (s *Server) AgentCard(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	url := scheme + "://" + cardHost(r, s.apiKeys || s.bearers) + "/a2a/tasks"
	card := &a2a.AgentCard{
		Name:        "Lathe",
		Description: "Lathe's configured Agents, each reachable as a skill: send a message with metadata.receiver_id naming the skill.",
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: url, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: url, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Version:            s.version,
		Capabilities:       a2a.AgentCapabilities{},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills:             []a2a.AgentSkill{},
	}
	card.SecuritySchemes, card.SecurityRequirements = a2aSecurity(s.apiKeys, s.bearers)
	for _, rc := range s.cmds.Receivers() {
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: rc.ID, Name: rc.Name, Description: rc.Description, Tags: []string{"agent:" + rc.AgentID}})
	}
	body, err := a2av0.NewStaticAgentCardProducer(card).(a2asrv.AgentCardJSONProducer).CardJSON(r.Context())
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		json.NewEncoder(w).Encode(map[string]string{"error": "the agent card: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
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

// a2aHandler is the SDK's request handler over commands.A2A, for both
// protocol versions (a2av0 converts 0.3's requests and answers).
type a2aHandler struct{ cmds Commands }

var _ a2asrv.RequestHandler = a2aHandler{}

// a2aInput reads a SendMessage: the receiver it names and the text of its
// parts. A file part is refused; a data part is sent as its JSON.
func a2aInput(ctx context.Context, p *a2a.SendMessageRequest, receivers []core.A2AReceiver) (a2acmd.A2ATask, error) {
	m := p.Message
	if m == nil {
		return a2acmd.A2ATask{}, a2aRefusal(a2a.ErrInvalidParams, "params.message is required")
	}
	if m.TaskID != "" {
		return a2acmd.A2ATask{}, a2aRefusal(a2a.ErrUnsupportedOperation, "each message starts a new task; taskId is not accepted")
	}
	var id string
	for _, meta := range []map[string]any{p.Metadata, m.Metadata} {
		if v, ok := meta["receiver_id"]; ok {
			s, isStr := v.(string)
			if !isStr || s == "" {
				return a2acmd.A2ATask{}, a2aRefusal(a2a.ErrInvalidParams, "metadata.receiver_id must be a non-empty string")
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
			return a2acmd.A2ATask{}, a2aRefusal(a2a.ErrInvalidParams, "metadata.receiver_id is required: name one of the agent card's skills")
		}
		id = receivers[0].ID
	}
	var text []string
	for _, part := range m.Parts {
		switch pt := part.Content.(type) {
		case a2a.Text:
			text = append(text, string(pt))
		case a2a.Data:
			b, err := json.Marshal(pt.Value)
			if err != nil {
				return a2acmd.A2ATask{}, a2aRefusal(a2a.ErrInvalidParams, "a data part: "+err.Error())
			}
			text = append(text, string(b))
		default:
			return a2acmd.A2ATask{}, a2aRefusal(a2a.ErrUnsupportedContentType, "only text and data parts are accepted")
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return a2acmd.A2ATask{}, a2aRefusal(a2a.ErrInvalidParams, err.Error())
	}
	return a2acmd.A2ATask{ReceiverID: id, ContextID: m.ContextID, Message: raw, Text: strings.Join(text, "\n")}, nil
}

// a2aRefusal is an A2A error whose message says why (the SDKs show the
// message only), the reason also in its data.
func a2aRefusal(class error, reason string) error {
	return a2a.NewError(class, reason).WithDetails(map[string]any{"error": reason})
}

// a2aError turns a command's error into the A2A error it is.
func a2aError(err error) error {
	switch {
	case errors.Is(err, core.ErrNotFound), errors.Is(err, core.ErrInvalid):
		return a2aRefusal(a2a.ErrInvalidParams, errs.Reason(err))
	case errors.Is(err, core.ErrUnavailable):
		return a2aRefusal(a2a.ErrServerError, errs.Reason(err))
	}
	return a2aRefusal(a2a.ErrInternalError, err.Error())
}

func (h a2aHandler) SendMessage(ctx context.Context, p *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
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

func (h a2aHandler) GetTask(_ context.Context, q *a2a.GetTaskRequest) (*a2a.Task, error) {
	if q.ID == "" {
		return nil, a2aRefusal(a2a.ErrInvalidParams, "params.id is required")
	}
	t, err := h.cmds.Task(string(q.ID))
	if err != nil {
		return nil, a2aRefusal(a2a.ErrTaskNotFound, errs.Reason(err))
	}
	return a2aTask(t, q.HistoryLength), nil
}

// a2aStates are the journal's task states (the 0.3 names) in 1.0's.
var a2aStates = map[string]a2a.TaskState{a2acmd.A2AWorking: a2a.TaskStateWorking,
	a2acmd.A2ACompleted: a2a.TaskStateCompleted, a2acmd.A2AFailed: a2a.TaskStateFailed}

// a2aTask renders a journaled task as the protocol's Task: its status with
// the Agent's message, its answer as an artifact, and its history.
func a2aTask(t projections.A2ATask, historyLength *int) *a2a.Task {
	at := t.UpdatedAt
	task := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: a2a.TaskStatus{State: a2aStates[t.State], Timestamp: &at},
		Metadata: map[string]any{"receiver_id": t.ReceiverID, "agent_id": t.AgentID, "usage": t.Usage}}
	// The message as sent: a 1.0 message, or a 0.3 one journaled before
	// (its text and data parts read the same).
	var user a2a.Message
	if json.Unmarshal(t.Message.Value(), &user) != nil || user.ID == "" {
		user = *a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(t.Text.String()))
	}
	user.Role, user.TaskID, user.ContextID = a2a.MessageRoleUser, task.ID, t.ContextID
	task.History = []*a2a.Message{&user}
	var reply string
	switch t.State {
	case a2acmd.A2ACompleted:
		reply = t.Output.String()
		task.Artifacts = []*a2a.Artifact{{ID: "answer", Name: "answer", Parts: a2a.ContentParts{a2a.NewTextPart(reply)}}}
	case a2acmd.A2AFailed:
		reply = a2aFailure(t.Error)
	}
	if reply != "" {
		agentMsg := &a2a.Message{ID: t.ID + "-reply", Role: a2a.MessageRoleAgent, TaskID: task.ID, ContextID: t.ContextID,
			Parts: a2a.ContentParts{a2a.NewTextPart(reply)}}
		task.Status.Message = agentMsg
		task.History = append(task.History, agentMsg)
	}
	if historyLength != nil && *historyLength >= 0 && *historyLength < len(task.History) {
		task.History = task.History[len(task.History)-*historyLength:]
	}
	return task
}

func (a2aHandler) CancelTask(context.Context, *a2a.CancelTaskRequest) (*a2a.Task, error) {
	return nil, a2aRefusal(a2a.ErrTaskNotCancelable, "a task runs to its end within its message")
}

func (a2aHandler) ListTasks(context.Context, *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return nil, a2aRefusal(a2a.ErrUnsupportedOperation, "tasks are not listed; read one by its id")
}

func (a2aHandler) SubscribeToTask(context.Context, *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return unsupportedStream
}

func (a2aHandler) SendStreamingMessage(context.Context, *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return unsupportedStream
}

func unsupportedStream(yield func(a2a.Event, error) bool) {
	yield(nil, a2aRefusal(a2a.ErrUnsupportedOperation, "streaming is not supported; send the message without streaming"))
}

func (a2aHandler) GetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigRequest) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (a2aHandler) ListTaskPushConfigs(context.Context, *a2a.ListTaskPushConfigRequest) ([]*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (a2aHandler) CreateTaskPushConfig(context.Context, *a2a.CreateTaskPushConfigRequest) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (a2aHandler) DeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigRequest) error {
	return a2a.ErrPushNotificationNotSupported
}

func (a2aHandler) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.ErrExtendedCardNotConfigured
}
