package projections

import (
	"bytes"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// The Session list (GET /api/sessions, every Session, open and closed) is
// the read the daemon serves largest: with 50,000 Sessions, encoding/json's
// reflection took longer than the whole restart. AppendJSON writes the
// same bytes json.Marshal writes for a Session (TestSessionJSONMatches
// holds the two together, field by field), directly from the record.

// AppendJSON appends the Session's JSON encoding to b: byte for byte what
// encoding/json.Marshal produces for it.
func (ss *Session) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, ss.ID)
	b = append(b, `,"workspace_id":`...)
	b = appendJSONString(b, ss.WorkspaceID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, ss.Name)
	b = append(b, `,"working_dir":`...)
	b = appendJSONString(b, ss.WorkingDir)
	b = append(b, `,"mode":{"kind":`...)
	b = appendJSONString(b, ss.Mode.Kind)
	if ss.Mode.AgentID != "" {
		b = append(b, `,"agent_id":`...)
		b = appendJSONString(b, ss.Mode.AgentID)
	}
	if len(ss.Mode.Workers) > 0 {
		b = append(b, `,"workers":[`...)
		for i, v := range ss.Mode.Workers {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, v)
		}
		b = append(b, ']')
	}
	b = append(b, `},"enabled_skills":`...)
	if ss.EnabledSkills == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, v := range ss.EnabledSkills {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, v)
		}
		b = append(b, ']')
	}
	b = append(b, `,"exposed_ports":`...)
	if ss.ExposedPorts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, v := range ss.ExposedPorts {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(v), 10)
		}
		b = append(b, ']')
	}
	e := &ss.Environment
	b = append(b, `,"environment":{"state":`...)
	b = appendJSONString(b, e.State)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, e.Generation, 10)
	b = append(b, `,"image":`...)
	b = appendJSONString(b, e.Image)
	b = append(b, `,"setup_command":`...)
	b = appendJSONString(b, e.SetupCommand)
	if e.SetupSource != "" {
		b = append(b, `,"setup_source":`...)
		b = appendJSONString(b, e.SetupSource)
	}
	b = append(b, `,"setup_approved":`...)
	b = strconv.AppendBool(b, e.SetupApproved)
	b = append(b, `,"setup_reviewed":`...)
	b = strconv.AppendBool(b, e.SetupReviewed)
	b = append(b, `,"evidence":`...)
	if ev := e.Evidence; ev == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"error":`...)
		b = appendJSONString(b, ev.Error)
		if ev.ExitCode != nil {
			b = append(b, `,"exit_code":`...)
			b = strconv.AppendInt(b, int64(*ev.ExitCode), 10)
		}
		if ev.OutputTail != "" {
			b = append(b, `,"output_tail":`...)
			b = appendJSONString(b, ev.OutputTail)
		}
		if ev.Fix != "" {
			b = append(b, `,"fix":`...)
			b = appendJSONString(b, ev.Fix)
		}
		b = append(b, '}')
	}
	if e.Owner != "" {
		b = append(b, `,"owner":`...)
		b = appendJSONString(b, e.Owner)
	}
	b = append(b, `,"setup_ran":`...)
	b = strconv.AppendBool(b, e.SetupRan)
	if e.SetupSkipped != "" {
		b = append(b, `,"setup_skipped":`...)
		b = appendJSONString(b, e.SetupSkipped)
	}
	if e.SetupOutput != "" {
		b = append(b, `,"setup_output":`...)
		b = appendJSONString(b, e.SetupOutput)
	}
	if e.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, e.Reason)
	}
	b = append(b, `},"check_command":`...)
	if ss.CheckCommand == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *ss.CheckCommand)
	}
	b = append(b, `,"status":`...)
	b = appendJSONString(b, ss.Status)
	if ss.ClosedAt != nil {
		b = append(b, `,"closed_at":`...)
		b = appendJSONTime(b, *ss.ClosedAt)
	}
	b = append(b, `,"created_at":`...)
	b = appendJSONTime(b, ss.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendJSONTime(b, ss.UpdatedAt)
	return append(b, '}')
}

// SessionsJSON returns Sessions(workspaceID) as a JSON array, as
// json.Marshal would, without copying the records first.
func (s *Store) SessionsJSON(workspaceID string) []byte {
	l := s.SessionList(workspaceID)
	b := bytes.NewBuffer(make([]byte, 0, l.Len()))
	_, _ = l.WriteTo(b)
	return b.Bytes()
}

// SessionList is Sessions(workspaceID) as a JSON array, taken under the
// read lock and written after it: each parked Session's JSON as the
// checkpoint kept it (never written again), the others encoded once into
// one buffer. So the list of a restart is served without copying every
// Session into one large buffer first.
type SessionList struct {
	pieces []string
	size   int
}

// SessionList returns the list of a Workspace's Sessions, or all with "".
func (s *Store) SessionList(workspaceID string) SessionList {
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.sorted(workspaceID)
	l := SessionList{pieces: make([]string, len(list)), size: 1 + max(len(list), 1)} // brackets and commas
	var enc []byte
	var ends []int // end of each encoded Session in enc, in list order
	for i, ss := range list {
		if p := ss.parked; p != nil && p.json != "" {
			l.pieces[i] = p.json // unchanged since the checkpoint
		} else {
			enc = ss.AppendJSON(enc)
			ends = append(ends, len(enc))
		}
	}
	if len(enc) > 0 {
		all := unsafe.String(unsafe.SliceData(enc), len(enc)) // enc is not written again
		start := 0
		for i := range l.pieces {
			if l.pieces[i] == "" {
				l.pieces[i], start, ends = all[start:ends[0]], ends[0], ends[1:]
			}
		}
	}
	for _, p := range l.pieces {
		l.size += len(p)
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

// appendJSONTime is time.Time's JSON: RFC 3339 with nanoseconds (trailing
// zeros dropped), quoted. The read models hold UTC times from the journal;
// those are formatted here digit by digit, any other by the time package.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	year, month, day := t.Date()
	if t.Location() != time.UTC || year < 0 || year > 9999 {
		b = t.AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	if ns := t.Nanosecond(); ns != 0 {
		digits := 9
		for ns%10 == 0 {
			ns /= 10
			digits--
		}
		b = append(b, '.')
		b = appendDigits(b, ns, digits)
	}
	return append(b, 'Z', '"')
}

// appendDigits appends v, 0 <= v < 10^n, as exactly n decimal digits.
func appendDigits(b []byte, v, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		b = append(b, 0)
	}
	for i := len(b) - 1; n > 0; i, n = i-1, n-1 {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

const hexDigits = "0123456789abcdef"

// jsonPlain marks the ASCII bytes a JSON string holds as they are.
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString quotes s as encoding/json does by default: the
// escapes \" \\ \b \f \n \r \t; \u00XX for the other control bytes and
// for <, > and & (HTML-safe); \ufffd for each byte of invalid UTF-8; and
// \u2028, \u2029 (JSONP-safe).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonPlain[c] {
				i++
				continue
			}
			var esc string
			switch {
			case c == '"':
				esc = `\"`
			case c == '\\':
				esc = `\\`
			case c == '\b':
				esc = `\b`
			case c == '\f':
				esc = `\f`
			case c == '\n':
				esc = `\n`
			case c == '\r':
				esc = `\r`
			case c == '\t':
				esc = `\t`
			}
			b = append(b, s[done:i]...)
			if esc != "" {
				b = append(b, esc...)
			} else {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			done = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[done:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[done:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		done = i
	}
	b = append(b, s[done:]...)
	return append(b, '"')
}
