package tools_test

import (
	"context"
	"lathe/runtime/agent/tools"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/sandboxtest"
	"strings"
	"testing"
	"time"
)

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

// processes lists the command lines of the processes in sb, one a line,
// arguments joined by spaces (the image has no ps).
func processes(t *testing.T, sb sandbox.Sandbox) []string {
	t.Helper()
	ctx := sandboxtest.Context(t, time.Minute)
	out := tools.NewBounded(64 << 10)
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"bash", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done 2>/dev/null`}, Stdout: out})
	if err == nil {
		_, err = p.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(out.String(), "\n")
}
