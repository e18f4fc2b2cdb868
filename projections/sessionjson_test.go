package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"lathe/journal"
)

// fillAll sets every exported field reachable from v to a distinct
// non-zero value (pointers allocated, slices and maps of two and one
// entries), so that a test over the result covers a field added later
// without naming it. Strings hold what JSON must escape.
func fillAll(v reflect.Value, n *int) {
	*n++
	t := v.Type()
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("<%d \"é\" \u2028 \x01 &>", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	case reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		fillAll(v.Elem(), n)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // raw JSON
			v.SetBytes([]byte(fmt.Sprintf(`{"k":%d}`, *n)))
			return
		}
		v.Set(reflect.MakeSlice(t, 2, 2))
		for i := range 2 {
			fillAll(v.Index(i), n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
		fillAll(k, n)
		fillAll(e, n)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if t == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, *n*1000, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				fillAll(v.Field(i), n)
			}
		}
	}
}

// filled returns a T with every field set (fillAll).
func filled[T any]() T {
	var v T
	n := 0
	fillAll(reflect.ValueOf(&v).Elem(), &n)
	return v
}

// A Session's JSON, cached or not, is encoding/json's for every field
// (the record is filled by reflection, so a field added later is covered).
func TestSessionJSONMatches(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 5000, time.FixedZone("x", -5*3600))
	for _, ss := range []Session{{}, filled[Session](), {ID: "S2", EnabledSkills: []string{}, ExposedPorts: []int{}, CreatedAt: at}} {
		want, err := json.Marshal(ss)
		if err != nil {
			t.Fatal(err)
		}
		if got := ss.JSON(); got != string(want) {
			t.Errorf("JSON:\n got %s\nwant %s", got, want)
		}
		ss.json = &jsonCache{}
		for range 2 { // encoded, then cached
			if got := ss.JSON(); got != string(want) {
				t.Errorf("JSON, cached:\n got %s\nwant %s", got, want)
			}
		}
	}
}

// The hand-encoded records (the Sessions and their parts) go through the
// checkpoint codec whole: every field, filled by reflection, so that a
// field added to one of them and not to its encoding fails here.
func TestCheckpointCodecKeepsEveryField(t *testing.T) {
	roundTrip(t, filled[Session](), (*cpWriter).session, (*cpReader).session)
	roundTrip(t, filled[Task](), (*cpWriter).task, (*cpReader).task)
	roundTrip(t, filled[Attachment](), (*cpWriter).attachment, (*cpReader).attachment)
	turn := filled[Turn]()
	for i := range turn.Lattice.Subtasks { // the plan goes as JSON, where content is inline or a reference
		turn.Lattice.Subtasks[i].Output.Blob = nil
	}
	turn.Usage.View = turn.Usage.Tokens.View() // total_tokens is derived, not stored
	roundTrip(t, turn, (*cpWriter).turn, (*cpReader).turn)
}

func roundTrip[T any](t *testing.T, in T, put func(*cpWriter, *T), get func(*cpReader, *T)) {
	t.Helper()
	var w cpWriter
	put(&w, &in)
	r := cpReader{s: string(w.b)}
	var out T
	get(&r, &out)
	if r.err != nil || r.i != len(r.s) || !reflect.DeepEqual(in, out) {
		t.Errorf("%T through the checkpoint codec:\n got %#v\nwant %#v (%v)", in, out, in, r.err)
	}
}

// No change leaves a stale JSON in the cache: the list is read after every
// event of a history that sets every Session field, each read filling the
// cache the next event must drop.
func TestSessionJSONCacheFollowsEveryEvent(t *testing.T) {
	j, _ := richHistory(t)
	s := New()
	err := j.Scan(context.Background(), 0, 0, func(seq uint64, raw []byte) error {
		rec := journal.Record{Envelope: journal.Envelope{Seq: seq}, Raw: bytes.Clone(raw)}
		if err := decodeRecord(&rec); err != nil {
			return err
		}
		if err := s.Apply([]journal.Record{rec}); err != nil {
			return err
		}
		want, _ := json.Marshal(s.Sessions(""))
		if got := s.SessionsJSON(""); string(got) != string(want) {
			t.Fatalf("after seq %d (%s):\n got %s\nwant %s", seq, rec.Type, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The Session list in pages (SessionPage) joins up to the whole list,
// whatever the page size, and a page after an ID that is gone (a Session
// deleted between two pages) starts at the next one.
func TestSessionPages(t *testing.T) {
	s := New()
	m := s.SessionModel
	for _, id := range []string{"S1", "S2", "S3", "S4", "S5"} {
		ss := &Session{ID: id, WorkspaceID: "W", Name: "n " + id, EnabledSkills: []string{}, ExposedPorts: []int{}, json: &jsonCache{}}
		m.sessions[id] = ss
		m.insertOrdered(ss)
	}
	all := string(m.SessionsJSON(""))
	ids := func(l SessionList) []string {
		var b bytes.Buffer
		_, _ = l.WriteTo(&b)
		var got []Session
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, b.Bytes())
		}
		if l.Len() != b.Len() {
			t.Errorf("Len %d, wrote %d", l.Len(), b.Len())
		}
		out := []string{}
		for _, ss := range got {
			out = append(out, ss.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		after string
		limit int
		want  []string
	}{
		{"first page", "", 2, []string{"S1", "S2"}},
		{"after an ID", "S2", 2, []string{"S3", "S4"}},
		{"the last page is short", "S4", 2, []string{"S5"}},
		{"after the last", "S5", 2, []string{}},
		{"after a gone ID", "S25", 2, []string{"S3", "S4"}},
		{"before the first", "S0", 1, []string{"S1"}},
		{"no limit is an empty page", "", 0, []string{}},
		{"a limit over the count", "", 99, []string{"S1", "S2", "S3", "S4", "S5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(m.SessionPage(tc.after, tc.limit)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("SessionPage(%q, %d) = %v, want %v", tc.after, tc.limit, got, tc.want)
			}
		})
	}
	var b bytes.Buffer
	_, _ = m.SessionPage("", 5).WriteTo(&b)
	if b.String() != all {
		t.Errorf("a page of all:\n got %s\nwant %s", b.String(), all)
	}
}
