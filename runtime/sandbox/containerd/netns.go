package containerd

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// dialInNetns connects to addr from inside the network namespace ns (an open
// namespace file descriptor). It runs on a goroutine locked to its own OS
// thread, which enters ns only to create and connect the socket: a socket
// stays in the namespace it was created in. If the thread cannot return to
// its original namespace, it stays locked, so that it dies with the goroutine
// instead of running other code in the wrong namespace.
func dialInNetns(ctx context.Context, ns int, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	out := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			out <- result{err: fmt.Errorf("dial %s: own network namespace: %w", addr, err)}
			return
		}
		defer orig.Close()
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			out <- result{err: fmt.Errorf("dial %s: enter sandbox network namespace: %w", addr, err)}
			return
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp4", addr)
		if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
			out <- result{conn, err} // the thread stays locked and exits with us
			return
		}
		runtime.UnlockOSThread()
		out <- result{conn, err}
	}()
	r := <-out
	return r.conn, r.err
}
