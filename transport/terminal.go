package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/julienschmidt/httprouter"

	"lathe/runtime/terminal"
)

// Terminal WebSocket limits and close codes.
const (
	// terminalReadLimit caps one inbound frame (a keystroke batch or paste).
	terminalReadLimit    = 1 << 20
	terminalWriteTimeout = 10 * time.Second

	// StatusTerminalResync closes a client that fell behind the output; it
	// clears its view and reconnects for a fresh scrollback.
	StatusTerminalResync = websocket.StatusCode(4001)
	terminalReasonResync = "terminal-resync-required"

	// StatusTerminalSuspended closes a connection whose Session's primary
	// surfaces were suspended after it opened (a Ways set took the
	// Workspace, or the environment left Ready): the keystroke that met
	// the suspension is not delivered, and the reason says why.
	StatusTerminalSuspended = websocket.StatusCode(4009)
)

// terminalConns tracks the terminal WebSockets of one Server, so that
// shutdown can close them: http.Server does not track hijacked connections.
type terminalConns struct {
	mu      sync.Mutex
	closing bool
	conns   sync.WaitGroup
	stop    context.Context // done at shutdown
	stopAll context.CancelFunc
}

func newTerminalConns() *terminalConns {
	stop, stopAll := context.WithCancel(context.Background())
	return &terminalConns{stop: stop, stopAll: stopAll}
}

// enter admits one connection unless the server is shutting down.
func (tc *terminalConns) enter() bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.closing {
		return false
	}
	tc.conns.Add(1)
	return true
}

// ShutdownTerminals closes every terminal WebSocket with 1001 (going away)
// and refuses new ones with 503; the processes keep running. It returns once
// every connection handler has returned, or with ctx's error.
func (s *Server) ShutdownTerminals(ctx context.Context) error {
	tc := s.terminals
	tc.mu.Lock()
	tc.closing = true
	tc.mu.Unlock()
	tc.stopAll()
	done := make(chan struct{})
	go func() {
		tc.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("terminal websockets shutdown: %w", ctx.Err())
	}
}

// terminalWS serves GET /api/sessions/:id/terminals/:tid/ws: the retained
// scrollback as one binary frame (possibly empty), then live output as
// binary frames. Binary and text frames from the client are keystrokes,
// except a text frame holding a JSON object with "kind":"resize", which
// resizes; a malformed or out-of-range resize is answered with a text frame
// {"kind":"error","message":…} and the connection stays open.
//
// The connection closes with 1000 "process exited (code N)" when the
// process ends, 4001 terminal-resync-required when the client falls behind
// the bounded output queue, and 1001 at shutdown. A missing Session (404),
// a Session that is not Ready (409) and an unknown terminal (404) are
// answered with a JSON error before the upgrade.
func (s *terminalRoutes) terminalWS(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id, tid := p.ByName("id"), p.ByName("tid")
	if _, _, err := s.sandboxes.Sandbox(id); err != nil {
		fail(w, err)
		return
	}
	term, err := s.cmds.Terminal(id, tid)
	if err != nil {
		fail(w, err)
		return
	}
	tc := s.conns
	if !tc.enter() {
		writeError(w, http.StatusServiceUnavailable, "server is shutting down")
		return
	}
	defer tc.conns.Done()

	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // Origin and auth are checked by the Guard.
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		s.log.Debug("terminal upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(terminalReadLimit)

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	scroll, sub := term.Attach()
	defer sub.Close()

	read := make(chan struct{})
	var suspended error
	go func() {
		defer close(read)
		defer cancel()
		suspended = terminalInput(ctx, conn, term, func() error {
			_, _, err := s.sandboxes.Sandbox(id)
			return err
		})
	}()
	code, reason := terminalOutput(ctx, tc.stop, conn, term, sub, scroll)
	if code == 0 {
		<-read
		if suspended != nil {
			code, reason = StatusTerminalSuspended, closeReason(suspended.Error())
		}
	}
	if code != 0 {
		if code == StatusTerminalResync {
			s.log.Warn("terminal client lagging; disconnected", "session", id, "terminal", tid, "remote", r.RemoteAddr)
		}
		_ = conn.Close(code, reason) // the reader takes the client's close frame
	}
	cancel() // also gives up a keystroke write the process is not reading
	conn.CloseNow()
	<-read
}

// terminalOutput sends the scrollback, then live output, until the process
// ends, the client lags or leaves, or stop; it returns how to close, or 0
// when the connection is already gone.
func terminalOutput(ctx, stop context.Context, conn *websocket.Conn, term *terminal.Terminal, sub *terminal.Subscriber, scroll []byte) (websocket.StatusCode, string) {
	nctx, ncancel := context.WithCancel(ctx)
	defer ncancel()
	defer context.AfterFunc(stop, ncancel)()
	if err := writeBinary(ctx, conn, scroll); err != nil {
		return 0, ""
	}
	for {
		data, err := sub.Next(nctx)
		switch {
		case err == nil:
			if err := writeBinary(ctx, conn, data); err != nil {
				return 0, ""
			}
		case errors.Is(err, io.EOF):
			code, werr := term.Wait(ctx)
			if werr != nil {
				return websocket.StatusNormalClosure, "process ended (exit status unknown)"
			}
			return websocket.StatusNormalClosure, fmt.Sprintf("process exited (code %d)", code)
		case errors.Is(err, terminal.ErrLagging):
			return StatusTerminalResync, terminalReasonResync
		case stop.Err() != nil && ctx.Err() == nil:
			return websocket.StatusGoingAway, hubReasonShutdown
		default:
			return 0, ""
		}
	}
}

func writeBinary(ctx context.Context, conn *websocket.Conn, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, terminalWriteTimeout)
	defer cancel()
	return conn.Write(ctx, websocket.MessageBinary, data)
}

// terminalInput feeds the client's frames to the terminal until the
// connection ends, or until gate refuses a frame, whose error it returns:
// the Session's primary surfaces are checked again for every frame, so a
// terminal opened before a suspension takes no input after it.
func terminalInput(ctx context.Context, conn *websocket.Conn, term *terminal.Terminal, gate func() error) error {
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return nil
		}
		if err := gate(); err != nil {
			return err
		}
		if typ == websocket.MessageText {
			if handled, msg := terminalCommand(ctx, term, data); handled {
				if msg != "" {
					wctx, cancel := context.WithTimeout(ctx, terminalWriteTimeout)
					err := conn.Write(wctx, websocket.MessageText, ErrorFrame(msg))
					cancel()
					if err != nil {
						return nil
					}
				}
				continue
			}
		}
		// After the exit the output side closes the connection; keystrokes
		// meanwhile have nowhere to go.
		if _, err := term.WriteContext(ctx, data); err != nil && ctx.Err() != nil {
			return nil
		}
	}
}

// closeReason fits a message into a WebSocket close frame's 123 bytes,
// cut at a rune boundary.
func closeReason(msg string) string {
	const max = 123
	if len(msg) <= max {
		return msg
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

// terminalCommand handles a text frame that is a JSON control message
// ({"kind":"resize","rows":R,"cols":C}); any other text is keystrokes. It
// reports whether the frame was a control message, and the error to send
// back, if any.
func terminalCommand(ctx context.Context, term *terminal.Terminal, data []byte) (handled bool, errMsg string) {
	if len(data) == 0 || data[0] != '{' {
		return false, ""
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &head) != nil || head.Kind != "resize" {
		return false, ""
	}
	var msg struct {
		Rows *int `json:"rows"`
		Cols *int `json:"cols"`
	}
	if err := json.Unmarshal(data, &msg); err != nil || msg.Rows == nil || msg.Cols == nil {
		return true, "malformed resize: send {\"kind\":\"resize\",\"rows\":<int>,\"cols\":<int>}"
	}
	if err := terminal.CheckSize(*msg.Rows, *msg.Cols); err != nil {
		return true, fmt.Sprintf("resize: rows must be 1-%d and cols 1-%d (got %d x %d)", terminal.MaxRows, terminal.MaxCols, *msg.Rows, *msg.Cols)
	}
	if err := term.Resize(ctx, *msg.Rows, *msg.Cols); err != nil {
		if errors.Is(err, terminal.ErrExited) {
			return true, ""
		}
		return true, "resize: " + err.Error()
	}
	return true, ""
}
