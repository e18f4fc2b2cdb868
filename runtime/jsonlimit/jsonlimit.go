// Package jsonlimit bounds free-form JSON that comes into Lathe from outside:
// request bodies, /ws commands, a model's tool-call arguments, MCP results,
// A2A messages, Automation inputs, context references.
//
// Such a value is stored inside an event, and the event inside an envelope,
// so it sits a few levels below the top of what the journal keeps.
// encoding/json refuses to decode more than 10,000 levels; a value that
// nests close to that is valid on its own and undecodable once stored, and
// an undecodable event stops every replay. Bounding the depth where the
// value comes in, far below that limit, keeps every accepted event
// replayable (the journal refuses what slips through, as a second guard).
//
// The package imports nothing from the project, so every layer can use it.
package jsonlimit

import (
	"errors"
	"fmt"
)

// Limits bound one JSON value.
type Limits struct {
	// Depth is the most arrays and objects that may be open at once.
	Depth int
	// Bytes is the largest encoded size; 0 means no size bound.
	Bytes int
}

// Default is the bound of free-form values: 64 levels, far more than any
// tool schema or message needs, and 8 MiB (a value over 64 KiB goes to the
// blob store, not into the event).
var Default = Limits{Depth: MaxDepth, Bytes: 8 << 20}

// MaxDepth is Default's nesting bound.
const MaxDepth = 64

// ErrTooDeep and ErrTooLarge are the classes of a value past its limits.
var (
	// ErrTooDeep: the value nests deeper than its Depth.
	ErrTooDeep = errors.New("JSON nests too deeply")
	// ErrTooLarge: the value is larger than its Bytes.
	ErrTooLarge = errors.New("JSON value is too large")
)

// Check reports whether data stays within lim. It scans bytes (strings are
// skipped, so brackets inside them do not count); it does not validate the
// JSON otherwise, which the caller's decoder does. A nil or empty value
// passes.
func Check(data []byte, lim Limits) error {
	if lim.Bytes > 0 && len(data) > lim.Bytes {
		return fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrTooLarge, len(data), lim.Bytes)
	}
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
			if depth > lim.Depth {
				return fmt.Errorf("%w: more than %d levels of arrays and objects", ErrTooDeep, lim.Depth)
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}
