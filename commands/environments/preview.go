package environments

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"lathe/commands/core"

	"lathe/runtime/preview"
	"lathe/runtime/sandbox"
)

// Preview port detection bounds.
const (
	portsTimeout = 10 * time.Second
	// maxPortsText bounds the /proc/net/tcp text read; past it the oldest
	// lines are dropped (a line cut short is skipped by the parser).
	maxPortsText = 1 << 20
)

// PreviewPort is one TCP port a Session's sandbox listens on, which the
// Preview can open.
type PreviewPort struct {
	Port int `json:"port"`
}

// PreviewPorts lists the TCP ports listening in the network namespace of a
// Ready Session's sandbox, read from /proc/net/tcp and /proc/net/tcp6 by a
// process inside it (runtime/preview.ListeningPorts parses them). Nothing
// changes, so nothing is journaled.
func (s *Environments) PreviewPorts(ctx context.Context, id string) ([]PreviewPort, error) {
	sb, _, err := s.ReadySandbox(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, portsTimeout)
	defer cancel()
	out := core.NewTail(maxPortsText)
	// tcp6 is absent when the kernel has no IPv6; cat still prints tcp and
	// exits 1, so the exit code is not the answer.
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"cat", "/proc/net/tcp", "/proc/net/tcp6"}, Stdout: out})
	if err != nil {
		return nil, SandboxError(id, fmt.Errorf("read the sandbox's listening ports: %w", err))
	}
	if _, err := p.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = p.Signal(kctx, syscall.SIGKILL)
			kcancel()
		}
		return nil, SandboxError(id, fmt.Errorf("read the sandbox's listening ports: %w", err))
	}
	ports := []PreviewPort{}
	for _, n := range preview.ListeningPorts([]byte(out.String())) {
		ports = append(ports, PreviewPort{Port: n})
	}
	return ports, nil
}
