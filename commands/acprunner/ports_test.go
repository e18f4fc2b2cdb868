package acprunner

import (
	"errors"
	"testing"

	"lathe/runtime/sandbox"
)

// box is a sandbox known by its Session and generation only.
type box struct {
	sandbox.Sandbox
	session string
	gen     uint64
}

func (b box) SessionID() string  { return b.session }
func (b box) Generation() uint64 { return b.gen }

// Agents that share a sandbox each get a gateway port of their own, the
// lowest free one; another sandbox's count apart; a port comes back when
// its process ends; a sandbox holds MaxPerSandbox processes at most.
func TestGatewayPortsPerSandbox(t *testing.T) {
	r := &ACPRunner{live: map[string]*live{}, byTk: map[string]*live{}, claimed: map[*live]bool{}}
	claim := func(sb box) *live {
		t.Helper()
		l := &live{key: t.Name(), sb: sb}
		if err := r.claim(l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	s1, s1next, s2 := box{session: "s1", gen: 1}, box{session: "s1", gen: 2}, box{session: "s2", gen: 1}
	a, b := claim(s1), claim(s1)
	if a.port != GatewayPort || b.port != GatewayPort+1 {
		t.Fatalf("two agents in one sandbox: ports %d, %d", a.port, b.port)
	}
	if c, d := claim(s2), claim(s1next); c.port != GatewayPort || d.port != GatewayPort {
		t.Errorf("other sandboxes: ports %d, %d", c.port, d.port)
	}
	r.forget(a)
	if e := claim(s1); e.port != GatewayPort {
		t.Errorf("after the first ended: port %d", e.port)
	}
	for range MaxPerSandbox - 2 {
		claim(s1)
	}
	if err := r.claim(&live{sb: s1}); !errors.Is(err, ErrCrowded) {
		t.Errorf("a sandbox over its bound: %v", err)
	}
}
