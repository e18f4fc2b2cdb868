package relay_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"lathe/runtime/acp/relay"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"
)

// A process in a sandbox with no network reaches the host's handler at
// 127.0.0.1:<port>, its own loopback, and the handler sees the request.
func TestRelayIntoSandbox(t *testing.T) {
	sb, _ := containerdtest.ReadySandbox(t, "lathe-test-relay")
	ctx := sandboxtest.Context(t, 60*time.Second)
	got := make(chan string, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Method + " " + r.URL.Path + " " + string(b)
		fmt.Fprint(w, "from the host")
	})
	r, err := relay.Serve(ctx, sb, 47411, h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	script := `exec 3<>/dev/tcp/127.0.0.1/47411; printf 'POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello' >&3; cat <&3`
	for i := 0; i < 2; i++ { // two connections, one after the other
		out, errOut, code := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"bash", "-c", script}})
		if code != 0 || !strings.Contains(out, "from the host") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if g := <-got; g != "POST /v1/messages hello" {
			t.Fatalf("the handler saw %q", g)
		}
	}
	r.Close()
	select {
	case <-r.Done():
	case <-ctx.Done():
		t.Fatal("the relay did not end")
	}
	// The in-sandbox listener went with it: the port is free again.
	r2, err := relay.Serve(context.Background(), sb, 47411, h)
	if err != nil {
		t.Fatalf("the port stayed taken: %v", err)
	}
	r2.Close()
}
