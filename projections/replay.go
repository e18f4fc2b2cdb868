package projections

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// checkpointSchema changes whenever the shape of the read models changes, so
// a checkpoint written by another build is ignored and the journal replayed.
const checkpointSchema = 10

// checkpoint is the gob form of a Store at one seq. It is followed by Parts
// gob-encoded checkpointParts, each encoded on its own (as a []byte value of
// the outer stream), so that restore decodes them on every core.
type checkpoint struct {
	Schema     int
	Seq        uint64
	SeqID      string // the envelope ID at Seq in the journal it was taken from
	Workspaces []Workspace
	Owned      map[string]uint64 // session id → generation held by an owner
	Recent     []Notice
	// Agents are the Agent overlays of the daemon's run (agents.go).
	Agents map[string]*AgentOverlay
	// Approvals and Permissions are the pending MCP approvals and the
	// saved decisions (approvals.go).
	Approvals   map[string]*Approval
	Permissions map[string]*Permission
	Sessions    int // how many Sessions the parts hold
	TaskLists   int // how many sessionTasks the parts hold
	// AttachmentLists is how many sessionAttachments the parts hold.
	AttachmentLists int
	TurnLists       int // how many sessionTurnLists the parts hold
	Parts           int
}

// checkpointPart is one independently encoded slice of a checkpoint.
type checkpointPart struct {
	Sessions []Session
	Tasks    []sessionTasks
	// Attachments are Sessions' attachment relations (attachments.go).
	Attachments []sessionAttachments
	// Turns are Sessions' turns (turns.go).
	Turns []sessionTurnList
}

// sessionTasks is one Session's tasks, oldest first.
type sessionTasks struct {
	Session string
	Tasks   []Task
}

// checkpointChunk is how many Sessions, or task lists, one part holds.
const checkpointChunk = 4096

// WriteCheckpoint saves the read models atomically (temp file, fsync,
// rename) so that a restart replays only the journal's tail.
func (s *Store) WriteCheckpoint(path string) (uint64, error) {
	s.mu.RLock()
	cp := checkpoint{Schema: checkpointSchema, Seq: s.seq, SeqID: s.seqID, Sessions: len(s.sessions), TaskLists: len(s.tasks)}
	for _, w := range s.workspaces {
		cp.Workspaces = append(cp.Workspaces, *w)
	}
	sessions := make([]Session, 0, len(s.order))
	for _, ss := range s.order { // in ID order, so that restore need not sort
		sessions = append(sessions, *ss)
	}
	tasks := make([]sessionTasks, 0, len(s.tasks))
	for id, ts := range s.tasks {
		list := make([]Task, len(ts))
		for i, t := range ts {
			list[i] = *t
		}
		tasks = append(tasks, sessionTasks{Session: id, Tasks: list})
	}
	attachments := s.attachmentLists()
	cp.AttachmentLists = len(attachments)
	turns := s.turnLists()
	cp.TurnLists = len(turns)
	cp.Owned = maps.Clone(s.owned)
	cp.Agents = maps.Clone(s.agents)
	cp.Approvals = maps.Clone(s.approvals)
	cp.Permissions = maps.Clone(s.permissions)
	cp.Recent = append(append(cp.Recent, s.recent[s.recentNext:]...), s.recent[:s.recentNext]...)
	s.mu.RUnlock()

	tmp, err := os.CreateTemp(filepath.Dir(path), ".checkpoint-*")
	if err != nil {
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	var parts []checkpointPart
	for i := 0; i < len(sessions); i += checkpointChunk {
		parts = append(parts, checkpointPart{Sessions: sessions[i:min(i+checkpointChunk, len(sessions))]})
	}
	for i := 0; i < len(tasks); i += checkpointChunk {
		parts = append(parts, checkpointPart{Tasks: tasks[i:min(i+checkpointChunk, len(tasks))]})
	}
	for i := 0; i < len(attachments); i += checkpointChunk {
		parts = append(parts, checkpointPart{Attachments: attachments[i:min(i+checkpointChunk, len(attachments))]})
	}
	for i := 0; i < len(turns); i += checkpointChunk {
		parts = append(parts, checkpointPart{Turns: turns[i:min(i+checkpointChunk, len(turns))]})
	}
	cp.Parts = len(parts)
	bw := bufio.NewWriterSize(tmp, 1<<20)
	enc := gob.NewEncoder(bw)
	err = enc.Encode(&cp)
	var part bytes.Buffer
	for i := 0; err == nil && i < len(parts); i++ {
		part.Reset()
		if err = gob.NewEncoder(&part).Encode(&parts[i]); err == nil {
			err = enc.Encode(part.Bytes())
		}
	}
	if err != nil {
		tmp.Close()
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	return cp.Seq, nil
}

// restore loads a checkpoint into an empty store. A missing, foreign or
// unreadable checkpoint is not an error: the caller replays from zero.
func (s *Store) restore(path string, j *journal.Journal) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projections: checkpoint: %w", err)
	}
	defer f.Close()
	dec := gob.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	var cp checkpoint
	if err := dec.Decode(&cp); err != nil || cp.Schema != checkpointSchema || cp.Seq > j.Last() || !sameJournal(j, cp.Seq, cp.SeqID) {
		return false, nil // stale, foreign or ahead of this journal: rebuild
	}
	if cp.Parts < 0 || cp.Parts > 1<<20 || cp.Sessions < 0 || cp.TaskLists < 0 || cp.AttachmentLists < 0 || cp.TurnLists < 0 ||
		cp.Sessions+cp.TaskLists+cp.AttachmentLists+cp.TurnLists > cp.Parts*checkpointChunk {
		return false, nil // a damaged header
	}
	blobs := make([][]byte, cp.Parts)
	for i := range blobs {
		if err := dec.Decode(&blobs[i]); err != nil {
			return false, nil
		}
	}
	parts := make([]checkpointPart, len(blobs))
	failed := make([]error, len(blobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(blobs)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(blobs); i = int(next.Add(1) - 1) {
				failed[i] = gob.NewDecoder(bytes.NewReader(blobs[i])).Decode(&parts[i])
				blobs[i] = nil
			}
		})
	}
	wg.Wait()
	if errors.Join(failed...) != nil {
		return false, nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions = make(map[string]*Session, cp.Sessions) // the store is empty: size it once
	s.tasks = make(map[string][]*Task, cp.TaskLists)
	for i := range cp.Workspaces {
		w := &cp.Workspaces[i]
		s.workspaces[w.ID] = w
		s.byPath[w.Path] = w.ID
		s.members[w.ID] = map[string]struct{}{}
	}
	for _, part := range parts {
		for i := range part.Sessions {
			ss := &part.Sessions[i]
			ss.EnabledSkills, ss.ExposedPorts = nonNil(ss.EnabledSkills), nonNil(ss.ExposedPorts) // gob drops empty slices
			s.sessions[ss.ID] = ss
			s.order = append(s.order, ss)
			if s.members[ss.WorkspaceID] == nil {
				return false, fmt.Errorf("projections: checkpoint: session %s names unknown workspace %s", ss.ID, ss.WorkspaceID)
			}
			s.members[ss.WorkspaceID][ss.ID] = struct{}{}
		}
		for _, st := range part.Tasks {
			list := make([]*Task, len(st.Tasks))
			for i := range st.Tasks {
				t := &st.Tasks[i]
				if t.Status == TaskExited && t.ExitCode == nil {
					t.ExitCode = new(int) // gob drops a pointer to zero; an exited task always has a code
				}
				list[i] = t
			}
			s.tasks[st.Session] = list
		}
		for _, sa := range part.Attachments {
			s.restoreAttachments(sa)
		}
		for _, l := range part.Turns {
			s.restoreTurns(l)
		}
	}
	if !slices.IsSortedFunc(s.order, func(a, b *Session) int { return compareIDs(a.ID, b.ID) }) {
		slices.SortFunc(s.order, func(a, b *Session) int { return compareIDs(a.ID, b.ID) }) // an older writer's order
	}
	if len(s.sessions) != cp.Sessions || len(s.order) != cp.Sessions || len(s.tasks) != cp.TaskLists || len(s.attachments) != cp.AttachmentLists || len(s.turns) != cp.TurnLists {
		return false, nil // not what its header promised: rebuild
	}
	maps.Copy(s.owned, cp.Owned)
	maps.Copy(s.agents, cp.Agents)
	maps.Copy(s.approvals, cp.Approvals)
	maps.Copy(s.permissions, cp.Permissions)
	s.recent = cp.Recent
	s.seq, s.seqID, s.delivered = cp.Seq, cp.SeqID, cp.Seq
	return true, nil
}

// Load builds a store from the checkpoint at checkpointPath (if usable) and
// the journal events after it. It reports how many events it replayed.
func Load(ctx context.Context, j *journal.Journal, checkpointPath string) (*Store, int, error) {
	s := New()
	if checkpointPath != "" {
		ok, err := s.restore(checkpointPath, j)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			s = New()
		}
	}
	n, err := s.Replay(ctx, j)
	return s, n, err
}

// replayChunk is how many events one decode task handles; replaySlab is the
// size of the buffers the scan copies stored values into.
const (
	replayChunk = 2048
	replaySlab  = 1 << 20
)

// Replay applies every journal event after the store's seq. Decoding runs
// on every core in parallel; applying stays in seq order on one goroutine.
func (s *Store) Replay(ctx context.Context, j *journal.Journal) (int, error) {
	type task struct {
		recs []journal.Record
		err  error
		done chan struct{}
	}
	workers := runtime.GOMAXPROCS(0)
	todo := make(chan *task, workers*2)
	ordered := make(chan *task, workers*2)
	for range workers {
		go func() {
			for t := range todo {
				for i := range t.recs {
					r := &t.recs[i]
					env, ok := parseEnvelope(r.Raw)
					var err error
					if ok {
						r.Envelope = env
						r.Payload, err = events.Decode(env.Type, env.Data)
					}
					if !ok || err != nil {
						// The general decoder decides, and names the fault
						// of, whatever the fast path did not take.
						if env, err = journal.DecodeEnvelope(r.Raw); err == nil {
							r.Envelope = env
							r.Payload, err = events.Decode(env.Type, env.Data)
						}
					}
					if err != nil {
						t.err = fmt.Errorf("projections: replay seq %d: %w", r.Seq, err)
						break
					}
				}
				close(t.done)
			}
		}()
	}

	scanErr := make(chan error, 1)
	go func() {
		defer close(todo)
		defer close(ordered)
		newTask := func() *task {
			return &task{recs: make([]journal.Record, 0, replayChunk), done: make(chan struct{})}
		}
		cur := newTask()
		flush := func() {
			todo <- cur
			ordered <- cur
			cur = newTask()
		}
		// Values are copied out of the transaction into shared slabs: one
		// allocation per slab, not per event. Nothing the store keeps
		// aliases them, so a slab is garbage once its chunks are applied.
		var slab []byte
		err := j.Scan(ctx, s.Seq(), 0, func(seq uint64, raw []byte) error {
			if cap(slab)-len(slab) < len(raw) {
				slab = make([]byte, 0, max(replaySlab, len(raw)))
			}
			start := len(slab)
			slab = append(slab, raw...)
			cur.recs = append(cur.recs, journal.Record{Envelope: journal.Envelope{Seq: seq}, Raw: slab[start:len(slab):len(slab)]})
			if len(cur.recs) == replayChunk {
				flush()
			}
			return nil
		})
		if len(cur.recs) > 0 {
			flush()
		}
		scanErr <- err
	}()

	n := 0
	var applyErr error
	for t := range ordered {
		<-t.done
		if applyErr == nil {
			applyErr = t.err
		}
		if applyErr == nil {
			applyErr = s.Apply(t.recs)
			n += len(t.recs)
		}
	}
	if err := <-scanErr; err != nil {
		return n, fmt.Errorf("projections: replay: %w", err)
	}
	return n, applyErr
}

// parseEnvelope is the replay fast path of journal.DecodeEnvelope. It accepts
// only the exact layout the journal writes,
//
//	{"seq":N,"id":"…","type":"…","aggregate":"…","aggregate_id":"…","at":"RFC 3339","data":…}
//
// with the names drawn from [A-Za-z0-9_-], and reports false for anything
// else, which the caller then decodes with journal.DecodeEnvelope. Data
// aliases raw and is validated by the payload's decoder; when that fails,
// the caller falls back too, so that a damaged value gets the general
// decoder's error. It replaces an encoding/json pass that validates the
// whole value, data included, before decoding it, and allocates only the ID
// and aggregate ID strings.
func parseEnvelope(raw []byte) (journal.Envelope, bool) {
	var env journal.Envelope
	b, ok := bytes.CutPrefix(raw, []byte(`{"seq":`))
	if !ok {
		return env, false
	}
	n := 0
	for n < len(b) && n < 19 && b[n] >= '0' && b[n] <= '9' { // 19 digits never overflow
		env.Seq = env.Seq*10 + uint64(b[n]-'0')
		n++
	}
	if n == 0 || (b[0] == '0' && n > 1) {
		return env, false
	}
	b = b[n:]
	var id, typ, agg, aggID, at []byte
	if b, id, ok = envelopeField(b, `,"id":"`, true); !ok {
		return env, false
	}
	if b, typ, ok = envelopeField(b, `","type":"`, true); !ok {
		return env, false
	}
	if b, agg, ok = envelopeField(b, `","aggregate":"`, true); !ok {
		return env, false
	}
	if b, aggID, ok = envelopeField(b, `","aggregate_id":"`, true); !ok {
		return env, false
	}
	if b, at, ok = envelopeField(b, `","at":"`, false); !ok {
		return env, false
	}
	data, ok := bytes.CutPrefix(b, []byte(`","data":`))
	if !ok || len(data) < 2 || data[len(data)-1] != '}' {
		return env, false
	}
	if at[len(at)-1] != 'Z' || bytes.IndexByte(at, ',') >= 0 { // the journal writes UTC, RFC 3339
		return env, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(at))
	if err != nil {
		return env, false
	}
	env.ID, env.Type, env.Aggregate, env.AggregateID = string(id), intern(typ), intern(agg), string(aggID)
	env.At, env.Data = t, data[:len(data)-1:len(data)-1]
	return env, true
}

// envelopeField cuts key and the string value up to the next quote. A token
// value must be 1–128 bytes of [A-Za-z0-9_-]; any other value must not hold
// an escape.
func envelopeField(b []byte, key string, token bool) (rest, value []byte, ok bool) {
	b, ok = bytes.CutPrefix(b, []byte(key))
	if !ok {
		return nil, nil, false
	}
	end := bytes.IndexByte(b, '"')
	if end <= 0 || (token && end > 128) {
		return nil, nil, false
	}
	value = b[:end]
	for _, c := range value {
		switch {
		case c == '\\' || c < 0x20:
			return nil, nil, false
		case token && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'):
			return nil, nil, false
		}
	}
	return b[end:], value, true
}

// interned holds the event type and aggregate names, so that replay does not
// allocate them once per event.
var interned = func() map[string]string {
	m := map[string]string{events.Workspace: events.Workspace, events.Session: events.Session}
	for _, t := range events.Types() {
		m[t] = t
	}
	return m
}()

func intern(b []byte) string {
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return string(b)
}

// sameJournal reports whether the journal's event at seq has the envelope
// ID a checkpoint recorded, so that a checkpoint is never applied to a
// journal it was not taken from.
func sameJournal(j *journal.Journal, seq uint64, id string) bool {
	if seq == 0 {
		return true
	}
	var got string
	err := j.Scan(context.Background(), seq-1, 1, func(_ uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		got = env.ID
		return err
	})
	return err == nil && got == id
}
