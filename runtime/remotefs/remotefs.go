// Package remotefs serves a sandbox's files through the sandbox's helper
// (runtime/sandbox/helper, `lathe sandbox-helper serve`): a remote
// Session's clone lives in its container, not on the daemon's host, and one
// engine exec per file request would be far too slow for the file routes.
// Both halves of the protocol are here: Client on the host, Serve in the
// helper (serve.go).
//
// A Client holds one stream of the helper (helper.KindFiles, rooted at a
// directory), over which frames go both ways: a 4-byte big-endian length
// and a JSON header, then a 4-byte length and the raw body. Requests run
// one at a time; a stream that fails is opened again on the next call (and
// with it the helper, if it died). File names are bytes, as on the host:
// one that is not UTF-8 travels as its exact bytes beside the JSON string,
// both ways.
package remotefs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/helper"
)

// MaxBody bounds a frame's body both ways.
const MaxBody = 64 << 20

// ErrEscape is the helper's refusal of a path that resolves outside the root.
var ErrEscape = errors.New("path escapes from parent")

// Opener is a sandbox whose helper carries streams: the remote driver's
// (docker.Sandbox.OpenStream).
type Opener interface {
	OpenStream(ctx context.Context, kind helper.Kind, arg string) (net.Conn, error)
}

// Client is the file RPC of one sandbox, rooted at one directory in it.
type Client struct {
	sb   sandbox.Sandbox
	root string

	mu     sync.Mutex
	conn   net.Conn
	in     *bufio.Reader
	closed bool
}

// New returns the client of root inside sb, whose helper must carry
// streams (Opener); the stream opens on the first call.
func New(sb sandbox.Sandbox, root string) *Client { return &Client{sb: sb, root: root} }

// Info is a file's metadata as the helper reports it (lstat or fstat).
type Info struct {
	Name string `json:"name"`
	// NameB is Name's exact bytes when they are not UTF-8 (JSON would
	// carry them as U+FFFD); Call puts them back into Name.
	NameB   []byte `json:"name_b,omitempty"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	MtimeNS int64  `json:"mtime_ns"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
}

// Request is one call's header; Op names the operation.
type Request struct {
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	To   string `json:"to,omitempty"`
	// PathB and ToB carry Path's and To's exact bytes when they are not
	// UTF-8; Call sets them.
	PathB []byte `json:"path_b,omitempty"`
	ToB   []byte `json:"to_b,omitempty"`
	Limit int64  `json:"limit,omitempty"`
	// TimeoutMS bounds a wait in the helper.
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
	Max       int    `json:"max,omitempty"`
	Perm      uint32 `json:"perm,omitempty"`
	UID       uint32 `json:"uid,omitempty"`
	GID       uint32 `json:"gid,omitempty"`
	All       bool   `json:"all,omitempty"`
}

// Reply is one call's answer header.
type Reply struct {
	Info        *Info  `json:"info,omitempty"`
	Entries     []Info `json:"entries,omitempty"`
	Link        string `json:"link,omitempty"`
	LinkB       []byte `json:"link_b,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Changed     bool   `json:"changed,omitempty"`
	Errno       int    `json:"errno,omitempty"`
	Error       string `json:"error,omitempty"`
	Escape      bool   `json:"escape,omitempty"`
}

// Call runs one request with body and returns the reply and its body. A
// refusal by the helper comes back as a *fs.PathError wrapping the errno
// (or ErrEscape), so errors.Is(err, fs.ErrNotExist) and the like work.
func (c *Client) Call(ctx context.Context, req Request, body []byte) (Reply, []byte, error) {
	if len(body) > MaxBody {
		return Reply{}, nil, fmt.Errorf("remotefs: body of %d bytes over the %d-byte bound", len(body), MaxBody)
	}
	if !utf8.ValidString(req.Path) {
		req.PathB = []byte(req.Path)
	}
	if !utf8.ValidString(req.To) {
		req.ToB = []byte(req.To)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var rep Reply
	var data []byte
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if err = c.start(ctx); err != nil {
			return Reply{}, nil, err
		}
		if rep, data, err = c.roundTrip(ctx, req, body); err == nil {
			break
		}
		c.stop() // dead or out of step: the next attempt starts afresh
		if ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return Reply{}, nil, fmt.Errorf("remotefs %s %q: %w", req.Op, req.Path, err)
	}
	switch {
	case rep.Escape:
		return rep, nil, &fs.PathError{Op: req.Op, Path: req.Path, Err: ErrEscape}
	case rep.Errno != 0:
		return rep, nil, &fs.PathError{Op: req.Op, Path: req.Path, Err: syscall.Errno(rep.Errno)}
	}
	return rep, data, nil
}

// start opens the stream unless it is open; c.mu is held.
func (c *Client) start(ctx context.Context) error {
	if c.closed {
		return errors.New("remotefs: closed")
	}
	if c.conn != nil {
		return nil
	}
	o, ok := c.sb.(Opener)
	if !ok {
		return fmt.Errorf("remotefs: the sandbox of session %s has no helper to reach its files through", c.sb.SessionID())
	}
	octx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	conn, err := o.OpenStream(octx, helper.KindFiles, c.root)
	if err != nil {
		return fmt.Errorf("remotefs: open the helper's file stream: %w", err)
	}
	c.conn, c.in = conn, bufio.NewReaderSize(conn, 256<<10)
	return nil
}

// stop closes the stream; c.mu is held.
func (c *Client) stop() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// roundTrip writes one request and reads its reply; c.mu is held. The
// context and callTimeout bound the wait: past either, the caller stops
// the stream.
func (c *Client) roundTrip(ctx context.Context, req Request, body []byte) (Reply, []byte, error) {
	dl := time.Now().Add(callTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	rep, data, err := c.exchange(req, body)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return Reply{}, nil, ctx.Err()
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return Reply{}, nil, fmt.Errorf("the helper did not answer within %s", callTimeout)
		}
		return Reply{}, nil, err
	}
	c.conn.SetDeadline(time.Time{})
	return rep, data, nil
}

// callTimeout bounds one call, so a stuck helper blocks nothing for long.
const callTimeout = 10 * time.Second

func (c *Client) exchange(req Request, body []byte) (Reply, []byte, error) {
	if err := writeFrame(c.conn, req, body); err != nil {
		return Reply{}, nil, err
	}
	rh, err := readPart(c.in, MaxBody)
	if err != nil {
		return Reply{}, nil, err
	}
	data, err := readPart(c.in, MaxBody)
	if err != nil {
		return Reply{}, nil, err
	}
	var rep Reply
	if err := json.Unmarshal(rh, &rep); err != nil {
		return Reply{}, nil, fmt.Errorf("the helper's reply: %w", err)
	}
	rep.exact()
	return rep, data, nil
}

// exact puts the exact bytes of names that are not UTF-8 back in place.
func (rep *Reply) exact() {
	if rep.Info != nil && rep.Info.NameB != nil {
		rep.Info.Name = string(rep.Info.NameB)
	}
	for i := range rep.Entries {
		if e := &rep.Entries[i]; e.NameB != nil {
			e.Name = string(e.NameB)
		}
	}
	if rep.LinkB != nil {
		rep.Link = string(rep.LinkB)
	}
}

// Close ends the stream; later calls fail.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stop()
	c.closed = true
}
