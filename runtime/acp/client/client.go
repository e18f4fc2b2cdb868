// Package client drives one outside agent over the Agent Client Protocol
// (ACP v1, JSON-RPC on the agent's stdio), with the protocol's own Go
// library (github.com/coder/acp-go-sdk): Lathe is the ACP client, the agent
// process runs in a Session's sandbox.
//
// Decisions:
//   - The agent is untrusted code. A line over MaxLine is dropped with a
//     log line before the library parses it; a notification for another
//     session than the one Lathe opened is dropped; a permission request
//     for a call Lathe never saw, or one outside a prompt, is refused; at
//     most MaxPending permission requests wait at once, the rest are
//     refused. The library bounds its notification queue (an overflow ends
//     the connection, which fails the turn: bounded, never a hang).
//   - Lathe advertises neither the fs nor the terminal capability: the
//     agent reads, writes and runs in the sandbox itself, where Lathe's
//     checkout snapshot sees the result exactly.
//   - One Agent serves one prompt at a time. Updates reach the prompt's
//     Handler in the order the agent sent them, from one goroutine.
//   - The process's end (or its stdout's) fails the prompt in flight with
//     the tail of its stderr.
package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"lathe/runtime/errs"
	"lathe/runtime/sandbox"
)

// Bounds.
const (
	// MaxLine bounds one JSON-RPC message from the agent.
	MaxLine = 4 << 20
	// MaxPending bounds the permission requests waiting at once.
	MaxPending = 16
	// StderrTail is how much of the agent's stderr an error quotes.
	StderrTail = 4 << 10
	// StopGrace is how long Close waits after SIGTERM before SIGKILL.
	StopGrace = 3 * time.Second
)

// Errors.
var (
	// ErrExited is the class of a prompt whose agent process ended.
	ErrExited = errs.New(errs.Upstream, "the agent process ended")
	// ErrProtocol is the class of an answer the agent got wrong.
	ErrProtocol = errs.New(errs.Upstream, "the agent broke the protocol")
)

// Handler follows one prompt.
type Handler interface {
	// Update is one session/update of the prompt's session.
	Update(u acp.SessionUpdate)
	// Permission answers a session/request_permission.
	Permission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error)
}

// Spec is how to start the agent.
type Spec struct {
	Args []string
	Dir  string
	Env  []string
	// Client names Lathe in initialize.
	Client acp.Implementation
	Log    *slog.Logger
}

// Agent is one agent process and its connection.
type Agent struct {
	conn   *acp.ClientSideConnection
	proc   sandbox.Process
	stdin  io.WriteCloser
	stderr *tail
	log    *slog.Logger
	// Info is the agent's initialize answer: its name, version and
	// capabilities.
	Info acp.InitializeResponse

	exited  chan struct{}
	exitErr error

	pending chan struct{} // permission slots

	mu      sync.Mutex
	session acp.SessionId
	turn    Handler
}

// Start runs the agent in sb and initializes the connection. ctx bounds
// the start; the process lives until Close.
func Start(ctx context.Context, sb interface {
	Exec(context.Context, sandbox.ExecSpec) (sandbox.Process, error)
}, spec Spec) (*Agent, error) {
	if spec.Log == nil {
		spec.Log = slog.New(slog.DiscardHandler)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &Agent{stdin: inW, stderr: &tail{max: StderrTail}, log: spec.Log, exited: make(chan struct{}), pending: make(chan struct{}, MaxPending)}
	proc, err := sb.Exec(context.WithoutCancel(ctx), sandbox.ExecSpec{Args: spec.Args, Dir: spec.Dir, Env: spec.Env, Stdin: inR, Stdout: outW, Stderr: a.stderr})
	if err != nil {
		inW.Close()
		outW.Close()
		return nil, fmt.Errorf("%w: start %q: %w", ErrExited, spec.Args[0], err)
	}
	a.proc = proc
	go func() {
		_, werr := proc.Wait(context.Background())
		a.exitErr = werr
		outW.Close()
		inR.Close()
		close(a.exited)
	}()
	a.conn = acp.NewClientSideConnection((*callbacks)(a), inW, boundLines(outR, MaxLine, spec.Log))
	a.conn.SetLogger(spec.Log)
	err = a.call(ctx, func(ctx context.Context) error {
		var err error
		a.Info, err = a.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber, ClientInfo: &spec.Client})
		return err
	})
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return a, nil
}

// call runs one request, failing it with the stderr tail when the process
// ends first.
func (a *Agent) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := f(ctx)
	select {
	case <-a.exited:
		if err != nil {
			return a.exitError()
		}
	default:
	}
	return err
}

func (a *Agent) exitError() error {
	msg := a.stderr.String()
	if msg == "" {
		msg = "no stderr"
	}
	return fmt.Errorf("%w: %s", ErrExited, msg)
}

// Exited is closed once the process has ended.
func (a *Agent) Exited() <-chan struct{} { return a.exited }

// Open starts the agent's session in cwd: session/load of resume when the
// agent supports it and resume is set, else session/new. It reports
// whether it loaded.
func (a *Agent) Open(ctx context.Context, cwd string, mcp []acp.McpServer, resume string) (id string, loaded bool, err error) {
	if mcp == nil {
		mcp = []acp.McpServer{}
	}
	if resume != "" && a.Info.AgentCapabilities.LoadSession {
		// The replayed history arrives as updates while no prompt runs:
		// they are dropped (Lathe has its own record of it).
		a.setSession(acp.SessionId(resume))
		err = a.call(ctx, func(ctx context.Context) error {
			_, err := a.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: acp.SessionId(resume), Cwd: cwd, McpServers: mcp})
			return err
		})
		if err == nil {
			return resume, true, nil
		}
		a.log.Info("acp session/load failed; starting a new session", "err", err)
	}
	var res acp.NewSessionResponse
	err = a.call(ctx, func(ctx context.Context) error {
		var err error
		res, err = a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: mcp})
		return err
	})
	if err != nil {
		return "", false, fmt.Errorf("session/new: %w", err)
	}
	if res.SessionId == "" || len(res.SessionId) > 256 {
		return "", false, fmt.Errorf("%w: session/new answered no usable session id", ErrProtocol)
	}
	a.setSession(res.SessionId)
	return string(res.SessionId), false, nil
}

func (a *Agent) setSession(id acp.SessionId) {
	a.mu.Lock()
	a.session = id
	a.mu.Unlock()
}

// Prompt sends one prompt and returns the agent's answer once the turn
// ended. h gets its updates and permission requests meanwhile.
func (a *Agent) Prompt(ctx context.Context, text string, h Handler) (acp.PromptResponse, error) {
	a.mu.Lock()
	if a.turn != nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, errs.New(errs.Conflict, "a prompt is already running")
	}
	a.turn = h
	id := a.session
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.turn = nil
		a.mu.Unlock()
	}()
	var res acp.PromptResponse
	err := a.call(ctx, func(ctx context.Context) error {
		var err error
		res, err = a.conn.Prompt(ctx, acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		return err
	})
	return res, err
}

// Cancel asks the agent to stop the prompt in flight (session/cancel).
func (a *Agent) Cancel(ctx context.Context) error {
	a.mu.Lock()
	id := a.session
	a.mu.Unlock()
	return a.conn.Cancel(ctx, acp.CancelNotification{SessionId: id})
}

// Close ends the process: its stdin closed, SIGTERM, then SIGKILL after
// StopGrace.
func (a *Agent) Close() {
	a.stdin.Close()
	select {
	case <-a.exited:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), StopGrace)
	defer cancel()
	_ = a.proc.Signal(ctx, syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-ctx.Done():
		kctx, kcancel := context.WithTimeout(context.Background(), StopGrace)
		_ = a.proc.Signal(kctx, syscall.SIGKILL)
		select {
		case <-a.exited:
		case <-kctx.Done():
		}
		kcancel()
	}
}

// callbacks is the acp.Client side the agent calls; a separate type so
// that the methods the library needs stay off Agent's surface.
type callbacks Agent

var errNotOffered = acp.NewMethodNotFound("not offered by Lathe: the agent works in its sandbox itself")

func (c *callbacks) current(id acp.SessionId) (Handler, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != c.session {
		return nil, false
	}
	return c.turn, true
}

func (c *callbacks) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	h, ok := c.current(n.SessionId)
	if !ok {
		c.log.Warn("acp update for another session dropped", "acp_session", string(n.SessionId))
		return nil
	}
	if h != nil {
		h.Update(n.Update)
	}
	return nil
}

func (c *callbacks) RequestPermission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	h, ok := c.current(req.SessionId)
	if !ok || h == nil {
		return acp.RequestPermissionResponse{}, acp.NewInvalidParams("no prompt of this session is running")
	}
	select {
	case c.pending <- struct{}{}:
		defer func() { <-c.pending }()
	default:
		return acp.RequestPermissionResponse{}, acp.NewInternalError("too many permission requests waiting")
	}
	return h.Permission(ctx, req)
}

func (c *callbacks) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNotOffered
}
func (c *callbacks) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNotOffered
}
func (c *callbacks) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNotOffered
}
func (c *callbacks) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNotOffered
}
func (c *callbacks) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNotOffered
}
func (c *callbacks) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNotOffered
}
func (c *callbacks) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNotOffered
}

// boundLines passes r's lines on, dropping (with a log line) each one
// longer than max, so that the library's own, larger bound never ends the
// connection for one oversized message.
func boundLines(r io.Reader, max int, log *slog.Logger) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		var line []byte
		drop := false
		for {
			chunk, err := br.ReadSlice('\n')
			if len(chunk) > 0 && !drop {
				if len(line)+len(chunk) > max {
					drop, line = true, line[:0]
					log.Warn("acp message over the bound dropped", "max_bytes", max)
				} else {
					line = append(line, chunk...)
				}
			}
			switch {
			case err == bufio.ErrBufferFull:
				continue
			case err != nil:
				if !drop && len(bytes.TrimSpace(line)) > 0 {
					_, _ = pw.Write(append(line, '\n'))
				}
				pw.CloseWithError(err)
				return
			}
			if !drop {
				if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			drop, line = false, line[:0]
		}
	}()
	return pr
}

// tail keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(bytes.ToValidUTF8(t.b, nil)))
}
