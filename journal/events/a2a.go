package events

import "lathe/runtime/usage"

func init() {
	register[A2ATaskReceived]()
	register[A2ATaskEnded]()
}

// A2ATask is one inbound agent-to-agent task, by its task ID.
const A2ATask = "a2a-task"

// A2ATaskReceived: an inbound A2A message/send was dispatched to a local
// receiver, whose Agent runs Text. Message is the A2A message as sent.
type A2ATaskReceived struct {
	ReceiverID string `json:"receiver_id"`
	AgentID    string `json:"agent_id"`
	ContextID  string `json:"context_id"`
	Message    JSON   `json:"message"`
	Text       Text   `json:"text"`
}

// A2ATaskEnded: the task's one end: State is "completed" (Output is the
// Agent's answer) or "failed" (Error says why). Inferences are the task's
// model calls, for telemetry (/metrics and the invoke_agent trace), as a
// Chat turn's end keeps them.
type A2ATaskEnded struct {
	State      string      `json:"state"`
	Output     Text        `json:"output"`
	Error      string      `json:"error,omitempty"`
	Inferences []Inference `json:"inferences,omitempty"`
	usage.Tokens
}

func (A2ATaskReceived) EventType() string { return "a2a-task-received" }
func (A2ATaskEnded) EventType() string    { return "a2a-task-ended" }
func (A2ATaskReceived) Aggregate() string { return A2ATask }
func (A2ATaskEnded) Aggregate() string    { return A2ATask }

func (e A2ATaskReceived) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Message, &e.Text)
}

func (e A2ATaskEnded) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Output)
}
