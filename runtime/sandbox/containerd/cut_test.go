package containerd_test

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"
)

// cutProxy forwards a unix socket to containerd and, once the client has sent
// limit bytes, drops every connection and stops listening: containerd dying
// as far as the client can tell.
type cutProxy struct {
	l     net.Listener
	limit int64
	sent  atomic.Int64
	mu    sync.Mutex
	conns []net.Conn
	cut   chan struct{}
	once  sync.Once
}

func newCutProxy(t *testing.T, limit int64) *cutProxy {
	p := &cutProxy{limit: limit, cut: make(chan struct{})}
	var err error
	if p.l, err = net.Listen("unix", filepath.Join(t.TempDir(), "c.sock")); err != nil {
		t.Fatal(err)
	}
	// A killed containerd leaves its socket file behind.
	p.l.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(p.drop)
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("unix", containerdtest.Address())
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if sent := p.sent.Add(int64(n)); p.limit > 0 && sent >= p.limit {
						p.drop()
						return
					}
					up.Write(buf[:n])
				}
				if err != nil {
					return
				}
			}
		}()
		go io.Copy(c, up)
	}
}

func (p *cutProxy) drop() {
	p.once.Do(func() {
		close(p.cut)
		p.l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
}

// TestContainerdDiesMidPrepare: losing containerd at any point of Prepare
// ends it promptly, with ErrUnavailable unless it had already succeeded.
func TestContainerdDiesMidPrepare(t *testing.T) {
	direct := containerdtest.Containerd(t)
	// How many bytes a whole Prepare sends.
	p := newCutProxy(t, 0)
	d, err := containerd.New(sandboxtest.Context(t, time.Minute), containerd.Options{Address: p.l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandboxtest.NewSpec(t)
	sb, err := d.Prepare(sandboxtest.Context(t, time.Minute), spec)
	if err != nil {
		t.Fatal(err)
	}
	total := p.sent.Load()
	// Losing containerd does not end a running sandbox; using it fails.
	p.drop()
	if _, err := sb.Exec(sandboxtest.Context(t, time.Minute), sandbox.ExecSpec{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Exec without containerd: %v, want ErrUnavailable", err)
	}
	if sb.Err() != nil {
		t.Errorf("sandbox ended with containerd's connection: %v", sb.Err())
	}
	if err := direct.Remove(sandboxtest.Context(t, time.Minute), spec.SessionID, spec.Generation); err != nil {
		t.Fatal(err)
	}
	t.Logf("a Prepare sends %d bytes", total)
	d.Close()

	for _, frac := range []int64{5, 20, 40, 60, 80, 95} {
		p := newCutProxy(t, total*frac/100)
		ctx := sandboxtest.Context(t, time.Minute)
		d, err := containerd.New(ctx, containerd.Options{Address: p.l.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		spec := sandboxtest.NewSpec(t)
		start := time.Now()
		sb, err := d.Prepare(ctx, spec)
		el := time.Since(start)
		switch {
		case err == nil:
			t.Logf("cut at %d%%: Prepare succeeded first", frac)
			if _, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrUnavailable) {
				t.Errorf("cut at %d%%: Exec without containerd: %v, want ErrUnavailable", frac, err)
			}
		case !errors.Is(err, sandbox.ErrUnavailable):
			t.Errorf("cut at %d%%: %v, want ErrUnavailable", frac, err)
		default:
			t.Logf("cut at %d%% after %v: %v", frac, el, err)
		}
		if el > 2*time.Second {
			t.Errorf("cut at %d%%: Prepare took %v", frac, el)
		}
		d.Close()
		// What the cut left behind, the daemon removes after a restart.
		if err := direct.Remove(ctx, spec.SessionID, spec.Generation); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}
