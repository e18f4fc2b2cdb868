package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"lathe/runtime/sandbox"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Sandbox is one container on the engine.
type Sandbox struct {
	d    *Driver
	id   string // the engine's container ID
	name string
	spec sandbox.Spec

	done chan struct{}
	once sync.Once
	err  error // set before done closes

	helperTag string // the helper build the container mounts (labelHelper)
	links     links
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

func newSandbox(d *Driver, id, name, helperTag string, spec sandbox.Spec) *Sandbox {
	return &Sandbox{d: d, id: id, name: name, helperTag: helperTag, spec: spec, done: make(chan struct{})}
}

func (s *Sandbox) SessionID() string  { return s.spec.SessionID }
func (s *Sandbox) Generation() uint64 { return s.spec.Generation }

// RuntimeID is the engine's container ID.
func (s *Sandbox) RuntimeID() string { return s.id }

// CreationToken is the token of the provisioning attempt that made it.
func (s *Sandbox) CreationToken() string { return s.spec.CreationToken }

func (s *Sandbox) Done() <-chan struct{} { return s.done }

func (s *Sandbox) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

func (s *Sandbox) Teardown(ctx context.Context) error {
	return s.d.Remove(ctx, s.spec.SessionID, s.spec.Generation)
}

// finish closes Done with err, once.
func (s *Sandbox) finish(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
	})
	s.closeLink()
}

func (s *Sandbox) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// notFound is the error of a request to a sandbox that has stopped.
func (s *Sandbox) notFound(err error) error {
	return fmt.Errorf("%w: sandbox %s: %w", sandbox.ErrNotFound, s.name, err)
}

// execError classifies an exec request's error: a container that is gone
// or stopped is sandbox.ErrNotFound.
func (s *Sandbox) execError(ctx context.Context, err error) error {
	if errdefs.IsConflict(err) || strings.Contains(err.Error(), "is not running") {
		return s.notFound(err)
	}
	return s.d.wrap(ctx, err, "exec in "+s.name)
}

// pidDir holds, inside the sandbox, one file per process with its PID.
const pidDir = "/tmp/.lathe-exec"

// shim wraps args: the shell records its PID (that of args once it execs)
// under token, sizes a terminal, and execs args.
func shim(token string, es sandbox.ExecSpec) []string {
	f := pidDir + `/` + token
	// The init makes pidDir; should something have removed it, it is made
	// again (a process more).
	line := `{ echo $$ >` + f + ` || { mkdir -p ` + pidDir + ` && echo $$ >` + f + `; }; } 2>/dev/null; `
	if es.TTY && es.Rows > 0 && es.Cols > 0 {
		line += fmt.Sprintf(`stty rows %d cols %d 2>/dev/null; `, es.Rows, es.Cols)
	}
	return append([]string{"/bin/sh", "-c", line + `exec "$@"`, "sh"}, es.Args...)
}

// Exec starts es in the sandbox.
func (s *Sandbox) Exec(ctx context.Context, es sandbox.ExecSpec) (sandbox.Process, error) {
	if len(es.Args) == 0 {
		return nil, errors.New("exec: no command")
	}
	if s.exited() {
		return nil, s.notFound(s.Err())
	}
	b := make([]byte, 8)
	rand.Read(b)
	token := hex.EncodeToString(b)
	opts := client.ExecCreateOptions{
		TTY: es.TTY, AttachStdin: es.Stdin != nil, AttachStdout: true, AttachStderr: true,
		Env: es.Env, WorkingDir: es.Dir, Cmd: shim(token, es),
	}
	if es.TTY {
		opts.Env = append([]string{"TERM=xterm"}, es.Env...)
	}
	p, err := s.d.startExec(ctx, s.id, opts, es.Stdin, es.Stdout, es.Stderr)
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	p.sb, p.token = s, token
	return p, nil
}

// process is one engine exec.
type process struct {
	d      *Driver
	sb     *Sandbox // nil for the driver's own commands
	execID string
	token  string
	conn   client.HijackedResponse
	tty    bool

	outDone chan struct{} // the output stream has ended
	mu      sync.Mutex
	exited  bool
	code    int
}

// startExec creates and starts an exec in container id and streams its
// input and output.
func (d *Driver) startExec(ctx context.Context, id string, opts client.ExecCreateOptions, stdin io.Reader, stdout, stderr io.Writer) (*process, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.c.ExecCreate(cctx, id, opts)
	if err != nil {
		return nil, err
	}
	conn, err := d.c.ExecAttach(cctx, res.ID, client.ExecAttachOptions{TTY: opts.TTY})
	if err != nil {
		return nil, err
	}
	p := &process{d: d, execID: res.ID, conn: conn.HijackedResponse, tty: opts.TTY, outDone: make(chan struct{})}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if stdin != nil {
		go func() {
			io.Copy(conn.Conn, stdin)
			conn.CloseWrite()
		}()
	}
	go func() {
		defer close(p.outDone)
		if opts.TTY {
			io.Copy(stdout, conn.Reader)
		} else {
			stdcopy.StdCopy(stdout, stderr, conn.Reader)
		}
		conn.Close()
	}()
	return p, nil
}

// Wait returns the exit code once the process has exited and its output
// is written.
func (p *process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.outDone:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return p.code, nil
	}
	// The stream ends as the process exits; the engine records the code a
	// moment later.
	for {
		cctx, cancel := p.d.call(ctx)
		res, err := p.d.c.ExecInspect(cctx, p.execID, client.ExecInspectOptions{})
		cancel()
		if err != nil {
			if p.sb != nil {
				return -1, p.sb.execError(ctx, err)
			}
			return -1, p.d.wrap(ctx, err, "inspect exec")
		}
		if !res.Running {
			p.exited, p.code = true, res.ExitCode
			return p.code, nil
		}
		if p.sb != nil && p.sb.exited() {
			return -1, p.sb.notFound(p.sb.Err())
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Signal sends sig to the process, by the PID its shim recorded.
func (p *process) Signal(ctx context.Context, sig syscall.Signal) error {
	if p.sb == nil {
		return errors.New("signal: not a sandbox process")
	}
	cctx, cancel := p.d.call(ctx)
	res, err := p.d.c.ExecInspect(cctx, p.execID, client.ExecInspectOptions{})
	cancel()
	if err != nil {
		return p.sb.execError(ctx, err)
	}
	if !res.Running {
		return fmt.Errorf("signal %d: the process has exited", sig)
	}
	script := `kill -` + strconv.Itoa(int(sig)) + ` "$(cat ` + pidDir + `/` + p.token + `)"`
	_, errOut, code, err := p.d.run(ctx, p.sb.id, "0", []string{"/bin/sh", "-c", script})
	if err != nil {
		return p.sb.execError(ctx, err)
	}
	if code != 0 {
		return fmt.Errorf("signal %d: %s", sig, strings.TrimSpace(errOut))
	}
	return nil
}

// Resize changes a TTY process's terminal size.
func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	if !p.tty {
		return errors.New("resize: the process has no terminal")
	}
	if rows == 0 || cols == 0 {
		return fmt.Errorf("resize to %dx%d: both must be positive", rows, cols)
	}
	cctx, cancel := p.d.call(ctx)
	defer cancel()
	_, err := p.d.c.ExecResize(cctx, p.execID, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)})
	return p.d.wrap(ctx, err, "resize")
}

// run runs args in container id as user to the end.
func (d *Driver) run(ctx context.Context, id, user string, args []string) (stdout, stderr string, code int, err error) {
	var out, errb strings.Builder
	p, err := d.startExec(ctx, id, client.ExecCreateOptions{User: user, AttachStdout: true, AttachStderr: true, Cmd: args}, nil, &out, &errb)
	if err != nil {
		return "", "", -1, err
	}
	wctx, cancel := d.call(ctx)
	defer cancel()
	code, err = p.Wait(wctx)
	return out.String(), errb.String(), code, err
}

// CopyIn unpacks the tar stream r into dir inside the sandbox (the engine's
// archive API: one request, no process in the sandbox), keeping the
// owners the archive names. dir must exist. It runs as long as ctx allows.
func (s *Sandbox) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	if s.exited() {
		return s.notFound(s.Err())
	}
	// dockerd answers 404 for a missing dir; Podman makes it. Stat it
	// first, so that both refuse.
	st, err := s.d.c.ContainerStatPath(ctx, s.id, client.ContainerStatPathOptions{Path: dir})
	if err == nil && !st.Stat.Mode.IsDir() {
		return fmt.Errorf("%w: copy into %s in %s: not a directory", sandbox.ErrNotFound, dir, s.name)
	}
	if err == nil {
		_, err = s.d.c.CopyToContainer(ctx, s.id, client.CopyToContainerOptions{DestinationPath: dir, Content: r, CopyUIDGID: true})
	}
	return s.d.wrap(ctx, err, "copy into "+dir+" in "+s.name)
}

// CopyOut returns path inside the sandbox as a tar stream (its last
// element at the archive's root). The caller closes it.
func (s *Sandbox) CopyOut(ctx context.Context, path string) (io.ReadCloser, error) {
	if s.exited() {
		return nil, s.notFound(s.Err())
	}
	res, err := s.d.c.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return nil, s.d.wrap(ctx, err, "copy "+path+" out of "+s.name)
	}
	return res.Content, nil
}
