package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"lathe/journal"
)

// SubjectJournalRead is the catch-up service's subject: an integration feed
// that speaks only NATS replays the journal from a seq with requests here
// rather than over HTTP.
const SubjectJournalRead = "lathe.journal.read"

// ReadRequest asks for the envelopes after seq After: at most Limit (1 to
// ReadMaxLimit; 0 means ReadMaxLimit), of one aggregate when Aggregate is
// set.
type ReadRequest struct {
	After     uint64 `json:"after"`
	Limit     int    `json:"limit"`
	Aggregate string `json:"aggregate,omitempty"`
}

// ReadReply is one bounded chunk: the envelopes as published (with their
// hashes), the seq to ask after next, and whether more may follow.
type ReadReply struct {
	Events []json.RawMessage `json:"events"`
	Next   uint64            `json:"next_after"`
	More   bool              `json:"more"`
}

// Bounds of one reply: a count, and bytes well under the server's payload
// limit (one event is at most journal.MaxEventData and its envelope).
const (
	ReadMaxLimit = 1000
	readMaxBytes = 1 << 20
)

// JournalScanner is what the catch-up service reads.
type JournalScanner interface {
	ScanSealed(ctx context.Context, after uint64, limit int, fn func(seq uint64, raw []byte) error) error
	ScanAggregateSealed(ctx context.Context, aggregateID string, after uint64, limit int, fn func(seq uint64, raw []byte) error) error
}

// errFull ends a scan whose reply is full.
var errFull = errors.New("reply full")

// ServeJournal adds the catch-up service (the nats.go micro package: it is
// discoverable with `nats micro ls` and reports its stats) on
// SubjectJournalRead. It stops with the bus.
func (b *Bus) ServeJournal(j JournalScanner) error {
	svc, err := micro.AddService(b.nc, micro.Config{
		Name:        "lathe-journal",
		Version:     "1.0.0",
		Description: "replays Lathe's journal from a seq in bounded chunks",
	})
	if err != nil {
		return fmt.Errorf("bus: journal service: %w", err)
	}
	handler := micro.HandlerFunc(func(req micro.Request) {
		reply, code, err := readChunk(j, req.Data())
		if err != nil {
			_ = req.Error(code, err.Error(), nil)
			return
		}
		_ = req.RespondJSON(reply)
	})
	if err := svc.AddEndpoint("read", handler, micro.WithEndpointSubject(SubjectJournalRead)); err != nil {
		return fmt.Errorf("bus: journal service: %w", err)
	}
	return nil
}

// readChunk answers one request, or an error with its status code.
func readChunk(j JournalScanner, data []byte) (ReadReply, string, error) {
	var q ReadRequest
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if len(data) > 0 {
		if err := dec.Decode(&q); err != nil {
			return ReadReply{}, "400", fmt.Errorf("the request must be JSON {after, limit, aggregate?}: %v", err)
		}
	}
	if q.Limit == 0 {
		q.Limit = ReadMaxLimit
	}
	if q.Limit < 0 || q.Limit > ReadMaxLimit {
		return ReadReply{}, "400", fmt.Errorf("limit must be from 1 to %d", ReadMaxLimit)
	}
	reply := ReadReply{Events: []json.RawMessage{}, Next: q.After}
	size := 0
	collect := func(seq uint64, raw []byte) error {
		if size+len(raw) > readMaxBytes && len(reply.Events) > 0 {
			reply.More = true
			return errFull
		}
		reply.Events = append(reply.Events, append(json.RawMessage(nil), raw...))
		reply.Next, size = seq, size+len(raw)
		return nil
	}
	var err error
	if q.Aggregate != "" {
		err = j.ScanAggregateSealed(context.Background(), q.Aggregate, q.After, q.Limit, collect)
	} else {
		err = j.ScanSealed(context.Background(), q.After, q.Limit, collect)
	}
	if err != nil && !errors.Is(err, errFull) {
		return ReadReply{}, "500", err
	}
	if len(reply.Events) == q.Limit {
		reply.More = true
	}
	return reply, "", nil
}

var _ JournalScanner = (*journal.Journal)(nil)
