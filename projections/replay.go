package projections

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"lathe/journal"
	"lathe/journal/events"
)

// checkpointSchema changes whenever the shape of the read models changes, so
// a checkpoint written by another build is ignored and the journal replayed.
const checkpointSchema = 1

// checkpoint is the gob form of a Store at one seq.
type checkpoint struct {
	Schema     int
	Seq        uint64
	Workspaces []Workspace
	Sessions   []Session
	Recent     []Notice
}

// WriteCheckpoint saves the read models atomically (temp file, fsync,
// rename) so that a restart replays only the journal's tail.
func (s *Store) WriteCheckpoint(path string) (uint64, error) {
	s.mu.RLock()
	cp := checkpoint{Schema: checkpointSchema, Seq: s.seq}
	for _, w := range s.workspaces {
		cp.Workspaces = append(cp.Workspaces, *w)
	}
	for _, ss := range s.sessions {
		cp.Sessions = append(cp.Sessions, *ss)
	}
	cp.Recent = append(append(cp.Recent, s.recent[s.recentNext:]...), s.recent[:s.recentNext]...)
	s.mu.RUnlock()

	tmp, err := os.CreateTemp(filepath.Dir(path), ".checkpoint-*")
	if err != nil {
		return 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := gob.NewEncoder(bw).Encode(&cp); err != nil {
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
func (s *Store) restore(path string, last uint64) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projections: checkpoint: %w", err)
	}
	defer f.Close()
	var cp checkpoint
	if err := gob.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&cp); err != nil || cp.Schema != checkpointSchema || cp.Seq > last {
		return false, nil // stale, foreign or ahead of this journal: rebuild
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range cp.Workspaces {
		w := &cp.Workspaces[i]
		s.workspaces[w.ID] = w
		s.byPath[w.Path] = w.ID
		s.members[w.ID] = map[string]struct{}{}
	}
	for i := range cp.Sessions {
		ss := &cp.Sessions[i]
		ss.EnabledSkills, ss.ExposedPorts = nonNil(ss.EnabledSkills), nonNil(ss.ExposedPorts) // gob drops empty slices
		s.sessions[ss.ID] = ss
		if s.members[ss.WorkspaceID] == nil {
			return false, fmt.Errorf("projections: checkpoint: session %s names unknown workspace %s", ss.ID, ss.WorkspaceID)
		}
		s.members[ss.WorkspaceID][ss.ID] = struct{}{}
	}
	s.recent = cp.Recent
	s.seq = cp.Seq
	return true, nil
}

// Load builds a store from the checkpoint at checkpointPath (if usable) and
// the journal events after it. It reports how many events it replayed.
func Load(ctx context.Context, j *journal.Journal, checkpointPath string) (*Store, int, error) {
	s := New()
	if checkpointPath != "" {
		ok, err := s.restore(checkpointPath, j.Last())
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

// replayChunk is how many events one decode task handles.
const replayChunk = 2048

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
					env, err := journal.DecodeEnvelope(r.Raw)
					if err == nil {
						r.Envelope = env
						r.Payload, err = events.Decode(env.Type, env.Data)
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
		cur := &task{done: make(chan struct{})}
		flush := func() {
			todo <- cur
			ordered <- cur
			cur = &task{done: make(chan struct{})}
		}
		err := j.Scan(ctx, s.Seq(), 0, func(seq uint64, raw []byte) error {
			cur.recs = append(cur.recs, journal.Record{Envelope: journal.Envelope{Seq: seq}, Raw: append([]byte(nil), raw...)})
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
