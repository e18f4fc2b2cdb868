package transport

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// A2AServer serves inbound A2A (agent-to-agent): its JSON-RPC endpoint and
// its agent card, both behind the Guard's authentication. The daemon hands
// in transport/a2aserve's, on the A2A project's SDK, which lives beside
// the transport so that the SDK's dependencies stay out of its closure.
type A2AServer interface {
	Tasks(w http.ResponseWriter, r *http.Request)
	AgentCard(w http.ResponseWriter, r *http.Request)
}

func (s *a2aRoutes) tasks(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.srv.Tasks(w, r)
}

func (s *a2aRoutes) agentCard(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.srv.AgentCard(w, r)
}
