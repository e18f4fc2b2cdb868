package main

import (
	"context"
	"encoding/binary"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A journal whose bytes changed after they were appended is refused: before
// the daemon serves when the change is in the tail it replays, and within
// moments of serving (the background check of the whole chain) when it is
// older than the checkpoint. Both name the seq and the command that exports
// the intact part; `lathe journal verify` names the same seq.
func TestTamperedJournalStopsTheDaemon(t *testing.T) {
	for _, tc := range []struct {
		name       string
		checkpoint bool // keep the checkpoint: the change is older than it
	}{
		{"in the replayed tail", false},
		{"before the checkpoint", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			d := startDaemon(t, data)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for range 3 {
				if status, body, err := post(ctx, http.DefaultClient, d.url+"/api/workspaces", `{"path":"`+t.TempDir()+`"}`); err != nil || status != 201 {
					t.Fatalf("register workspace: %d %s %v", status, body, err)
				}
			}
			d.stop(t)
			if !tc.checkpoint {
				if err := os.Remove(filepath.Join(data, "projections.checkpoint")); err != nil {
					t.Fatal(err)
				}
			}
			// Rename the second Workspace in its stored bytes.
			db, err := bolt.Open(filepath.Join(data, "journal.db"), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("events"))
				k := binary.BigEndian.AppendUint64(nil, 2)
				v := append([]byte(nil), b.Get(k)...)
				i := strings.Index(string(v), `"name":"`) + len(`"name":"`)
				v[i] = 'X' + (v[i]+1)%2 // another letter, still valid JSON
				return b.Put(k, v)
			})
			if cerr := db.Close(); err != nil || cerr != nil {
				t.Fatal(err, cerr)
			}

			l := startLathe(t, "serve", "--data", data, "--listen", "127.0.0.1:0")
			code, ok := l.wait(10 * time.Second)
			if !ok || code == 0 {
				t.Fatalf("the daemon did not stop on a broken chain (exited %v, code %d):\n%s", ok, code, l.stderr.String())
			}
			stderr := l.stderr.String()
			if !strings.Contains(stderr, "the hash chain breaks at seq 2") || !strings.Contains(stderr, "lathe journal dump --before 2") {
				t.Errorf("the refusal does not name the seq and the export:\n%s", stderr)
			}
			// Issue 22, defect 3.4: the stop after serving says so, and its
			// log line names both commands, as the final message does.
			if tc.checkpoint {
				for line := range strings.Lines(stderr) {
					if strings.Contains(line, "level=ERROR") && (!strings.Contains(line, "lathe journal verify") ||
						!strings.Contains(line, "lathe journal dump --before 2") || !strings.Contains(line, "of serving from the checkpoint")) {
						t.Errorf("the stop's log line does not name verify, dump --before and the serving window:\n%s", line)
					}
				}
				if !strings.Contains(stderr, "of serving from the checkpoint") || !strings.Contains(stderr, "run `lathe journal verify`") {
					t.Errorf("the stop's message does not say the daemon served, nor name verify:\n%s", stderr)
				}
			}
			if listened := listeningLine.MatchString(stderr); listened == tc.checkpoint != true {
				t.Errorf("listening line printed: %v (checkpoint kept: %v)", listened, tc.checkpoint)
			}
			code, _, verr := runLathe(t, "journal", "verify", "--data", data)
			if code == 0 || !strings.Contains(verr, "breaks at seq 2") {
				t.Errorf("journal verify: code %d\n%s", code, verr)
			}
		})
	}
}
