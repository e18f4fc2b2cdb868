package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
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
// version is the daemon's, shown by `nats micro info` (as semver; the
// exact string in the metadata). An error is answered both ways: the
// Nats-Service-Error headers and a {"error": …} body.
func (b *Bus) ServeJournal(j JournalScanner, version string) error {
	svc, err := micro.AddService(b.nc, micro.Config{
		Name:        "lathe-journal",
		Version:     semver(version),
		Description: "replays Lathe's journal from a seq in bounded chunks",
		Metadata:    map[string]string{"lathe_version": version},
	})
	if err != nil {
		return fmt.Errorf("bus: journal service: %w", err)
	}
	handler := micro.HandlerFunc(func(req micro.Request) {
		reply, code, err := readChunk(j, req.Data())
		if err != nil {
			body, _ := json.Marshal(map[string]string{"error": err.Error()})
			_ = req.Error(code, err.Error(), body)
			return
		}
		_ = req.RespondJSON(reply)
	})
	if err := svc.AddEndpoint("read", handler, micro.WithEndpointSubject(SubjectJournalRead), micro.WithEndpointMetadata(readSchemas)); err != nil {
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
		return ReadReply{}, "400", fmt.Errorf("limit must be from 1 to %d (0 or absent: %d)", ReadMaxLimit, ReadMaxLimit)
	}
	reply := ReadReply{Events: []json.RawMessage{}, Next: q.After}
	size := 0
	collect := func(seq uint64, raw []byte) error {
		if len(reply.Events) == q.Limit || size+len(raw) > readMaxBytes && len(reply.Events) > 0 {
			reply.More = true
			return errFull
		}
		reply.Events = append(reply.Events, append(json.RawMessage(nil), raw...))
		reply.Next, size = seq, size+len(raw)
		return nil
	}
	var err error
	if q.Aggregate != "" {
		err = j.ScanAggregateSealed(context.Background(), q.Aggregate, q.After, q.Limit+1, collect)
	} else {
		err = j.ScanSealed(context.Background(), q.After, q.Limit+1, collect) // one more: is there a next page?
	}
	if err != nil && !errors.Is(err, errFull) {
		return ReadReply{}, "500", err
	}
	return reply, "", nil
}

// readSchemas are the read endpoint's request and reply JSON Schemas, as
// endpoint metadata (`nats micro info lathe-journal`).
var readSchemas = map[string]string{
	"request_schema": `{"type":"object","additionalProperties":false,"properties":{` +
		`"after":{"type":"integer","minimum":0,"description":"the seq to read after; 0 from the start"},` +
		`"limit":{"type":"integer","minimum":0,"maximum":1000,"description":"at most this many events; 0 or absent: 1000"},` +
		`"aggregate":{"type":"string","description":"an aggregate ID (a Session, Workspace, … ID): only its events"}}}`,
	"response_schema": `{"type":"object","required":["events","next_after","more"],"properties":{` +
		`"events":{"type":"array","items":{"type":"object","description":"an envelope as published, with its hash"}},` +
		`"next_after":{"type":"integer","description":"the seq to ask after next"},` +
		`"more":{"type":"boolean","description":"whether events follow"}}}`,
	"error": `{"error": "…"} with the Nats-Service-Error-Code header 400 or 500`,
}

// semver is version as the semantic version micro requires: itself when
// it is a plain release ("v" dropped), else 0.0.0 with it as build
// metadata (git describe's "v1.2-3-gabc-dirty" → 0.0.0+v1-2-3-gabc-dirty).
func semver(version string) string {
	v := strings.TrimPrefix(version, "v")
	if semverPattern.MatchString(v) {
		return v
	}
	meta := strings.Trim(nonMeta.ReplaceAllString(version, "-"), "-")
	if meta == "" {
		return "0.0.0"
	}
	return "0.0.0+" + meta
}

var (
	semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`)
	nonMeta       = regexp.MustCompile(`[^0-9A-Za-z-]+`)
)

var _ JournalScanner = (*journal.Journal)(nil)
