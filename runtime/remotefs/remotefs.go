// Package remotefs serves a sandbox's files through one long-lived helper
// process inside it (helper.py, run by the image's python3): a remote
// Session's clone lives in its container, not on the daemon's host, and one
// engine exec per file request would be far too slow for the file routes.
//
// The helper speaks frames over its stdin and stdout: a 4-byte big-endian
// length and a JSON header, then a 4-byte length and the raw body. Requests
// run one at a time; a helper that dies is started again on the next call.
// File names are bytes, as on the host: one that is not UTF-8 travels as
// its exact bytes beside the JSON string, both ways.
package remotefs

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"lathe/runtime/sandbox"
)

//go:embed helper.py
var script string

// MaxBody bounds a frame's body both ways (the helper holds the same bound).
const MaxBody = 64 << 20

// ErrEscape is the helper's refusal of a path that resolves outside the root.
var ErrEscape = errors.New("path escapes from parent")

// Client is the helper of one sandbox, rooted at one directory in it.
type Client struct {
	sb   sandbox.Sandbox
	root string

	mu     sync.Mutex
	proc   sandbox.Process
	cancel context.CancelFunc
	in     *io.PipeWriter
	out    *bufio.Reader
	outW   *io.PipeWriter
	closed bool
}

// New returns the helper client of root inside sb; the helper starts on
// the first call.
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
		if err = c.start(); err != nil {
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

// start runs the helper unless it runs; c.mu is held.
func (c *Client) start() error {
	if c.closed {
		return errors.New("remotefs: closed")
	}
	if c.proc != nil {
		return nil
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := c.sb.Exec(ctx, sandbox.ExecSpec{
		Args:  []string{"python3", "-c", script, c.root},
		Stdin: inR, Stdout: outW, Stderr: io.Discard,
	})
	if err != nil {
		cancel()
		inW.Close()
		outW.Close()
		return fmt.Errorf("remotefs: start the helper: %w", err)
	}
	go func() {
		_, err := p.Wait(context.Background())
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err) // a reader waiting on a dead helper ends
		inR.CloseWithError(err)  // and so does a writer
	}()
	c.proc, c.cancel, c.in, c.out, c.outW = p, cancel, inW, bufio.NewReaderSize(outR, 256<<10), outW
	return nil
}

// stop ends the helper; c.mu is held.
func (c *Client) stop() {
	if c.proc == nil {
		return
	}
	c.in.Close()
	c.outW.Close()
	_ = c.proc.Signal(context.Background(), syscall.SIGKILL)
	c.cancel()
	c.proc = nil
}

// roundTrip writes one request and reads its reply; c.mu is held. The
// context bounds the wait: on expiry the helper is stopped by the caller.
func (c *Client) roundTrip(ctx context.Context, req Request, body []byte) (Reply, []byte, error) {
	hdr, err := json.Marshal(req)
	if err != nil {
		return Reply{}, nil, err
	}
	type result struct {
		rep  Reply
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		rep, data, err := c.exchange(hdr, body)
		done <- result{rep, data, err}
	}()
	timer := time.NewTimer(callTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.rep, r.data, r.err
	case <-ctx.Done():
		c.outW.CloseWithError(ctx.Err())
		c.in.CloseWithError(ctx.Err())
		<-done
		return Reply{}, nil, ctx.Err()
	case <-timer.C:
		err := fmt.Errorf("the helper did not answer within %s", callTimeout)
		c.outW.CloseWithError(err)
		c.in.CloseWithError(err)
		<-done
		return Reply{}, nil, err
	}
}

// callTimeout bounds one call, so a stuck helper blocks nothing for long.
const callTimeout = 10 * time.Second

func (c *Client) exchange(hdr, body []byte) (Reply, []byte, error) {
	msg := make([]byte, 0, 8+len(hdr)+len(body))
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(hdr)))
	msg = append(msg, hdr...)
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(body)))
	msg = append(msg, body...)
	if _, err := c.in.Write(msg); err != nil {
		return Reply{}, nil, err
	}
	rh, err := c.readPart()
	if err != nil {
		return Reply{}, nil, err
	}
	data, err := c.readPart()
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

func (c *Client) readPart() ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(c.out, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > MaxBody {
		return nil, fmt.Errorf("the helper sent %d bytes, over the %d-byte bound", size, MaxBody)
	}
	b := make([]byte, size)
	_, err := io.ReadFull(c.out, b)
	return b, err
}

// Close ends the helper; later calls fail.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stop()
	c.closed = true
}
