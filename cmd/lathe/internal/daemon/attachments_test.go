package daemon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/doctext/doctexttest"
)

// filePart is one part of a multipart upload.
type filePart struct {
	field, filename, contentType string
	size                         int64  // generated content ('a'…) when body is ""
	body                         string // literal content
}

// upload POSTs parts as multipart/form-data, streamed through a pipe (no
// Content-Length), to path.
func upload(t testing.TB, srv *httptest.Server, path string, parts ...filePart) reply {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, p := range parts {
			h := textproto.MIMEHeader{}
			disp := fmt.Sprintf(`form-data; name=%q`, p.field)
			if p.filename != "" {
				disp += fmt.Sprintf(`; filename=%q`, p.filename)
			}
			h.Set("Content-Disposition", disp)
			if p.contentType != "" {
				h.Set("Content-Type", p.contentType)
			}
			w, err := mw.CreatePart(h)
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			var r io.Reader = strings.NewReader(p.body)
			if p.body == "" {
				r = io.LimitReader(repeatReader('a'), p.size)
			}
			if _, err := io.Copy(w, r); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	req, err := http.NewRequest(post, srv.URL+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return send(t, srv.Client(), req)
}

type repeatReader byte

func (b repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// blobFiles lists the stored blobs (not their .txt) under the data dir.
func blobFiles(t testing.TB, d *Daemon) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(d.dataDir, "blobs"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && !strings.HasSuffix(p, ".txt") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func attachmentSession(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+t.TempDir()+`"}`)["id"].(string)
	return mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"att",`+agentMode+`}`)["id"].(string)
}

func TestAttachmentUpload(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	sid := attachmentSession(t, srv)
	base := "/api/sessions/" + sid + "/attachments"
	doc := filePart{field: "file", filename: "notes.md", contentType: "text/markdown", body: "# Notes\nhello"}
	note := filePart{field: "note", body: "a field the upload does not use"}
	docWith := func(body string) filePart { // new bytes: each upload stores a new blob
		d := doc
		d.body = body
		return d
	}
	scopeIs := func(want string) func(t *testing.T, b []byte) {
		return func(t *testing.T, b []byte) {
			if got := str(t, b, "scope"); got != want {
				t.Errorf("scope %q, want %q", got, want)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		path   string
		parts  []filePart
		status int
		err    string
		check  func(t *testing.T, body []byte)
	}{
		{name: "text document", path: base + "?scope=this_turn", parts: []filePart{doc}, status: 201, check: func(t *testing.T, b []byte) {
			sum := sha256.Sum256([]byte(doc.body))
			for k, want := range map[string]any{"scope": "this_turn", "name": "notes.md", "media_type": "text/markdown",
				"size": float64(len(doc.body)), "sha256": hex.EncodeToString(sum[:]), "consumed": false, "text_extracted": true, "deleted": false} {
				if got, _ := lookup(decode(t, b), k); got != want {
					t.Errorf("%s = %v, want %v", k, got, want)
				}
			}
			if str(t, b, "reference_id") == "" || str(t, b, "created_at") == "" {
				t.Errorf("missing reference_id or created_at: %s", b)
			}
		}},
		{name: "default scope is this_turn", path: base, parts: []filePart{{field: "file", filename: "a.bin", body: "\x00\x01\x02"}}, status: 201, check: func(t *testing.T, b []byte) {
			if s := str(t, b, "scope"); s != "this_turn" {
				t.Errorf("scope %q", s)
			}
			if got, _ := lookup(decode(t, b), "text_extracted"); got != false {
				t.Errorf("binary file text_extracted = %v", got)
			}
			if s := str(t, b, "media_type"); s != "application/octet-stream" {
				t.Errorf("media_type %q", s)
			}
		}},
		{name: "a .py sent as octet-stream is Python", path: base, parts: []filePart{{field: "file", filename: "calc.py", contentType: "application/octet-stream", body: "def add(a, b):\n    return a + b\n"}}, status: 201, check: func(t *testing.T, b []byte) {
			if s := str(t, b, "media_type"); s != "text/x-python; charset=utf-8" {
				t.Errorf("media_type %q", s)
			}
		}},
		{name: "session scope, path stripped from the name", path: base + "?scope=session", parts: []filePart{{field: "file", filename: "../../etc/passwd", contentType: "application/octet-stream", body: "x=1"}}, status: 201, check: func(t *testing.T, b []byte) {
			if str(t, b, "scope") != "session" || str(t, b, "name") != "passwd" {
				t.Errorf("got %s", b)
			}
		}},
		{name: "image at exactly 10 MiB", path: base, parts: []filePart{{field: "file", filename: "ok.png", contentType: "image/png", size: 10 << 20}}, status: 201},
		{name: "image over 10 MiB", path: base, parts: []filePart{{field: "file", filename: "big.png", contentType: "image/png", size: 10<<20 + 1}}, status: 413, err: "10 MiB limit for a declared image"},
		{name: "document over 25 MiB", path: base, parts: []filePart{{field: "file", filename: "big.txt", contentType: "text/plain", size: 25<<20 + 1}}, status: 413, err: "25 MiB limit for a document"},
		{name: "bad scope", path: base + "?scope=forever", parts: []filePart{doc}, status: 400, err: "scope must be"},
		{name: "empty scope", path: base + "?scope=", parts: []filePart{doc}, status: 400, err: "scope must not be empty"},
		{name: "unknown session", path: "/api/sessions/" + unknownID + "/attachments", parts: []filePart{doc}, status: 404, err: "session"},
		{name: "no file part", path: base, parts: nil, status: 400, err: "no file part"},
		{name: "a form field and no file", path: base, parts: []filePart{{field: "scope", body: "session"}}, status: 400, err: "no file part"},
		{name: "two file parts", path: base, parts: []filePart{doc, {field: "file2", filename: "b.txt", body: "other bytes"}}, status: 400, err: "more than one file part"},
		{name: "two file parts with a field between", path: base, parts: []filePart{doc, note, {field: "file2", filename: "b.txt", body: "other bytes"}}, status: 400, err: "more than one file part"},

		// A browser FormData or curl -F scope=session -F file=@x: fields beside the file.
		{name: "scope as a form field", path: base, parts: []filePart{{field: "scope", body: "session"}, docWith("form scope")}, status: 201, check: scopeIs("session")},
		{name: "scope in the query and the form alike", path: base + "?scope=session", parts: []filePart{{field: "scope", body: "session"}, docWith("query and form")}, status: 201, check: scopeIs("session")},
		{name: "unknown fields around the file are ignored", path: base, parts: []filePart{note, docWith("fields around"), note}, status: 201, check: scopeIs("this_turn")},
		{name: "a bad scope field", path: base, parts: []filePart{{field: "scope", body: "forever"}, doc}, status: 400, err: "scope must be"},
		{name: "an empty scope field", path: base, parts: []filePart{{field: "scope", body: ""}, doc}, status: 400, err: "scope field must not be empty"},
		{name: "scope in the query and the form differ", path: base + "?scope=this_turn", parts: []filePart{{field: "scope", body: "session"}, doc}, status: 400, err: `scope is given twice, as "this_turn" and as "session"`},
		// curl -F file=@x -F scope=session: the field after the file (defect 3.2 of issue 22).
		{name: "a scope field after the file agrees with the query", path: base + "?scope=session", parts: []filePart{docWith("late agrees"), {field: "scope", body: "session"}}, status: 201, check: scopeIs("session")},
		{name: "a scope field after the file agrees with the default", path: base, parts: []filePart{docWith("late default"), {field: "scope", body: "this_turn"}}, status: 201, check: scopeIs("this_turn")},
		{name: "a scope field after the file conflicts with the query", path: base + "?scope=this_turn", parts: []filePart{doc, {field: "scope", body: "session"}}, status: 400, err: `scope is given twice, as "this_turn" (before the file) and as "session" after the file part`},
		{name: "a scope field after the file conflicts with the default", path: base, parts: []filePart{doc, {field: "scope", body: "session"}}, status: 400, err: `scope is given twice, as the default "this_turn" and as "session" after the file part`},
		{name: "a bad scope field after the file", path: base + "?scope=session", parts: []filePart{doc, {field: "scope", body: "forever"}}, status: 400, err: `as "forever" after the file part`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, blobsBefore := d.Journal().Last(), blobFiles(t, d)
			r := upload(t, srv, tc.path, tc.parts...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, tc.status, r.body)
			}
			wantEvents, wantBlobs := 0, len(blobsBefore)
			if tc.status == 201 {
				wantEvents, wantBlobs = 1, len(blobsBefore)+1
			} else {
				assertErrorBody(t, r, tc.err)
			}
			if got := d.Journal().Last() - before; got != uint64(wantEvents) {
				t.Errorf("appended %d events, want %d", got, wantEvents)
			}
			if got := blobFiles(t, d); len(got) != wantBlobs {
				t.Errorf("blobs %d, want %d: %v", len(got), wantBlobs, got)
			}
			if entries, _ := os.ReadDir(filepath.Join(d.dataDir, "blobs", "tmp")); len(entries) != 0 {
				t.Errorf("staging files left: %d", len(entries))
			}
			if tc.check != nil {
				tc.check(t, r.body)
			}
		})
	}
}

func TestJSONRoutesKeepTheirOneMiBCap(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	big := `{"path":"` + strings.Repeat("x", 1<<20) + `"}`
	before := d.Journal().Last()
	assertErrorBody(t, expectStatus(t, call(t, srv, post, "/api/workspaces", big), 413), "exceeds the 1048576-byte limit")
	req, _ := http.NewRequest(post, srv.URL+"/api/workspaces", io.MultiReader(strings.NewReader(big)))
	assertErrorBody(t, expectStatus(t, send(t, srv.Client(), req), 413), "too large")
	if d.Journal().Last() != before {
		t.Error("an oversized body appended events")
	}
	// The Guard's own cap is the upload limit plus framing.
	req, _ = http.NewRequest(post, srv.URL+"/api/workspaces", strings.NewReader("{}"))
	req.ContentLength = MaxRequestBytes + 1
	req.Body = io.NopCloser(io.LimitReader(repeatReader(' '), MaxRequestBytes+1))
	assertErrorBody(t, expectStatus(t, send(t, srv.Client(), req), 413), fmt.Sprintf("exceeds the %d-byte limit", MaxRequestBytes))
}

func expectStatus(t testing.TB, r reply, status int) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %.300s", r.status, status, r.body)
	}
	return r
}

func TestAttachmentRoutes(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	sid := attachmentSession(t, srv)
	other := attachmentSession(t, srv)
	base := "/api/sessions/" + sid + "/attachments"
	ref := func(p filePart, q string) string {
		r := expectStatus(t, upload(t, srv, base+q, p), 201)
		return str(t, r.body, "reference_id")
	}
	text := "name,qty\nbolt,3\n"
	one := ref(filePart{field: "file", filename: "parts.csv", contentType: "text/csv", body: text}, "?scope=this_turn")
	keep := ref(filePart{field: "file", filename: "spec.txt", contentType: "text/plain", body: "spec"}, "?scope=session")
	gone := ref(filePart{field: "file", filename: "tmp.txt", contentType: "text/plain", body: "scratch"}, "")
	otherRef := str(t, expectStatus(t, upload(t, srv, "/api/sessions/"+other+"/attachments", filePart{field: "file", filename: "o.txt", body: "o"}), 201).body, "reference_id")
	v := vars{"base": base, "one": one, "keep": keep, "gone": gone, "other": otherRef, "sid": sid}
	refs := func(want ...string) func(*testing.T, []byte) {
		return func(t *testing.T, b []byte) {
			var got []projections.Attachment
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, a := range got {
				ids = append(ids, a.ReferenceID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("refs %v, want %v", ids, want)
			}
		}
	}
	field := func(k string, want any) func(*testing.T, []byte) {
		return func(t *testing.T, b []byte) {
			if got, _ := lookup(decode(t, b), k); got != want {
				t.Errorf("%s = %v, want %v: %s", k, got, want, b)
			}
		}
	}
	runRoutes(t, d, srv, v, []route{
		{name: "list", method: get, path: "{base}", status: 200, check: refs(one, keep, gone)},
		{name: "list unknown session", method: get, path: "/api/sessions/" + unknownID + "/attachments", status: 404, err: "session"},
		{name: "get", method: get, path: "{base}/{one}", status: 200, check: field("name", "parts.csv")},
		{name: "get another session's ref", method: get, path: "{base}/{other}", status: 404, err: "attachment"},
		{name: "get unknown", method: get, path: "{base}/" + unknownID, status: 404, err: "attachment"},
		{name: "patch scope", method: http.MethodPatch, path: "{base}/{one}", body: `{"scope":"session"}`, status: 200, events: 1, check: field("scope", "session")},
		{name: "patch back", method: http.MethodPatch, path: "{base}/{one}", body: `{"scope":"this_turn"}`, status: 200, events: 1, check: field("scope", "this_turn")},
		{name: "patch same scope is a no-op", method: http.MethodPatch, path: "{base}/{one}", body: `{"scope":"this_turn"}`, status: 200},
		{name: "patch bad scope", method: http.MethodPatch, path: "{base}/{one}", body: `{"scope":"x"}`, status: 400, err: "scope must be"},
		{name: "patch missing scope", method: http.MethodPatch, path: "{base}/{one}", body: `{}`, status: 400, err: "scope is required"},
		{name: "patch unknown field", method: http.MethodPatch, path: "{base}/{one}", body: `{"scope":"session","x":1}`, status: 400, err: "unknown field"},
		{name: "patch another session's ref", method: http.MethodPatch, path: "{base}/{other}", body: `{"scope":"session"}`, status: 404, err: "attachment"},
		{name: "delete unused", method: del, path: "{base}/{gone}", status: 200, events: 1, check: field("deleted", true)},
		{name: "delete again", method: del, path: "{base}/{gone}", status: 409, err: "already deleted"},
		{name: "deleted still has metadata", method: get, path: "{base}/{gone}", status: 200, check: field("deleted", true)},
		{name: "unused deleted content is gone", method: get, path: "{base}/{gone}/content", status: 404, err: "deleted before any turn"},
		{name: "patch deleted", method: http.MethodPatch, path: "{base}/{gone}", body: `{"scope":"session"}`, status: 409, err: "deleted"},
		{name: "list drops deleted", method: get, path: "{base}", status: 200, check: refs(one, keep)},
		{name: "content of another session's ref", method: get, path: "{base}/{other}/content", status: 404, err: "attachment"},
	})

	t.Run("content", func(t *testing.T) {
		r := expectStatus(t, call(t, srv, get, base+"/"+one+"/content", ""), 200)
		if string(r.body) != text {
			t.Errorf("body %q", r.body)
		}
		for k, want := range map[string]string{"Content-Type": "text/csv", "X-Content-Type-Options": "nosniff", "Content-Disposition": `attachment; filename=parts.csv`} {
			if got := r.header.Get(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
	})

	t.Run("consumed, pins and deletion", func(t *testing.T) {
		// Turns consume relations inside their accept (turns_test.go tests
		// that decision); here the journal records two turns' use directly.
		ctx := testContext(t, 10*time.Second)
		for _, use := range []events.AttachmentsConsumed{{ReferenceIDs: []string{one, keep}, TurnID: "t1"}, {ReferenceIDs: []string{keep}, TurnID: "t2"}} {
			ss, _ := d.Store().Session(sid)
			_, err := d.Journal().Append(ctx, []journal.Event{events.New(sid, use)},
				journal.Expectation{AggregateID: sid, Version: ss.Version})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Store().Await(ctx, d.Journal().Last()); err != nil {
				t.Fatal(err)
			}
		}
		runRoutes(t, d, srv, v, []route{
			{name: "consumed metadata", method: get, path: "{base}/{one}", status: 200, check: func(t *testing.T, b []byte) {
				field("consumed", true)(t, b)
				field("consumed_turn_id", "t1")(t, b)
			}},
			{name: "session ref keeps its pins", method: get, path: "{base}/{keep}", status: 200, check: func(t *testing.T, b []byte) {
				field("consumed", false)(t, b)
				if got, _ := lookup(decode(t, b), "used_by_turns"); fmt.Sprint(got) != "[t1 t2]" {
					t.Errorf("used_by_turns %v", got)
				}
			}},
			{name: "list drops consumed", method: get, path: "{base}", status: 200, check: refs(keep)},
			{name: "patch consumed", method: http.MethodPatch, path: "{base}/{one}", body: `{"scope":"session"}`, status: 409, err: "consumed"},
			{name: "delete consumed", method: del, path: "{base}/{one}", status: 200, events: 1, check: field("deleted", true)},
			{name: "pinned content stays readable", method: get, path: "{base}/{one}/content", status: 200},
			{name: "delete pinned session ref", method: del, path: "{base}/{keep}", status: 200, events: 1},
			{name: "list is empty", method: get, path: "{base}", status: 200, check: refs()},
		})
		if txt, ok, err := d.cmds.Attachments.AttachmentText(sid, one); err != nil || !ok || txt != text {
			t.Errorf("AttachmentText = %q, %v, %v", txt, ok, err)
		}
	})

	t.Run("replay and checkpoint", func(t *testing.T) {
		rebuilt, _, err := projections.Load(testContext(t, 10*time.Second), d.Journal(), "")
		if err != nil {
			t.Fatal(err)
		}
		assertSameAttachments(t, d.Store(), rebuilt, sid, other)
		path := filepath.Join(t.TempDir(), "cp")
		if _, err := d.Store().WriteCheckpoint(path); err != nil {
			t.Fatal(err)
		}
		restored, n, err := projections.Load(testContext(t, 10*time.Second), d.Journal(), path)
		if err != nil || n != 0 {
			t.Fatalf("checkpoint load: replayed %d, %v", n, err)
		}
		assertSameAttachments(t, d.Store(), restored, sid, other)
		assertSameProjections(t, d.Store(), restored)
	})
}

func assertSameAttachments(t *testing.T, live, rebuilt *projections.Store, sessions ...string) {
	t.Helper()
	for _, sid := range sessions {
		a, _ := json.Marshal(live.Attachments(sid, true))
		b, _ := json.Marshal(rebuilt.Attachments(sid, true))
		if !bytes.Equal(a, b) || len(live.Attachments(sid, true)) == 0 {
			t.Errorf("attachments of %s differ:\nlive    %s\nrebuilt %s", sid, a, b)
		}
	}
}

func TestAttachmentsDeduplicateAndWorkWhenNotReady(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	sid := attachmentSession(t, srv)
	ss, _ := d.Store().Session(sid)
	if ss.Environment.State == "ready" {
		t.Fatal("a WithoutSandbox Session is Ready")
	}
	base := "/api/sessions/" + sid + "/attachments"
	p := filePart{field: "file", filename: "same.txt", contentType: "text/plain", body: "same bytes"}
	a := expectStatus(t, upload(t, srv, base, p), 201)
	p.filename = "again.txt"
	b := expectStatus(t, upload(t, srv, base, p), 201)
	if str(t, a.body, "reference_id") == str(t, b.body, "reference_id") || str(t, a.body, "sha256") != str(t, b.body, "sha256") {
		t.Errorf("two uploads: %s / %s", a.body, b.body)
	}
	if got := blobFiles(t, d); len(got) != 1 {
		t.Errorf("same bytes twice stored %d blobs: %v", len(got), got)
	}
	// No bytes in the journal: the events carry metadata and the hash.
	err := d.Journal().Scan(testContext(t, 10*time.Second), 0, 0, func(seq uint64, raw []byte) error {
		if bytes.Contains(raw, []byte("same bytes")) {
			return fmt.Errorf("seq %d holds attachment bytes", seq)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestAttachmentPDFText(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	sid := attachmentSession(t, srv)
	base := "/api/sessions/" + sid + "/attachments"
	pdf := string(doctexttest.Doc("BT /F1 12 Tf 72 720 Td (Bolt spec, rev. 2) Tj ET", "BT /F2 12 Tf 72 720 Td <00010002> Tj ET"))
	for _, tc := range []struct {
		name, contentType, body string
		text                    string // "" means none extracted
	}{
		{name: "declared PDF", contentType: "application/pdf", body: pdf, text: "Bolt spec, rev. 2\n\n日本"},
		{name: "PDF by its magic", contentType: "application/octet-stream", body: pdf + "\n", text: "Bolt spec, rev. 2\n\n日本"},
		{name: "truncated PDF", contentType: "application/pdf", body: pdf[:len(pdf)/2]},
		{name: "PDF that crashes the parser", contentType: "application/pdf", body: string(doctexttest.HugeXref())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := expectStatus(t, upload(t, srv, base, filePart{field: "file", filename: "spec.pdf", contentType: tc.contentType, body: tc.body}), 201)
			if got, _ := lookup(decode(t, r.body), "text_extracted"); got != (tc.text != "") {
				t.Errorf("text_extracted = %v: %s", got, r.body)
			}
			txt, ok, err := d.cmds.Attachments.AttachmentText(sid, str(t, r.body, "reference_id"))
			if err != nil || ok != (tc.text != "") || txt != tc.text {
				t.Errorf("AttachmentText = %q, %v, %v; want %q", txt, ok, err, tc.text)
			}
			c := expectStatus(t, call(t, srv, get, base+"/"+str(t, r.body, "reference_id")+"/content", ""), 200)
			if string(c.body) != tc.body {
				t.Errorf("content differs from the upload")
			}
		})
	}
}
