package daemon

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// The tests on lathe.local/sandbox:nopython (the sandbox image without
// python3, `build-image.sh nopython`) show that nothing Lathe runs in a
// sandbox on its own behalf needs Python: the Agent's file tools, the file
// routes and the Preview relay are the static sandbox helper.

// TestNoPythonAgentTurn: on a containerd Session of the image without
// python3, an Agent turn writes, edits, reads, lists and searches a file.
func TestNoPythonAgentTurn(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.ToolCall("w", "write_file", `{"path":"notes/a.txt",`, `"content":"alpha\nbeta\n"}`),
			fakellm.ToolCall("e", "edit_file", `{"path":"notes/a.txt","old_string":"beta","new_string":"gamma"}`),
			fakellm.ToolCall("r", "read_file", `{"path":"notes/a.txt"}`),
			fakellm.ToolCall("l", "list_files", `{"path":"."}`),
			fakellm.ToolCall("s", "search", `{"pattern":"gam+a"}`),
			fakellm.ToolCall("p", "shell", `{"command":"command -v python3 || echo no python3"}`),
			fakellm.Usage(10, 5, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("done"), fakellm.Usage(20, 1, 0)}},
	}}
	r := turnDaemon(t, config.KindOpenAI, script, nil)
	containerdtest.AddImage(t, r.cl, containerdtest.NoPython)
	id := r.create(t, `"image":"`+containerdtest.NoPython+`"`).ID
	if ss := r.ready(t, id); ss.Environment.Image != containerdtest.NoPython {
		t.Fatalf("the Session runs %s, want %s", ss.Environment.Image, containerdtest.NoPython)
	}
	openTurnConn(t, r).runDone(t, id, "nopy", "write, edit, read, list, search")

	var turn projections.Turn
	if resp := r.do(t, get, "/api/sessions/"+id+"/turns/nopy", ""); resp.status != 200 || json.Unmarshal(resp.body, &turn) != nil {
		t.Fatalf("GET turn: %d %s", resp.status, resp.body)
	}
	want := []struct{ name, has string }{
		{"write_file", "notes/a.txt (11 bytes)"},
		{"edit_file", "notes/a.txt"},
		{"read_file", "2\tgamma"},
		{"list_files", "notes/a.txt"},
		{"search", "notes/a.txt:2:gamma"},
		{"shell", "no python3"},
	}
	if len(turn.ToolCalls) != len(want) {
		t.Fatalf("tool calls %+v, want %d", turn.ToolCalls, len(want))
	}
	for i, w := range want {
		c := turn.ToolCalls[i]
		if c.Name != w.name || c.IsError || !strings.Contains(c.Result.String(), w.has) {
			t.Errorf("tool call %d: %s error=%v result %q, want %s without error, with %q", i, c.Name, c.IsError, c.Result.String(), w.name, w.has)
		}
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "notes", "a.txt")); err != nil || string(b) != "alpha\ngamma\n" {
		t.Errorf("notes/a.txt on the Workspace = %q, %v", b, err)
	}
}

// perlServer answers every request with perlReply: an HTTP server from the
// image's perl-base, since the image has no python3 to run one.
const (
	perlReply  = "served without python\n"
	perlServer = `use IO::Socket::INET;
my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $ARGV[0], Listen => 16, ReuseAddr => 1) or die "listen: $!";
while (my $c = $s->accept) {
	while (my $l = <$c>) { last if $l =~ /^\r?\n$/ }
	my $b = "` + perlReply + `";
	print $c "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " . length($b) . "\r\nConnection: close\r\n\r\n$b";
	close $c;
}
`
)

// TestNoPythonRemoteSession: a remote (docker) Session of the image without
// python3 reads and writes its files through the file routes, and its
// Preview reaches an app inside through the relay.
func TestNoPythonRemoteSession(t *testing.T) {
	d, srv := remoteDaemonOn(t, containerdtest.NoPython)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	r := &previewRig{d: d, srv: srv, client: loopbackClient(srv), listen: port}

	dir := realDir(t, t.TempDir())
	gittest.Repo(t, dir, map[string]string{"a.txt": "a\n", "server.pl": perlServer})
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	id, cid := remoteReady(t, srv, ws, fmt.Sprintf(`"exposed_ports":[%d]`, previewPort))
	if out, err := dockerCLI(dockertest.Host(), "exec", cid, "sh", "-c", "command -v python3 || echo none"); err != nil || out != "none" {
		t.Fatalf("python3 in the container: %q %v", out, err)
	}

	base := "/api/sessions/" + id
	if got := mustCall(t, srv, 200, get, base+"/file?path=a.txt", ""); got["content"] != "a\n" {
		t.Errorf("read a.txt = %v", got)
	}
	mustCall(t, srv, 201, post, base+"/files/create", `{"path":"new.txt","kind":"file"}`)
	mustCall(t, srv, 200, post, base+"/file?path=new.txt", `{"content":"written\n"}`)
	if got := mustCall(t, srv, 200, get, base+"/file?path=new.txt", ""); got["content"] != "written\n" {
		t.Errorf("read back new.txt = %v", got)
	}
	if out, err := dockerCLI(dockertest.Host(), "exec", "-w", dir, cid, "cat", "new.txt"); err != nil || out != "written" {
		t.Errorf("new.txt in the container = %q, %v", out, err)
	}
	if got := treeNames(t, srv, base+"/tree?path=."); got != ".git:dir a.txt:file new.txt:file server.pl:file" {
		t.Errorf("tree . = %s", got)
	}

	mustCall(t, srv, 201, post, base+"/tasks", fmt.Sprintf(`{"command":"exec perl %s/server.pl %d"}`, dir, previewPort))
	host := r.host(id, previewPort)
	sandboxtest.WaitFor(t, time.Minute, func() bool { return r.send(t, get, host, "/", "").status == 200 })
	if got := r.send(t, get, host, "/page", ""); got.status != 200 || string(got.body) != perlReply {
		t.Errorf("GET /page through the Preview: %d %q, want 200 %q", got.status, got.body, perlReply)
	}
}
