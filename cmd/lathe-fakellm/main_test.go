package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lathe/runtime/polltest"
)

func TestRunServesScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(`{"models":["m"],"turns":[{"steps":[{"kind":"text","text":"hello"}]}]}`), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var stderr polltest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(runCtx, []string{"-listen", "127.0.0.1:0", "-script", path}, &stderr) }()

	re := regexp.MustCompile(`lathe-fakellm listening on (http://127\.0\.0\.1:\d+)\n`)
	var url string
	polltest.Check(t, func() error {
		m := re.FindStringSubmatch(stderr.String())
		if m == nil {
			return fmt.Errorf("no listening line: %q", stderr.String())
		}
		url = m[1]
		return nil
	}, polltest.Within(10*time.Second))
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"content":"hello"`) || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("body %q", body)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunRejectsBadScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(`{"turns":[{"steps":[{"kind":"text"},{"kind":"fail","status":500}]}]}`), 0o644)
	if err := run(context.Background(), []string{"-script", path}, io.Discard); err == nil {
		t.Fatal("want error")
	}
}
