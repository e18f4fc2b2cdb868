package projections

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
)

// The checkpoint is a compact binary image of the read models, so that a
// restart replays only the journal's tail.
//
//	"lathe-cp" | uvarint schema | head | CRC-32C of all before it (4 bytes, BE)
//	then per chunk of Sessions: uvarint count | uvarint length | body | CRC-32C of the body
//
// The head is the seq and its envelope ID; the small read models (every
// model but the Sessions and their parts: cpSmall) as one gob value with
// its shape (shape.go), which gives back the nil-versus-empty slices and
// maps and the pointers to zero values that gob alone loses, so a restart
// serves exactly what a replay serves; and the number of Sessions.
//
// The Sessions, with their tasks, attachments, turns and cached JSON, are
// what grows with the history, and are written by hand so that a restart
// decodes them at memory speed: gob decodes the 45,000 Session records of
// BenchmarkRestartWithCheckpoint alone in 250 to 340 ms, while the whole
// restart by hand costs about 50 ms of CPU, against a goal of 100 ms.
// Each chunk carries its own checksum, so that restore verifies the chunks
// on every core as it decodes them rather than the whole file on one. The records are varints, length-prefixed
// strings and counts, in the field order of the functions below, one pair
// (put…/get…) per type. Slices carry len+1 so that nil and empty stay
// apart. The reader maps the whole file read-only, views it as one string
// (unsafe.String over bytes that nothing writes again: a checkpoint is
// replaced by rename, never written in place) and slices every string field
// out of it, so that decoding allocates the records, not their text, and
// the text is the page cache's, not copied.
//
// A change of any hand-encoded type must change these functions and
// checkpointSchema together; TestCheckpointCoversEveryField and
// TestCheckpointCodecKeepsEveryField fail until it does.
const checkpointMagic = "lathe-cp"

// checkpointSchema changes whenever the checkpoint's layout or the shape of
// the read models changes, so a checkpoint written by another build is
// ignored and the journal replayed.
const checkpointSchema = 34 // 13: per-chunk checksums, the unexited flag; 14: Related; 15: a turn's change trees and their refs; 16: lattice plans; 17: Automations; 18: Chats, shared files, A2A tasks; 19: Attempt sets; 20: Attempt sets by hand; 21: Agent overlays, the recent log and Chats by hand; 22: the small models by gob with their shape; 23: no stored total_tokens in the turns (derived), cost_known needs complete counts; 24: the unsettled effect intents; 25: a Chat message's files, a fork's attachments; 26: the remote runtime; 27: a Session's isolation and branch; 28: ended runs and Chat messages evicted, the Chat search index stored; 29: settled Attempt sets evicted (Seq, Evicted); 30: a turn's refused prompt (Turn.Refused); 31: a remote Session's rescued clones; 32: the outside Agents' own sessions; 33: a turn's outside agent (name, version) and its plan; 34: a turn's stop reason

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCheckpoint marks a checkpoint that does not decode: the store is
// rebuilt from the journal instead.
var errCheckpoint = errors.New("damaged checkpoint")

// cpSmall is the gob part of the checkpoint: the read models that stay
// small whatever the history. Every exported field of every type it holds
// is stored (gob), with the shape gob loses (shape.go); a read model added
// to the Store must be added here, or beside the Sessions.
type cpSmall struct {
	Workspaces []*Workspace
	Owned      map[string]uint64 // session id → generation held by an owner
	// Recent is the recent log, oldest first (recent.go).
	Recent []Notice
	// Agents are the Agent overlays of the daemon's run (agents.go).
	Agents map[string]*AgentOverlay
	// Approvals and Permissions are the pending MCP approvals and the
	// saved decisions (approvals.go).
	Approvals   map[string]*Approval
	Permissions map[string]*Permission
	// Related are the audit trails' other aggregates by Session (audit.go).
	Related map[string][]string
	// Automations are the Automations, folders and runs (automations.go).
	Automations *automationState
	// Chats, Files and A2A are the compatibility Chats, the shared file
	// store and the inbound A2A tasks (chats.go).
	Chats map[string]*Chat
	Files map[string]*SharedFile
	A2A   map[string]*A2ATask
	// Ways are the Attempt sets by ID (ways.go).
	Ways []*AttemptSet
	// Effects are the unsettled effect intents (effects.go).
	Effects map[string]events.EffectIntended
	// Outside are the outside Agents' own sessions (outside.go).
	Outside map[string]OutsideSession
}

// cpSmallImage is cpSmall as gob writes it: the value and its shape.
type cpSmallImage struct {
	Small cpSmall
	Shape []byte
}

// checkpointTemp is the name pattern of a checkpoint being written, beside
// the checkpoint.
const checkpointTemp = ".checkpoint-*"

// RemoveCheckpointTemps removes the checkpoints that a stopped process was
// writing beside path (a kill mid-write). Call it only where no other
// process checkpoints: the daemon, at start, under its data dir's lock.
func RemoveCheckpointTemps(path string) error {
	temps, err := filepath.Glob(filepath.Join(filepath.Dir(path), checkpointTemp))
	if err != nil {
		return err
	}
	for _, t := range temps {
		if err := os.Remove(t); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// WriteCheckpoint saves the read models atomically (temp file, fsync,
// rename) so that a restart replays only the journal's tail.
func (s *Store) WriteCheckpoint(path string) (uint64, error) {
	w, seq, err := s.image(int(max(1<<20, s.checkpointSize.Load()*9/8)))
	if err != nil {
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	s.checkpointSize.Store(int64(len(w.b)))

	tmp, err := os.CreateTemp(filepath.Dir(path), checkpointTemp)
	if err != nil {
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(w.b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	return seq, nil
}

// image encodes the read models as a checkpoint (in a buffer of size
// bytes to begin with) and returns the seq they reflect.
func (s *Store) image(size int) (cpWriter, uint64, error) {
	w := cpWriter{b: make([]byte, 0, size)}
	w.b = append(w.b, checkpointMagic...)
	w.uint(checkpointSchema)
	s.sh.mu.RLock()
	defer s.sh.mu.RUnlock()
	err := s.encode(&w)
	return w, s.seq, err
}

// small gathers the small read models; the lock is held.
func (s *Store) small() cpSmall {
	small := cpSmall{Owned: s.SessionModel.owned, Recent: s.RecentModel.inOrder(), Agents: s.AgentModel.agents,
		Approvals: s.ApprovalModel.approvals, Permissions: s.ApprovalModel.permissions, Related: s.AuditModel.related,
		Automations: s.AutomationModel.d, Chats: s.ChatModel.chats, Files: s.ChatModel.files, A2A: s.ChatModel.a2a,
		Effects: s.EffectModel.open, Outside: s.OutsideModel.sessions}
	for _, id := range slices.Sorted(maps.Keys(s.SessionModel.workspaces)) {
		small.Workspaces = append(small.Workspaces, s.SessionModel.workspaces[id])
	}
	for _, id := range slices.Sorted(maps.Keys(s.WaysModel.sets)) {
		small.Ways = append(small.Ways, s.WaysModel.sets[id])
	}
	return small
}

// encode writes the body; the lock is held.
func (s *Store) encode(w *cpWriter) error {
	w.uint(s.seq)
	w.str(s.seqID)
	img := cpSmallImage{Small: s.small()}
	img.Shape = shapeOf(&img.Small)
	var g bytes.Buffer
	if err := gob.NewEncoder(&g).Encode(&img); err != nil {
		return err
	}
	w.uint(uint64(g.Len()))
	w.b = append(w.b, g.Bytes()...)
	// Sessions go in chunks, each with its count, length and checksum, so
	// that restore verifies and decodes them on every core.
	order := s.SessionModel.order
	w.uint(uint64(len(order)))
	w.b = binary.BigEndian.AppendUint32(w.b, crc32.Checksum(w.b, castagnoli))
	var part, chunk cpWriter
	for from := 0; from < len(order); from += sessionChunk {
		list := order[from:min(from+sessionChunk, len(order))]
		chunk.b = chunk.b[:0]
		for _, ss := range list { // sorted, so that restore need not sort
			s.encodeSession(&chunk, &part, ss)
		}
		w.uint(uint64(len(list)))
		w.uint(uint64(len(chunk.b)))
		w.b = append(w.b, chunk.b...)
		w.b = binary.BigEndian.AppendUint32(w.b, crc32.Checksum(chunk.b, castagnoli))
	}
	return nil
}

// sessionChunk is how many Sessions one chunk of the checkpoint holds.
const sessionChunk = 2048

// encodeSession writes one Session, whether it has a live turn, its parts
// (part is scratch) and its JSON.
func (s *Store) encodeSession(w, part *cpWriter, ss *Session) {
	id := ss.ID
	w.session(ss)
	st := s.TurnModel.turns[id]
	w.bool(st != nil && st.active != nil)
	if p := ss.parked; p != nil {
		w.bool(p.unexited)
		w.str(p.tasks)
		w.str(p.attachments)
		w.str(p.turns)
	} else {
		tasks := s.TaskModel.tasks[id]
		w.bool(unexited(tasks))
		part.b = part.b[:0]
		part.uint(uint64(len(tasks)))
		for _, t := range tasks {
			part.task(t)
		}
		w.part(part.b)
		part.b = part.b[:0]
		part.uint(uint64(len(s.AttachmentModel.attachments[id])))
		for _, a := range s.AttachmentModel.attachments[id] {
			part.attachment(a)
		}
		w.part(part.b)
		part.b = part.b[:0]
		if st != nil {
			part.uint(uint64(len(st.Turns)))
			for _, t := range st.Turns {
				part.turn(t)
			}
		}
		w.part(part.b)
	}
	w.str(ss.json.of(ss))
}

// part writes an encoded list, or "" for an empty one.
func (w *cpWriter) part(b []byte) {
	if len(b) == 1 && b[0] == 0 {
		b = nil
	}
	w.uint(uint64(len(b)))
	w.b = append(w.b, b...)
}

// restore loads a checkpoint into an empty store. A missing, foreign,
// stale or damaged checkpoint is not an error: the caller replays from zero.
func (s *Store) restore(path string, j *journal.Journal) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projections: checkpoint: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("projections: checkpoint: %w", err)
	}
	// Everything restore allocates stays live: a collection during it only
	// rescans a growing heap. It runs at start-up, before anything else
	// allocates much.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	size := fi.Size()
	if size < int64(len(checkpointMagic))+5 || size > math.MaxInt32 {
		return false, nil
	}
	// The file is mapped read-only and stays mapped for the life of the
	// process: the string over it, which every string field of the read
	// models slices, is as immutable as any other, since a checkpoint is
	// only ever replaced by rename. Its pages are the page cache's: a
	// restart neither zeroes nor copies them, and the collector never
	// scans them.
	buf, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return false, nil
	}
	ok, err := s.restoreFrom(buf, j)
	if !ok || err != nil {
		_ = syscall.Munmap(buf) // nothing kept a string over it
	}
	return ok, err
}

// restoreFrom decodes a checkpoint's bytes; false if they are not a valid
// checkpoint of this journal.
func (s *Store) restoreFrom(buf []byte, j *journal.Journal) (bool, error) {
	if !s.decodeImage(buf) {
		return false, nil
	}
	if s.seq > j.Last() || !sameJournal(j, s.seq, s.seqID) {
		return false, nil // ahead of this journal, or another journal's
	}
	return true, nil
}

// decodeImage decodes a checkpoint's bytes into an empty store; false if
// they are not a valid checkpoint of this build. The store's strings slice
// buf, which must never change.
func (s *Store) decodeImage(buf []byte) bool {
	rest, ok := strings.CutPrefix(unsafe.String(unsafe.SliceData(buf), len(buf)), checkpointMagic)
	if !ok {
		return false
	}
	r := cpReader{s: rest}
	if r.uint() != checkpointSchema || r.err != nil {
		return false // another build's
	}
	s.sh.mu.Lock()
	defer s.sh.mu.Unlock()
	if err := s.decode(&r); err != nil || r.err != nil || r.i != len(r.s) {
		return false
	}
	s.delivered = s.seq
	return true
}

// checksum reads a CRC-32C and tells whether it is that of s.
func (r *cpReader) checksum(s string) bool {
	if len(r.s)-r.i < 4 {
		r.fail()
		return false
	}
	want := binary.BigEndian.Uint32([]byte(r.s[r.i : r.i+4]))
	r.i += 4
	return crc32.Update(0, castagnoli, unsafe.Slice(unsafe.StringData(s), len(s))) == want
}

// restoreSmall puts the small read models of a checkpoint into an empty
// store; the lock is held.
func (s *Store) restoreSmall(sm *cpSmall) error {
	sessions := s.SessionModel
	for _, w := range sm.Workspaces {
		sessions.workspaces[w.ID] = w
		sessions.byPath[w.Path] = w.ID
		sessions.members[w.ID] = 0
	}
	maps.Copy(sessions.owned, sm.Owned)
	if len(sm.Recent) > recentSize {
		return errCheckpoint
	}
	s.RecentModel.recent = sm.Recent
	maps.Copy(s.AgentModel.agents, sm.Agents)
	maps.Copy(s.ApprovalModel.approvals, sm.Approvals)
	maps.Copy(s.ApprovalModel.permissions, sm.Permissions)
	maps.Copy(s.AuditModel.related, sm.Related)
	maps.Copy(s.EffectModel.open, sm.Effects)
	maps.Copy(s.OutsideModel.sessions, sm.Outside)
	if sm.Automations != nil {
		s.AutomationModel.d = sm.Automations
	}
	for _, c := range sm.Chats {
		c.name = strings.ToLower(c.Name) // the search index is stored
	}
	maps.Copy(s.ChatModel.chats, sm.Chats)
	maps.Copy(s.ChatModel.files, sm.Files)
	maps.Copy(s.ChatModel.a2a, sm.A2A)
	for _, a := range sm.Ways {
		s.WaysModel.indexSet(a)
	}
	return nil
}

// decode reads the body into an empty store; the lock is held. A record
// that contradicts another is an error; damage is r.err.
func (s *Store) decode(r *cpReader) error {
	s.seq = r.uint()
	s.seqID = r.str()
	small := r.str()
	n := r.count()
	if r.err != nil || !r.checksum(checkpointMagic+r.s[:r.i]) {
		return errCheckpoint
	}
	var img cpSmallImage
	if err := gob.NewDecoder(strings.NewReader(small)).Decode(&img); err != nil {
		return errCheckpoint
	}
	if !reshape(&img.Small, img.Shape) {
		return errCheckpoint
	}
	if err := s.restoreSmall(&img.Small); err != nil {
		return err
	}
	type chunk struct {
		from, to int
		body     string
		sum      cpReader // at the body's checksum
	}
	var chunks []chunk
	for from := 0; from < n; {
		k, body := r.count(), r.str()
		if r.err != nil || k == 0 || k > n-from || len(r.s)-r.i < 4 {
			return errCheckpoint
		}
		chunks = append(chunks, chunk{from, from + k, body, cpReader{s: r.s, i: r.i}})
		r.i += 4
		from += k
	}
	// The records are verified and decoded on every core, each chunk into
	// its own range of one slab; the indexes are built after.
	slab := make([]Session, n)
	parks := make([]parked, n)
	caches := make([]jsonCache, n)
	jsons := make([]string, n)
	live := make([]bool, n)
	failed := make([]bool, len(chunks))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(chunks)) {
		wg.Go(func() {
			for c := int(next.Add(1) - 1); c < len(chunks); c = int(next.Add(1) - 1) {
				if !chunks[c].sum.checksum(chunks[c].body) {
					failed[c] = true
					continue
				}
				cr := cpReader{s: chunks[c].body}
				for i := chunks[c].from; i < chunks[c].to; i++ {
					cr.session(&slab[i])
					live[i] = cr.bool()
					parks[i] = parked{unexited: cr.bool(), tasks: cr.str(), attachments: cr.str(), turns: cr.str()}
					slab[i].parked = &parks[i]
					slab[i].json = &caches[i]
					if jsons[i] = cr.str(); jsons[i] != "" {
						caches[i].b.Store(&jsons[i])
					}
				}
				failed[c] = cr.err != nil || cr.i != len(cr.s)
			}
		})
	}
	wg.Wait()
	if slices.Contains(failed, true) {
		return errCheckpoint
	}
	m := s.SessionModel
	m.order = make([]*Session, n)
	m.sessions = make(map[string]*Session, n)
	for i := range slab {
		ss := &slab[i]
		m.order[i] = ss
		if i > 0 && slab[i-1].ID >= ss.ID {
			return fmt.Errorf("session %s out of order", ss.ID)
		}
		if _, ok := m.members[ss.WorkspaceID]; !ok {
			return fmt.Errorf("session %s names unknown workspace %s", ss.ID, ss.WorkspaceID)
		}
		m.members[ss.WorkspaceID]++
		m.sessions[ss.ID] = ss
	}
	for i := range slab {
		if live[i] {
			// The live runs are part of the /ws snapshot: unpark at once.
			if err := s.unpark(&slab[i]); err != nil {
				return err
			}
		}
	}
	return r.err
}

// parked is one Session's tasks, attachments and turns as the checkpoint
// encoded them, each a count and that many records, or "" for none. A
// restart decodes the parts only when something needs them: an event of
// the Session unparks them (Store.fold), a read decodes a copy (tasksOf,
// attachmentsOf, turnsRead), and the next checkpoint writes them back as
// they are. So the restart's cost is the Sessions, not their histories;
// and the Session list serves each Session's JSON as the checkpoint kept
// it until an event changes the Session (sessionjson.go).
//
// unexited tells whether any of the tasks had not exited, so that the
// start-up reconciliation finds those Sessions without decoding every
// Session's tasks.
type parked struct {
	unexited                  bool
	tasks, attachments, turns string
}

// unpark decodes a parked Session's parts into their read models; the
// write lock is held.
func (s *Store) unpark(ss *Session) error {
	p := ss.parked
	if p == nil {
		return nil
	}
	ss.parked = nil
	id := ss.ID
	tasks, attachments, turns, err := p.decode(id)
	if err != nil {
		return fmt.Errorf("projections: checkpointed parts of session %s: %w", id, err)
	}
	if tasks != nil {
		s.TaskModel.tasks[id] = tasks
	}
	if attachments != nil {
		s.AttachmentModel.attachments[id] = attachments
	}
	if turns != nil {
		s.TurnModel.turns[id] = turns
		for _, t := range turns.Turns {
			if t.Live() {
				run := &liveRun{turn: t}
				if t.StartedAt != nil {
					run.agent(t.AgentID).Status = TurnRunning
				}
				s.LiveModel.runs[runKey(id, t.TurnID)] = run
			}
		}
	}
	return nil
}

// decode decodes the parts; nil for each that is empty.
func (p parked) decode(id string) (tasks []*Task, attachments map[string]*Attachment, turns *sessionTurns, err error) {
	if p.tasks != "" {
		r := cpReader{s: p.tasks}
		tasks = make([]*Task, r.count())
		slab := make([]Task, len(tasks))
		for i := range tasks {
			tasks[i] = &slab[i]
			r.task(tasks[i])
		}
		if r.err != nil || r.i != len(r.s) {
			return nil, nil, nil, errCheckpoint
		}
	}
	if p.attachments != "" {
		r := cpReader{s: p.attachments}
		k := r.count()
		attachments = make(map[string]*Attachment, k)
		for range k {
			a := &Attachment{}
			r.attachment(a)
			attachments[a.ReferenceID] = a
		}
		if r.err != nil || r.i != len(r.s) {
			return nil, nil, nil, errCheckpoint
		}
	}
	if p.turns != "" {
		r := cpReader{s: p.turns}
		turns = newSessionTurns(id)
		turns.Turns = make([]*Turn, r.count())
		slab := make([]Turn, len(turns.Turns))
		for i := range turns.Turns {
			t := &slab[i]
			r.turn(t)
			turns.Turns[i] = t
			turns.index(t)
		}
		if r.err != nil || r.i != len(r.s) {
			return nil, nil, nil, errCheckpoint
		}
	}
	return tasks, attachments, turns, nil
}

// cpWriter appends the checkpoint encoding.
type cpWriter struct{ b []byte }

func (w *cpWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *cpWriter) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *cpWriter) str(v string)  { w.uint(uint64(len(v))); w.b = append(w.b, v...) }

func (w *cpWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// time keeps the instant, in UTC, as the journal's envelopes carry it.
func (w *cpWriter) time(t time.Time) { w.int(t.Unix()); w.uint(uint64(t.Nanosecond())) }

// n writes a slice length, or 0 for nil.
func n[T any](w *cpWriter, v []T) {
	if v == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(v)) + 1)
}

func (w *cpWriter) strs(v []string) {
	n(w, v)
	for _, s := range v {
		w.str(s)
	}
}

func (w *cpWriter) raw(v []byte) { n(w, v); w.b = append(w.b, v...) }

// optW writes a present flag and, when set, the value.
func optW[T any](w *cpWriter, v *T, write func(T)) {
	w.bool(v != nil)
	if v != nil {
		write(*v)
	}
}

func (w *cpWriter) optStr(v *string)     { optW(w, v, w.str) }
func (w *cpWriter) optTime(v *time.Time) { optW(w, v, w.time) }
func (w *cpWriter) optInt(v *int)        { optW(w, v, func(i int) { w.int(int64(i)) }) }

func (w *cpWriter) blob(b *events.Blob) {
	optW(w, b, func(b events.Blob) {
		w.str(b.SHA256)
		w.int(b.Size)
		w.str(b.Preview)
	})
}

func (w *cpWriter) text(t events.Text)     { w.str(t.Inline); w.blob(t.Blob) }
func (w *cpWriter) json(j events.JSON)     { w.raw(j.Inline); w.blob(j.Blob) }
func (w *cpWriter) optText(t *events.Text) { optW(w, t, w.text) }

func (w *cpWriter) session(ss *Session) {
	w.str(ss.ID)
	w.str(ss.WorkspaceID)
	w.str(ss.Name)
	w.str(ss.WorkingDir)
	w.str(ss.Mode.Kind)
	w.str(ss.Mode.AgentID)
	w.strs(ss.Mode.Workers)
	w.strs(ss.EnabledSkills)
	n(w, ss.ExposedPorts)
	for _, p := range ss.ExposedPorts {
		w.int(int64(p))
	}
	e := &ss.Environment
	w.str(e.State)
	w.uint(e.Generation)
	w.str(e.Image)
	w.str(e.SetupCommand)
	w.str(e.SetupSource)
	w.bool(e.SetupApproved)
	w.bool(e.SetupReviewed)
	w.bool(e.Evidence != nil)
	if ev := e.Evidence; ev != nil {
		w.str(ev.Error)
		w.optInt(ev.ExitCode)
		w.str(ev.OutputTail)
		w.str(ev.Fix)
	}
	w.str(e.Owner)
	w.bool(e.SetupRan)
	w.str(e.SetupSkipped)
	w.str(e.SetupOutput)
	w.str(e.Reason)
	w.raw(e.RemoteRuntime.encode()) // remote.go
	w.optStr(ss.CheckCommand)
	w.str(ss.Isolation)
	w.str(ss.Branch)
	w.str(ss.Status)
	w.optTime(ss.ClosedAt)
	w.time(ss.CreatedAt)
	w.time(ss.UpdatedAt)
	w.uint(ss.Version)
}

func (w *cpWriter) task(t *Task) {
	w.str(t.ID)
	w.str(t.Command)
	w.bool(t.Interactive)
	w.uint(t.Generation)
	w.str(t.Status)
	w.optInt(t.ExitCode)
	w.str(t.OutputTail)
	w.str(t.Error)
	w.time(t.StartedAt)
	w.optTime(t.EndedAt)
	w.int(t.DurationMS)
}

func (w *cpWriter) attachment(a *Attachment) {
	w.str(a.ReferenceID)
	w.str(a.SessionID)
	w.str(a.Scope)
	w.str(a.Name)
	w.str(a.MediaType)
	w.int(a.Size)
	w.str(a.SHA256)
	w.bool(a.TextExtracted)
	w.bool(a.Consumed)
	w.str(a.ConsumedTurnID)
	w.strs(a.UsedBy)
	w.bool(a.Deleted)
	w.optTime(a.DeletedAt)
	w.time(a.CreatedAt)
	w.time(a.UpdatedAt)
}

func (w *cpWriter) stepCalls(v []events.StepCall) {
	n(w, v)
	for _, c := range v {
		w.str(c.CallID)
		w.int(int64(c.Occurrence))
		w.str(c.Name)
		w.json(c.Arguments)
	}
}

func (w *cpWriter) turn(t *Turn) {
	w.str(t.TurnID)
	w.str(t.SessionID)
	w.str(t.AgentID)
	w.str(t.IdempotencyKey)
	w.str(t.Source)
	w.text(t.Input)
	w.optText(t.DisplayInput)
	n(w, t.ContextReferences)
	for _, c := range t.ContextReferences {
		w.json(c)
	}
	w.strs(t.ReferenceIDs)
	w.optStr(t.ModelOverride)
	w.optStr(t.TargetAgent)
	w.str(t.Model)
	w.str(t.Status)
	w.text(t.Output)
	w.str(t.Error)
	w.bool(t.Interrupted)
	w.str(t.Budget)
	n(w, t.Steps)
	for i := range t.Steps {
		st := &t.Steps[i]
		w.int(int64(st.Step))
		w.str(st.Agent)
		w.text(st.Text)
		w.text(st.Reasoning)
		w.stepCalls(st.ToolCalls)
		w.bool(st.Partial)
	}
	n(w, t.ToolCalls)
	for i := range t.ToolCalls {
		c := &t.ToolCalls[i]
		w.str(c.Agent)
		w.str(c.CallID)
		w.int(int64(c.Occurrence))
		w.str(c.Name)
		w.json(c.Arguments)
		w.bool(c.Finished)
		w.text(c.Result)
		w.bool(c.IsError)
		w.int(c.DurationMS)
	}
	u := &t.Usage
	w.int(int64(u.InputTokens))
	w.int(int64(u.OutputTokens))
	w.int(int64(u.ReasoningTokens))
	w.bool(u.TokenUsageKnown)
	w.uint(math.Float64bits(u.CostUSD))
	w.bool(u.CostKnown)
	w.strs(t.ChangedPaths)
	w.bool(t.ChangesKnown)
	w.bool(t.ChangesTruncated)
	w.str(t.ChangesBefore)
	w.str(t.ChangesAfter)
	w.str(t.ChangesRef)
	w.lattice(t.Lattice)
	w.str(t.AgentName)
	w.str(t.AgentVersion)
	w.plan(t.Plan)
	w.bool(t.Rewound)
	w.bool(t.Refused)
	w.str(t.StopReason)
	w.uint(t.Seq)
	w.time(t.AcceptedAt)
	w.optTime(t.StartedAt)
	w.optTime(t.EndedAt)
}

// lattice stores a lattice turn's plan as its JSON ("" for none): it is
// small, and rare beside the turns' content.
func (w *cpWriter) lattice(l *Lattice) {
	if l == nil {
		w.str("")
		return
	}
	b, _ := json.Marshal(l) // strings, ints and Text: always encodes
	w.str(string(b))
}

func (r *cpReader) lattice() *Lattice {
	s := r.str()
	if s == "" {
		return nil
	}
	var l Lattice
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		r.fail()
		return nil
	}
	return &l
}

// plan stores an outside agent's plan: a count (nil apart from empty),
// then each entry's three strings.
func (w *cpWriter) plan(p []events.PlanEntry) {
	n(w, p)
	for _, e := range p {
		w.str(e.Content)
		w.str(e.Status)
		w.str(e.Priority)
	}
}

func (r *cpReader) plan() []events.PlanEntry {
	l := r.len()
	if l < 0 {
		return nil
	}
	p := make([]events.PlanEntry, l)
	for i := range p {
		p[i] = events.PlanEntry{Content: r.str(), Status: r.str(), Priority: r.str()}
	}
	return p
}

// cpReader reads the checkpoint encoding from one string. Its first fault
// sticks in err; every read after it returns zero values, so a damaged
// file never panics and never loops long (counts are bounded by the bytes
// left).
type cpReader struct {
	s   string
	i   int
	err error
}

func (r *cpReader) fail() { r.err, r.i = errCheckpoint, len(r.s) }

func (r *cpReader) uint() uint64 {
	if r.i < len(r.s) && r.s[r.i] < 0x80 { // most values fit in one byte
		r.i++
		return uint64(r.s[r.i-1])
	}
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if r.i >= len(r.s) {
			r.fail()
			return 0
		}
		c := r.s[r.i]
		r.i++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	r.fail()
	return 0
}

func (r *cpReader) int() int64 {
	u := r.uint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// count reads a number of records to come: each takes at least a byte.
func (r *cpReader) count() int {
	v := r.uint()
	if v > uint64(len(r.s)-r.i) {
		r.fail()
		return 0
	}
	return int(v)
}

// len reads a slice length: -1 for nil.
func (r *cpReader) len() int {
	v := r.uint()
	if v == 0 {
		return -1
	}
	if v-1 > uint64(len(r.s)-r.i) {
		r.fail()
		return -1
	}
	return int(v - 1)
}

func (r *cpReader) str() string {
	l := r.uint()
	if l > uint64(len(r.s)-r.i) {
		r.fail()
		return ""
	}
	v := r.s[r.i : r.i+int(l)]
	r.i += int(l)
	return v
}

func (r *cpReader) bool() bool {
	if r.i >= len(r.s) || r.s[r.i] > 1 {
		r.fail()
		return false
	}
	r.i++
	return r.s[r.i-1] == 1
}

func (r *cpReader) time() time.Time {
	sec, nsec := r.int(), r.uint()
	if nsec >= 1e9 {
		r.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (r *cpReader) strs() []string {
	l := r.len()
	if l < 0 {
		return nil
	}
	v := make([]string, l)
	for i := range v {
		v[i] = r.str()
	}
	return v
}

// raw copies: a json.RawMessage is a []byte its holders may write.
func (r *cpReader) raw() json.RawMessage {
	l := r.len()
	if l < 0 {
		return nil
	}
	if l > len(r.s)-r.i {
		r.fail()
		return nil
	}
	v := json.RawMessage(r.s[r.i : r.i+l])
	r.i += l
	return v
}

// opt reads a present flag and, when set, a value.
func opt[T any](r *cpReader, read func() T) *T {
	if !r.bool() {
		return nil
	}
	v := read()
	return &v
}

func (r *cpReader) optStr() *string     { return opt(r, r.str) }
func (r *cpReader) optTime() *time.Time { return opt(r, r.time) }
func (r *cpReader) optInt() *int        { return opt(r, func() int { return int(r.int()) }) }

func (r *cpReader) blob() *events.Blob {
	return opt(r, func() events.Blob { return events.Blob{SHA256: r.str(), Size: r.int(), Preview: r.str()} })
}

func (r *cpReader) text() events.Text     { return events.Text{Inline: r.str(), Blob: r.blob()} }
func (r *cpReader) json() events.JSON     { return events.JSON{Inline: r.raw(), Blob: r.blob()} }
func (r *cpReader) optText() *events.Text { return opt(r, r.text) }

func (r *cpReader) session(ss *Session) {
	ss.ID, ss.WorkspaceID, ss.Name, ss.WorkingDir = r.str(), r.str(), r.str(), r.str()
	ss.Mode = events.Mode{Kind: r.str(), AgentID: r.str(), Workers: r.strs()}
	ss.EnabledSkills = r.strs()
	if l := r.len(); l >= 0 {
		ss.ExposedPorts = make([]int, l)
		for i := range ss.ExposedPorts {
			ss.ExposedPorts[i] = int(r.int())
		}
	}
	e := &ss.Environment
	e.State, e.Generation, e.Image, e.SetupCommand, e.SetupSource = r.str(), r.uint(), r.str(), r.str(), r.str()
	e.SetupApproved, e.SetupReviewed = r.bool(), r.bool()
	if r.bool() {
		e.Evidence = &events.Evidence{Error: r.str(), ExitCode: r.optInt(), OutputTail: r.str(), Fix: r.str()}
	}
	e.Owner, e.SetupRan, e.SetupSkipped, e.SetupOutput, e.Reason = r.str(), r.bool(), r.str(), r.str(), r.str()
	if err := e.RemoteRuntime.decode(r.raw()); err != nil {
		r.fail()
	}
	ss.CheckCommand = r.optStr()
	ss.Isolation, ss.Branch = r.str(), r.str()
	ss.Status = r.str()
	ss.ClosedAt = r.optTime()
	ss.CreatedAt, ss.UpdatedAt, ss.Version = r.time(), r.time(), r.uint()
}

func (r *cpReader) task(t *Task) {
	t.ID, t.Command, t.Interactive, t.Generation, t.Status = r.str(), r.str(), r.bool(), r.uint(), r.str()
	t.ExitCode, t.OutputTail, t.Error = r.optInt(), r.str(), r.str()
	t.StartedAt, t.EndedAt, t.DurationMS = r.time(), r.optTime(), r.int()
}

func (r *cpReader) attachment(a *Attachment) {
	a.ReferenceID, a.SessionID, a.Scope, a.Name, a.MediaType = r.str(), r.str(), r.str(), r.str(), r.str()
	a.Size, a.SHA256, a.TextExtracted, a.Consumed, a.ConsumedTurnID = r.int(), r.str(), r.bool(), r.bool(), r.str()
	a.UsedBy, a.Deleted, a.DeletedAt = r.strs(), r.bool(), r.optTime()
	a.CreatedAt, a.UpdatedAt = r.time(), r.time()
}

func (r *cpReader) stepCalls() []events.StepCall {
	l := r.len()
	if l < 0 {
		return nil
	}
	v := make([]events.StepCall, l)
	for i := range v {
		v[i] = events.StepCall{CallID: r.str(), Occurrence: int(r.int()), Name: r.str(), Arguments: r.json()}
	}
	return v
}

func (r *cpReader) turn(t *Turn) {
	t.TurnID, t.SessionID, t.AgentID, t.IdempotencyKey, t.Source, t.Input = r.str(), r.str(), r.str(), r.str(), r.str(), r.text()
	t.DisplayInput = r.optText()
	if l := r.len(); l >= 0 {
		t.ContextReferences = make([]events.JSON, l)
		for i := range t.ContextReferences {
			t.ContextReferences[i] = r.json()
		}
	}
	t.ReferenceIDs, t.ModelOverride, t.TargetAgent = r.strs(), r.optStr(), r.optStr()
	t.Model, t.Status, t.Output, t.Error, t.Interrupted, t.Budget = r.str(), r.str(), r.text(), r.str(), r.bool(), r.str()
	if l := r.len(); l >= 0 {
		t.Steps = make([]Step, l)
		for i := range t.Steps {
			t.Steps[i] = Step{Step: int(r.int()), Agent: r.str(), Text: r.text(), Reasoning: r.text(), ToolCalls: r.stepCalls(), Partial: r.bool()}
		}
	}
	if l := r.len(); l >= 0 {
		t.ToolCalls = make([]ToolCall, l)
		for i := range t.ToolCalls {
			t.ToolCalls[i] = ToolCall{Agent: r.str(), CallID: r.str(), Occurrence: int(r.int()), Name: r.str(), Arguments: r.json(),
				Finished: r.bool(), Result: r.text(), IsError: r.bool(), DurationMS: r.int()}
		}
	}
	u := &t.Usage
	u.View = usage.Tokens{InputTokens: int(r.int()), OutputTokens: int(r.int()), ReasoningTokens: int(r.int()), TokenUsageKnown: r.bool()}.View()
	u.CostUSD, u.CostKnown = math.Float64frombits(r.uint()), r.bool()
	t.ChangedPaths, t.ChangesKnown, t.ChangesTruncated = r.strs(), r.bool(), r.bool()
	t.ChangesBefore, t.ChangesAfter, t.ChangesRef, t.Lattice = r.str(), r.str(), r.str(), r.lattice()
	t.AgentName, t.AgentVersion, t.Plan = r.str(), r.str(), r.plan()
	t.Rewound, t.Refused, t.StopReason = r.bool(), r.bool(), r.str()
	t.Seq, t.AcceptedAt, t.StartedAt, t.EndedAt = r.uint(), r.time(), r.optTime(), r.optTime()
}
