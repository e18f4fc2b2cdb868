// Package relay carries an HTTP endpoint of the host into a sandbox's own
// loopback: the model gateway an outside agent calls as
// http://127.0.0.1:<port>, whatever the sandbox's network (none, or a
// remote engine's).
//
// Its two halves: in the sandbox, the helper's `gateway-listen` command
// (Listen) listens on 127.0.0.1:<port> and opens one yamux stream to the
// host per connection it accepts, over the exec's stdin and stdout; on
// the host, Serve runs that command and serves an http.Handler on the
// streams (the yamux session is the net.Listener). Nothing the sandbox
// sends is more than bytes of HTTP requests to that handler, which
// authenticates each one.
package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/helper"
)

// Command is the helper command that runs the in-sandbox half.
const Command = "gateway-listen"

// ready is the line Listen writes once it listens, before the session.
const ready = "lathe-relay listening\n"

func config() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.StreamOpenTimeout = 30 * time.Second
	return cfg
}

// stdio is a process's stdin and stdout as one connection.
type stdio struct {
	io.Reader
	io.Writer
	close func() error
}

func (s stdio) Close() error { return s.close() }

// Listen is the in-sandbox half: args is the port. It returns once the host
// ends the session (stdin's end).
func Listen(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: gateway-listen PORT")
		return 2
	}
	port, err := strconv.Atoi(args[0])
	if err != nil || port < 1 || port > 65535 {
		fmt.Fprintln(stderr, "gateway-listen: bad port", args[0])
		return 2
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintln(stderr, "gateway-listen:", err)
		return 1
	}
	defer ln.Close()
	if _, err := io.WriteString(stdout, ready); err != nil {
		return 1
	}
	sess, err := yamux.Client(stdio{stdin, stdout, func() error { return os.Stdin.Close() }}, config())
	if err != nil {
		fmt.Fprintln(stderr, "gateway-listen:", err)
		return 1
	}
	go func() {
		<-sess.CloseChan()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return 0
		}
		go func() {
			defer c.Close()
			st, err := sess.Open()
			if err != nil {
				return
			}
			defer st.Close()
			splice(c, st)
		}()
	}
}

// splice copies both ways until either side ends.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// Relay is the host's half of one sandbox's relay.
type Relay struct {
	exited chan struct{}
	stdin  io.Closer
	sess   *yamux.Session
	srv    *http.Server
	closed sync.Once
}

// Serve starts the in-sandbox listener on port in sb and serves h on the
// connections it relays, until Close or the sandbox's end, its process
// with env added. ctx bounds the start.
func Serve(ctx context.Context, sb sandbox.Sandbox, port int, h http.Handler, env ...string) (*Relay, error) {
	argv, err := helper.Argv(ctx, sb, Command, strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	var errMu sync.Mutex
	proc, err := sb.Exec(context.WithoutCancel(ctx), sandbox.ExecSpec{Args: argv, Dir: "/", Env: env, Stdin: inR, Stdout: outW, Stderr: lockedWriter{&errMu, &stderr}})
	if err != nil {
		return nil, fmt.Errorf("start the gateway relay: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		proc.Wait(context.Background())
		outW.Close()
		inR.Close()
		close(exited)
	}()
	br := bufio.NewReader(outR)
	line := make(chan error, 1)
	go func() {
		got, err := br.ReadString('\n')
		if err == nil && got != ready {
			err = fmt.Errorf("answered %q", got)
		}
		line <- err
	}()
	select {
	case err = <-line:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		inW.Close()
		errMu.Lock()
		msg := strings.TrimSpace(stderr.String())
		errMu.Unlock()
		return nil, fmt.Errorf("the gateway relay did not start: %w (%s)", err, msg)
	}
	sess, err := yamux.Server(stdio{br, inW, inW.Close}, config())
	if err != nil {
		inW.Close()
		return nil, err
	}
	r := &Relay{exited: exited, stdin: inW, sess: sess, srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}}
	go func() {
		if err := r.srv.Serve(sess); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.Close()
		}
	}()
	return r, nil
}

// Done is closed once the relay has ended.
func (r *Relay) Done() <-chan struct{} { return r.sess.CloseChan() }

// Close ends the relay and its in-sandbox listener, waiting (a few
// seconds at most) for the listener's process to exit.
func (r *Relay) Close() {
	r.closed.Do(func() {
		r.srv.Close()
		r.sess.Close()
		r.stdin.Close()
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
		}
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.w.(*strings.Builder); ok && b.Len() > 4<<10 {
		return len(p), nil
	}
	return l.w.Write(p)
}
