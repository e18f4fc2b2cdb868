package tools

import (
	"io"

	"lathe/runtime/sandbox"
)

// What runs beside the tools in the same sandbox (runtime/hooks) uses
// these: the Set's sandbox and root, and the shell tool's bounded output.

// Sandbox is the sandbox the Set's tools run in.
func (s *Set) Sandbox() sandbox.Sandbox { return s.sb }

// Root is the Session root, the working dir of every tool.
func (s *Set) Root() string { return s.root }

// Bounded is a writer that keeps at most a fixed number of bytes, the head
// and the tail around a truncation notice.
type Bounded interface {
	io.Writer
	String() string
}

// NewBounded returns a Bounded writer of at most max bytes.
func NewBounded(max int) Bounded { return newCapped(max) }
