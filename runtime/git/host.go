package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"lathe/runtime/sandbox"
)

// Host is an Execer that runs git on the host, for the operations that
// span a Workspace and its worktrees (adding a worktree, merging a
// Session's branch home), which no one Session's sandbox sees whole.
//
// It gives each process only PATH, HOME and the caller's environment: no
// system or global git config (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL),
// so only the repository's own config counts, under the command-line safe
// config of Env. Run as root for a Workspace another user owns, it runs
// git as that owner, so what it writes in the Workspace and its .git
// belongs to the owner, as the sandbox's writes do. A process dies with
// the daemon (Pdeathsig): a merge cut off by kill -9 stops where it was,
// and the next start finishes or undoes it.
type Host struct {
	// UID and GID run the process as another user; AsUser enables them.
	UID, GID uint32
	AsUser   bool
}

// HostFor is the Host that runs git as the owner of dir: itself unless
// the daemon is root and dir belongs to another user.
func HostFor(dir string) (Host, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return Host{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Host{}, fmt.Errorf("%s: no owner", dir)
	}
	if os.Geteuid() != 0 || st.Uid == 0 {
		return Host{}, nil
	}
	return Host{UID: st.Uid, GID: st.Gid, AsUser: true}, nil
}

// OpenHost opens the repository whose worktree is root, on the host, as
// the owner of root.
func OpenHost(root string) (*Repo, error) {
	h, err := HostFor(root)
	if err != nil {
		return nil, err
	}
	return Open(h, root), nil
}

// Exec starts the process on the host.
func (h Host) Exec(ctx context.Context, spec sandbox.ExecSpec) (sandbox.Process, error) {
	if len(spec.Args) == 0 {
		return nil, errors.New("no command")
	}
	cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=/nonexistent",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
	}, spec.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if h.AsUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: h.UID, Gid: h.GID, NoSetGroups: true}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &hostProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

type hostProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *hostProcess) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	if p.err != nil {
		return -1, p.err
	}
	return 0, nil
}

func (p *hostProcess) Signal(_ context.Context, sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

func (p *hostProcess) Resize(context.Context, uint16, uint16) error {
	return errors.New("a host git process has no terminal")
}
