package projections

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"sync/atomic"
	"unsafe"
)

// The Session list (GET /api/sessions, every Session, open and closed) is
// the read the daemon serves largest. Each Session's JSON is cached beside
// it: encoded by encoding/json when first read after a change, dropped by
// every change (SessionModel.update), and kept in the checkpoint, so that
// the list after a restart copies bytes rather than encoding 50,000
// Sessions.

// jsonCache holds one Session's JSON. Readers fill it under the read lock,
// so it is atomic; a change drops it under the write lock, so no reader
// can store a stale encoding after the drop.
type jsonCache struct{ b atomic.Pointer[string] }

// drop forgets the cached JSON.
func (c *jsonCache) drop() {
	if c != nil {
		c.b.Store(nil)
	}
}

// of returns ss's JSON, from the cache when it holds it.
func (c *jsonCache) of(ss *Session) string {
	if c != nil {
		if p := c.b.Load(); p != nil {
			return *p
		}
	}
	b, _ := json.Marshal(ss)                        // strings, numbers, times: always encodes
	s := unsafe.String(unsafe.SliceData(b), len(b)) // b is ours alone and never written again
	if c != nil {
		c.b.Store(&s)
	}
	return s
}

// JSON is the Session's JSON encoding: what encoding/json.Marshal
// produces for it, from the cache when it holds it (no copy).
func (ss *Session) JSON() string { return ss.json.of(ss) }

// SessionsJSON returns Sessions(workspaceID) as a JSON array, as
// json.Marshal would, without copying the records first.
func (m *SessionModel) SessionsJSON(workspaceID string) []byte {
	l := m.SessionList(workspaceID)
	b := bytes.NewBuffer(make([]byte, 0, l.Len()))
	_, _ = l.WriteTo(b)
	return b.Bytes()
}

// SessionList is Sessions(workspaceID) as a JSON array, taken under the
// read lock and written after it: each Session's cached JSON, encoded now
// for those that changed since it was last read.
type SessionList struct {
	pieces []string
	size   int
}

// SessionList returns the list of a Workspace's Sessions, or all with "".
func (m *SessionModel) SessionList(workspaceID string) SessionList {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	return listOf(m.sorted(workspaceID))
}

// SessionPage returns up to limit Sessions of every Workspace whose IDs
// sort after after ("" for the first page), by ID: the Session list in
// pages. A client pages with the last ID of the page before, so a Session
// deleted meanwhile moves no other across a page boundary.
func (m *SessionModel) SessionPage(after string, limit int) SessionList {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	i, found := slices.BinarySearchFunc(m.order, after, func(x *Session, id string) int { return compareIDs(x.ID, id) })
	if found {
		i++
	}
	return listOf(m.order[i:min(i+max(limit, 0), len(m.order))])
}

// listOf is the SessionList of list, taken under the read lock.
func listOf(list []*Session) SessionList {
	l := SessionList{pieces: make([]string, len(list)), size: 1 + max(len(list), 1)} // brackets and commas
	for i, ss := range list {
		l.pieces[i] = ss.json.of(ss)
		l.size += len(l.pieces[i])
	}
	return l
}

// Len is the length of the list's JSON.
func (l SessionList) Len() int { return l.size }

// WriteTo writes the list's JSON to w in pieces of up to 256 KiB.
func (l SessionList) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, 0, min(l.size, 256<<10))
	var n int64
	flush := func() error {
		k, err := w.Write(buf)
		n += int64(k)
		buf = buf[:0]
		return err
	}
	buf = append(buf, '[')
	for i, p := range l.pieces {
		if i > 0 {
			buf = append(buf, ',')
		}
		if len(buf)+len(p) > cap(buf) && len(buf) > 0 {
			if err := flush(); err != nil {
				return n, err
			}
		}
		buf = append(buf, p...)
	}
	buf = append(buf, ']')
	return n, flush()
}
