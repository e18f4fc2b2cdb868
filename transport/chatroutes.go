package transport

import "sync"

// chatRouteTable routes each running Chat turn's live frames to the one
// connection that issued it (spec: Server frames: Chat): handleChatTurn
// registers the turn before it begins, SendLive sends its frames to the
// route's client and drops the route with the turn's end, and the hub
// drops a client's routes when the client leaves. A turn whose connection
// went away goes on unheard; its record has the reply.
type chatRouteTable struct {
	mu     sync.Mutex
	routes map[string]*Client // turn ID → the connection that issued it
}

// register routes turn's frames to c.
func (t *chatRouteTable) register(turn string, c *Client) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.routes == nil {
		t.routes = map[string]*Client{}
	}
	t.routes[turn] = c
}

// drop removes turn's route.
func (t *chatRouteTable) drop(turn string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.routes, turn)
}

// send sends data, a frame of turn, to the turn's client, if it has one,
// and drops the route when the frame is the turn's last.
func (t *chatRouteTable) send(turn string, data []byte, last bool) {
	t.mu.Lock()
	c := t.routes[turn]
	if last {
		delete(t.routes, turn)
	}
	t.mu.Unlock()
	if c != nil {
		c.Send(data) // outside t.mu: Send takes the hub's lock
	}
}

// dropClient removes every route to c: the client left.
func (t *chatRouteTable) dropClient(c *Client) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for turn, rc := range t.routes {
		if rc == c {
			delete(t.routes, turn)
		}
	}
}

// len is the number of routed turns.
func (t *chatRouteTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.routes)
}
