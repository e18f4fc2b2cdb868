// Package remotefstest serves the sandbox helper's file streams in the
// test process, for fake sandboxes that stand for a remote one: the
// protocol and the confinement are the helper's own, whichever engine
// would exec it.
package remotefstest

import (
	"context"
	"net"
	"sync"
	"time"

	"lathe/runtime/remotefs"
	"lathe/runtime/sandbox/helper"
)

// Helper is one helper process's worth of file streams, over a pipe; its
// zero value serves on first use. Embedded in a fake sandbox, it makes it
// a remotefs.Opener.
type Helper struct {
	// Root maps a stream's root (a path in the sandbox) to the host
	// directory that stands for it; nil keeps it.
	Root func(string) string

	mu   sync.Mutex
	link *helper.Link
}

// OpenStream opens a stream of kind, starting the helper when none runs.
func (h *Helper) OpenStream(ctx context.Context, kind helper.Kind, arg string) (net.Conn, error) {
	h.mu.Lock()
	if h.link == nil || h.link.Closed() {
		ours, theirs := net.Pipe()
		go helper.Serve(theirs, helper.Handlers{Streams: map[helper.Kind]helper.Stream{helper.KindFiles: remotefs.Serve}})
		link, err := helper.Connect(ours, 5*time.Second)
		if err != nil {
			h.mu.Unlock()
			return nil, err
		}
		h.link = link
	}
	link := h.link
	h.mu.Unlock()
	if h.Root != nil {
		arg = h.Root(arg)
	}
	return link.Open(ctx, kind, arg)
}

// Kill ends the helper behind its clients' backs, as a sandbox's end would.
func (h *Helper) Kill() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.link != nil {
		h.link.Close()
	}
}
