package containerd

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"

	"lathe/runtime/sandbox"

	"github.com/containerd/containerd/v2/client"
)

// drainGrace bounds how long a finished process's output may keep flowing:
// a background child can hold stdout open long after the process exits. The
// runc shim waits as long before it closes its end.
const drainGrace = 2 * time.Second

// process is one exec'd command.
type process struct {
	d    *Driver
	proc client.Process
	tty  bool

	done chan struct{}
	code int
	err  error
}

var _ sandbox.Process = (*process)(nil)

// reap waits for the exit, lets the output drain and deletes the process
// from containerd, whether or not anyone calls Wait.
func (p *process) reap(exitC <-chan client.ExitStatus) {
	defer close(p.done)
	code, _, err := (<-exitC).Result()
	drained := make(chan struct{})
	go func() { p.proc.IO().Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
	}
	// Delete also closes our end of the output pipes. It is cleanup only: it
	// fails when the whole sandbox went first, and the exit code stands.
	deleteProcess(context.WithoutCancel(p.d.ctx), p.proc)
	p.code = int(code)
	if err != nil {
		p.code, p.err = -1, p.d.wrap(err, "wait for "+p.proc.ID())
	}
}

// deleteProcess removes proc from containerd and closes its IO, which
// Delete does only when it succeeds.
func deleteProcess(ctx context.Context, proc client.Process) {
	if _, err := proc.Delete(ctx); err != nil {
		if pio := proc.IO(); pio != nil {
			pio.Cancel()
			pio.Wait()
			pio.Close()
		}
	}
}

// Wait returns the exit code once the process has exited and its output has
// been copied out.
func (p *process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.code, p.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Signal sends sig to the process.
func (p *process) Signal(ctx context.Context, sig syscall.Signal) error {
	return p.d.wrap(p.proc.Kill(p.d.nsCtx(ctx), sig), "signal "+p.proc.ID())
}

// Resize sets the terminal size of a TTY process.
func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	if !p.tty {
		return errors.New("resize: the process has no terminal")
	}
	if rows == 0 || cols == 0 {
		return errors.New("resize: rows and cols must be positive")
	}
	return p.d.wrap(p.proc.Resize(p.d.nsCtx(ctx), uint32(cols), uint32(rows)), "resize "+p.proc.ID())
}

// lockedWriter serialises writes to w with a lock it may share.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
