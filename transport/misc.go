package transport

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"
)

// healthBody is GET /health: the daemon's status, its spawned Agents, its
// version and the journal seq its projections have applied.
type healthBody struct {
	Status  string `json:"status"`
	Agents  int    `json:"agents"`
	Version string `json:"version"`
	Seq     uint64 `json:"seq"`
}

// probeBody is a readiness or liveness probe's answer; Error says why
// readiness answers 503.
type probeBody struct {
	Status string `json:"status"`
	Agents *int   `json:"agents,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (s *healthRoutes) health(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, healthBody{Status: "ok", Agents: s.spawned(), Version: s.version, Seq: s.read.Seq()})
}

func (s *healthRoutes) healthReady(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	n := s.spawned()
	if n == 0 {
		writeJSON(w, http.StatusServiceUnavailable, probeBody{Status: "not_ready", Agents: &n, Error: "no agent is spawned"})
		return
	}
	writeJSON(w, http.StatusOK, probeBody{Status: "ready", Agents: &n})
}

func (s *healthRoutes) healthLive(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, probeBody{Status: "ok"})
}

func (s *projectRoutes) fsList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	hidden := false
	if v := q.Get("hidden"); v != "" {
		var err error
		if hidden, err = strconv.ParseBool(v); err != nil {
			writeError(w, http.StatusBadRequest, "hidden must be true or false")
			return
		}
	}
	listing, err := s.folders.ListDirs(q.Get("path"), hidden)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, listing)
}

func (s *projectRoutes) fsProject(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	path := r.URL.Query().Get("path")
	if path == "" {
		writeError(w, http.StatusBadRequest, "path is required")
		return
	}
	p, err := s.folders.Probe(path)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, projectBody{p, s.caps})
}

// projectBody is GET /api/fs/project: the probe and the runtime's
// capabilities.
type projectBody struct {
	Project
	Capabilities
}

func (s *eventRoutes) recentEvents(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.read.Recent())
}

// Journal feed limits.
const (
	feedDefaultLimit = 1000
	feedMaxLimit     = 100_000
	feedChunk        = 1000 // events read per journal transaction
)

// journalFeed streams committed envelopes after a seq as NDJSON, so an
// integration feed that was offline catches up; with aggregate it is one
// record's full audit trail. It reads the journal in bounded chunks so a
// slow client never holds a transaction open.
func (s *eventRoutes) journalFeed(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	after, err := parseUint(q.Get("after"), 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "after must be a non-negative integer seq")
		return
	}
	limit, err := parseUint(q.Get("limit"), feedDefaultLimit)
	if err != nil || limit == 0 || limit > feedMaxLimit {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d", feedMaxLimit))
		return
	}
	aggregate := q.Get("aggregate")
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	bw := bufio.NewWriterSize(w, 64<<10)
	flusher, _ := w.(http.Flusher)
	left := int(limit)
	for left > 0 {
		var chunk [][]byte
		var last uint64
		collect := func(seq uint64, raw []byte) error {
			chunk = append(chunk, append([]byte(nil), raw...))
			last = seq
			return nil
		}
		n := min(left, feedChunk)
		if aggregate != "" {
			err = s.journal.ScanAggregateSealed(r.Context(), aggregate, after, n, collect)
		} else {
			err = s.journal.ScanSealed(r.Context(), after, n, collect)
		}
		if err != nil {
			if !isClientGone(err) {
				s.log.Error("journal feed", "err", err)
			}
			return
		}
		for _, raw := range chunk {
			_, _ = bw.Write(raw)
			_ = bw.WriteByte('\n')
		}
		if err := bw.Flush(); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		if len(chunk) < n {
			return
		}
		after, left = last, left-len(chunk)
	}
}

// auditHead answers the journal's newest seq and hash: recorded elsewhere,
// it later proves that nothing up to it changed (lathe journal verify).
func (s *eventRoutes) auditHead(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	seq, hash := s.journal.HeadHash()
	writeJSON(w, http.StatusOK, auditHeadBody{Seq: seq, Hash: hash})
}

// auditHeadBody is GET /api/audit/head.
type auditHeadBody struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

func parseUint(v string, def uint64) (uint64, error) {
	if v == "" {
		return def, nil
	}
	return strconv.ParseUint(v, 10, 64)
}

// metricsRoutes serves GET /metrics: the metrics projection's Prometheus
// handler, behind the Guard as every operator route.
type metricsRoutes struct{ h http.Handler }

func (m *metricsRoutes) serve(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m.h.ServeHTTP(w, r)
}
