package llm

import (
	"context"
	"fmt"

	"lathe/runtime/usage"
)

// Source is a provider SDK's stream of decoded messages (the SDKs' SSE
// streams have this shape).
type Source[T any] interface {
	Next() bool
	Current() T
	Err() error
	Close() error
}

// Pump is the Stream the SDK clients share: it pulls messages from Source,
// lets Decode queue events with Emit, and at the source's end lets Finish
// queue the final ones. Fail classifies an error and attaches the usage known
// so far; Usage reports that usage when the caller closes early.
type Pump[T any] struct {
	Source Source[T]
	// Decode turns one message into events (queued with Emit).
	Decode func(T) error
	// Finish runs when Source is exhausted with its error (nil at a clean
	// end); it returns io.EOF after queueing the final events, or a failure.
	Finish func(err error) error
	Fail   func(err error) error
	Usage  func() usage.Tokens

	pending []Event
	end     error
}

// Emit queues events for Recv.
func (p *Pump[T]) Emit(evs ...Event) { p.pending = append(p.pending, evs...) }

// Recv implements Stream.
func (p *Pump[T]) Recv() (Event, error) {
	for len(p.pending) == 0 {
		if p.end != nil {
			return nil, p.end
		}
		if !p.Source.Next() {
			p.end = p.Finish(p.Source.Err())
			continue
		}
		if err := p.Decode(p.Source.Current()); err != nil {
			p.Source.Close()
			p.end = p.Fail(err)
		}
	}
	ev := p.pending[0]
	p.pending = p.pending[1:]
	return ev, nil
}

// Close implements Stream. Recv after Close reports a cancelled stream with
// the usage known so far.
func (p *Pump[T]) Close() error {
	if p.end == nil {
		p.end = &StreamError{Err: fmt.Errorf("%w: stream closed", context.Canceled), Usage: p.Usage()}
	}
	return p.Source.Close()
}

var _ Stream = (*Pump[int])(nil)
