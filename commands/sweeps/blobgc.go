package sweeps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
)

// Blob garbage collection. The blob store keeps the bytes of Session
// attachments and shared files, and the large content of events. A blob no
// live record references — the bytes of a deleted shared file, of a
// Session attachment deleted before any turn used it, of an upload refused
// after it was stored — is collected in the background. Offloaded event
// content is referenced by the journal itself and is never collected.
//
// Safety against concurrent writers: an upload holds blobWrites shared from
// its commit to the append of the record that names the bytes, and so does
// an append that offloads content; a collection decides and removes
// holding it exclusively, after reading the journal through its last
// record. So every blob a record will name is either already named or
// committed after the removals (a commit that found its blob stored made
// it young again: blobs.Store.Remove never removes a blob committed after
// the collection's cutoff). Only blobs older than the grace are candidates.

// blobRefs is what the journal says about blobs, read incrementally: the
// journal is scanned once, then only its tail at each collection.
type blobRefs struct {
	mu  sync.Mutex
	seq uint64 // scanned through
	// content: hashes of offloaded event content and of rescued clones
	// (kept forever).
	content map[string]bool
	// attachments: hash → the Session relations that stored it.
	attachments map[string][]sessionRef
	// files: hash → the shared files that stored it.
	files map[string][]string
}

type sessionRef struct{ session, ref string }

func newBlobRefs() *blobRefs {
	return &blobRefs{content: map[string]bool{}, attachments: map[string][]sessionRef{}, files: map[string][]string{}}
}

// scanChunk bounds the events one read transaction of the scan covers.
const scanChunk = 4096

// catchUp scans the journal through seq last.
func (r *blobRefs) catchUp(ctx context.Context, j *journal.Journal, last uint64) error {
	for r.seq < last {
		err := j.Scan(ctx, r.seq, scanChunk, func(seq uint64, raw []byte) error {
			if seq > last {
				return errScanDone
			}
			r.seq = seq
			return r.note(raw)
		})
		if err == errScanDone {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var errScanDone = fmt.Errorf("scan done")

var blobKey = []byte(`"$blob"`)

// refTypes are the event types that name blobs outside content fields.
var refTypes = [][]byte{[]byte(`"session-attachment-added"`), []byte(`"shared-file-stored"`), []byte(`"session-work-rescued"`)}

// note records the blob references of one stored envelope. Most events
// name none: they are passed over without being decoded.
func (r *blobRefs) note(raw []byte) error {
	if !bytes.Contains(raw, blobKey) && !slices.ContainsFunc(refTypes, func(t []byte) bool { return bytes.Contains(raw, t) }) {
		return nil
	}
	env, err := journal.DecodeEnvelope(raw)
	if err != nil {
		return err
	}
	switch env.Type {
	case events.AttachmentAdded{}.EventType():
		var e events.AttachmentAdded
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return err
		}
		r.attachments[e.SHA256] = append(r.attachments[e.SHA256], sessionRef{env.AggregateID, e.ReferenceID})
	case events.SharedFileStored{}.EventType():
		var e events.SharedFileStored
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return err
		}
		r.files[e.SHA256] = append(r.files[e.SHA256], env.AggregateID)
	case events.WorkRescued{}.EventType():
		var e events.WorkRescued
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return err
		}
		r.content[e.SHA256] = true // the only copy of a clone's work: kept
	}
	if bytes.Contains(env.Data, blobKey) {
		var v any
		if err := json.Unmarshal(env.Data, &v); err != nil {
			return err
		}
		walkBlobs(v, func(hash string) { r.content[hash] = true })
	}
	return nil
}

// walkBlobs calls fn with the hash of every {"$blob": {sha256}} in v.
func walkBlobs(v any, fn func(string)) {
	switch v := v.(type) {
	case map[string]any:
		if b, ok := v["$blob"].(map[string]any); ok && len(v) == 1 {
			if h, ok := b["sha256"].(string); ok {
				fn(h)
			}
			return
		}
		for _, x := range v {
			walkBlobs(x, fn)
		}
	case []any:
		for _, x := range v {
			walkBlobs(x, fn)
		}
	}
}

// live reports whether a live record references hash.
func (s *BlobCollector) blobLive(r *blobRefs, hash string) bool {
	if r.content[hash] {
		return true
	}
	for _, a := range r.attachments[hash] {
		if att, ok := s.Store.Attachment(a.session, a.ref); ok && (!att.Deleted || att.Pinned()) {
			return true
		}
	}
	for _, id := range r.files[hash] {
		if _, ok := s.Store.SharedFile(id); ok {
			return true
		}
	}
	return false
}

// BlobCollector removes the blobs no live record references (above).
type BlobCollector struct {
	*core.Core
	refs *blobRefs
}

// Collect removes the blobs older than grace that no live record
// references, and answers how many it removed.
func (s *BlobCollector) Collect(ctx context.Context, grace time.Duration) (int, error) {
	if s.Opts.Blobs == nil {
		return 0, nil
	}
	cutoff := time.Now().Add(-grace)
	var old []string
	err := s.Opts.Blobs.List(func(hash string, modified time.Time) error {
		if modified.Before(cutoff) {
			old = append(old, hash)
		}
		return ctx.Err()
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	r := s.refs
	r.mu.Lock()
	defer r.mu.Unlock()
	// The bulk of the journal is read first; then, with no upload between
	// its commit and its record, the tail.
	if err := r.catchUp(ctx, s.Journal, s.Journal.Last()); err != nil {
		return 0, fmt.Errorf("blob collection: scan the journal: %w", err)
	}
	if !s.lockBlobWrites(ctx) {
		return 0, nil // writers kept it busy: the next round collects
	}
	defer s.BlobWrites.Unlock()
	last := s.Journal.Last()
	if err := r.catchUp(ctx, s.Journal, last); err != nil {
		return 0, fmt.Errorf("blob collection: scan the journal: %w", err)
	}
	if err := s.Store.Await(ctx, last); err != nil {
		return 0, err
	}
	removed := 0
	for _, hash := range old {
		if s.blobLive(r, hash) {
			continue
		}
		ok, err := s.Opts.Blobs.Remove(hash, cutoff)
		if err != nil {
			return removed, err
		}
		if ok {
			removed++
		}
	}
	return removed, nil
}

// lockBlobWrites takes blobWrites exclusively without ever queueing behind
// the writers (a waiting Lock would hold up every new upload and offloading
// append): it tries, a few times over half a second, while none holds it.
func (s *BlobCollector) lockBlobWrites(ctx context.Context) bool {
	for range 10 {
		if s.BlobWrites.TryLock() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// Stored reports whether the blob store holds hash (for tests and
// diagnostics).
func (s *BlobCollector) Stored(hash string) bool {
	return s.Opts.Blobs != nil && s.Opts.Blobs.Has(hash)
}

// NewBlobCollector returns the blob collection of c's journal.
func NewBlobCollector(c *core.Core) *BlobCollector {
	return &BlobCollector{Core: c, refs: newBlobRefs()}
}
