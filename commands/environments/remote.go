package environments

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
	"lathe/runtime/sandbox"
)

// The remote sandbox provider's side of a Session's lifecycle (CONTRACT.md
// "The remote sandbox provider"). Around the provider-neutral lifecycle of
// environment.go it adds, only under `sandbox.provider: remote`:
//
//   - the creation token: each provisioning attempt draws a fresh one and
//     journals it (RuntimeProvisioning) before it asks the engine, which
//     labels the container with it; the engine's container ID follows
//     (RuntimeBound);
//   - the code going in: after Prepare the empty WorkingDir in the sandbox
//     becomes a clone of the Workspace (remoteseed.go);
//   - nothing lost when a runtime goes: close, delete, rebuild and change
//     first bring the clone's work home (remotesync.go); when that fails
//     although the engine answers, the clone is rescued into an archive
//     on this host (remoterescue.go) and removed all the same; a runtime
//     the engine cannot remove, or whose work can neither come home nor
//     be rescued, is retained (RuntimeRetained) until the operator
//     confirms its cleanup. Never retain a runtime when the engine is
//     reachable and the rescue works.

// RuntimeIDer is what a remote sandbox tells of itself: the engine's ID of
// its container. A sandbox without it has no runtime ID to show.
type RuntimeIDer interface {
	RuntimeID() string
}

// remote is the remote provider's part of the lifecycle over the shared
// core; every method is a no-op under the local provider.
type remote struct{ c *Sandboxes }

func (s *Sandboxes) Remote() remote { return remote{s} }

func (r remote) on() bool { return r.c.Opts.RemoteSandbox }

// newCreationToken is a fresh, unguessable provisioning token.
func newCreationToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "lct-" + hex.EncodeToString(b)
}

// begin records a provisioning attempt before the engine is asked: a
// fresh token, which spec carries to the driver, and the template image.
func (r remote) begin(ctx context.Context, ss projections.Session, spec *sandbox.Spec) error {
	if !r.on() {
		return nil
	}
	spec.CreationToken = newCreationToken()
	if t := r.c.Opts.RemoteTemplate; t != "" {
		spec.Image = t
	}
	return r.c.Append(ctx, []journal.Event{events.New(ss.ID, events.RuntimeProvisioning{
		Generation: spec.Generation, CreationToken: spec.CreationToken, Host: r.c.Opts.RemoteHost})})
}

// bound records what Prepare made of the attempt: the container bound to
// the Session, or, when it failed, no runtime.
func (r remote) bound(ctx context.Context, ss projections.Session, spec sandbox.Spec, sb sandbox.Sandbox, prepareErr error) error {
	if !r.on() {
		return nil
	}
	var p events.Payload = events.RuntimeReleased{Generation: spec.Generation}
	if prepareErr == nil {
		id := ""
		if ri, ok := sb.(RuntimeIDer); ok {
			id = ri.RuntimeID()
		}
		p = events.RuntimeBound{Generation: spec.Generation, RuntimeID: id, CreationToken: spec.CreationToken}
	}
	return r.c.Append(context.WithoutCancel(ctx), []journal.Event{events.New(ss.ID, p)})
}

// evidence names the engine's host in a failure under the remote provider,
// with the fix that fits it.
func (r remote) evidence(ev events.Evidence, err error) events.Evidence {
	if !r.on() {
		return ev
	}
	host := r.host()
	if !strings.Contains(ev.Error, host) {
		ev.Error = fmt.Sprintf("the Docker engine at %s: %s", host, ev.Error)
	}
	if errors.Is(err, sandbox.ErrUnavailable) {
		ev.Fix = fmt.Sprintf("make the Docker engine at %s reachable (sandbox.remote.host), then rebuild the environment", host)
	}
	return ev
}

func (r remote) host() string {
	if h := r.c.Opts.RemoteHost; h != "" {
		return h
	}
	return "the configured sandbox.remote.host"
}

// teardown removes a remote Session's live sandbox: it brings the clone's
// work home first when a lifecycle that ends it (close, delete, rebuild,
// change) owns the boundary, rescues the clone when that fails with the
// engine reachable, and retains the runtime when the work can neither come
// home nor be rescued, or the engine cannot remove it. It returns an error only
// for a removal that failed otherwise, as the local teardown does.
func (r remote) teardown(ctx context.Context, id string, sb sandbox.Sandbox) error {
	ss, ok := r.c.Store.Session(id)
	if !ok {
		return sb.Teardown(context.WithoutCancel(ctx))
	}
	gen := ss.Environment.Generation
	switch ss.Environment.Owner {
	case events.OwnerClose, events.OwnerDelete, events.OwnerRebuild, events.OwnerChange:
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
		_, err := r.bringHome(hctx, ss, sb, ss.Environment.Owner)
		cancel()
		if err != nil && !errors.Is(err, errNotGitWorkspace) {
			cause := fmt.Errorf("bring the clone's work home before removing it: %w", err)
			if errors.Is(err, sandbox.ErrUnavailable) {
				return r.retain(ctx, ss, gen, cause)
			}
			if rerr := r.rescue(ctx, ss, sb, gen, cause); rerr != nil {
				return r.retain(ctx, ss, gen, fmt.Errorf("%w; then keep its working tree on this host: %w", cause, rerr))
			}
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
	err := sb.Teardown(rctx)
	cancel()
	switch {
	case errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		return r.retain(ctx, ss, gen, fmt.Errorf("remove the runtime: %w", err))
	case err != nil:
		return err
	}
	_ = os.RemoveAll(remoteHookPath(r.c.Opts.Scratch(), id))
	return r.c.Append(context.WithoutCancel(ctx), []journal.Event{events.New(id, events.RuntimeReleased{Generation: gen})})
}

// retain records that the Session's runtime stays on the engine, with what
// to delete by hand.
func (r remote) retain(ctx context.Context, ss projections.Session, gen uint64, cause error) error {
	env := ss.Environment
	what := fmt.Sprintf("container %s", env.RuntimeID)
	if env.RuntimeID == "" {
		what = "every container labelled service_creation_token=" + env.CreationToken
	}
	ev := events.Evidence{
		Error: fmt.Sprintf("the runtime on the Docker engine at %s was kept: %v", r.host(), cause),
		Fix: fmt.Sprintf("delete %s on %s by hand (its work is still in it), then confirm with POST /api/sessions/%s/environment/confirm-runtime-cleanup",
			what, r.host(), ss.ID),
	}
	r.c.Log.Warn("retain a remote runtime", "session", ss.ID, "runtime", env.RuntimeID, "err", cause)
	return r.c.Append(context.WithoutCancel(ctx), []journal.Event{events.New(ss.ID, events.RuntimeRetained{
		Generation: gen, RuntimeID: env.RuntimeID, CreationToken: env.CreationToken, Evidence: ev})})
}

// errWaysRemote: Ways run their lanes as overlays of the checkout on this
// machine, which a remote clone is not.
var ErrWaysRemote = fmt.Errorf("%w: Ways need the local container runtime: their lanes are copies of the checkout on this machine, and under sandbox.provider remote the checkout is a clone on the engine's host", core.ErrConflict)

// RefuseDelete refuses to delete the record of a Session that retains a
// runtime: it is what tells the operator what to delete by hand.
func (r remote) RefuseDelete(ss projections.Session) error {
	if !ss.Environment.Retained {
		return nil
	}
	rr := ss.Environment.RetainedRuntimes[len(ss.Environment.RetainedRuntimes)-1]
	return fmt.Errorf("%w: session %q keeps a runtime Lathe could not remove (%s); delete it by hand, confirm with POST /api/sessions/%s/environment/confirm-runtime-cleanup, then delete the Session",
		core.ErrConflict, ss.ID, rr.Evidence.Fix, ss.ID)
}

// confirmCleanup clears the retained runtime a valid confirmation names.
func (s *Environments) confirmCleanup(ctx context.Context, id string, c CleanupConfirmation) (projections.Session, error) {
	runtimeID, token := "", ""
	if c.RuntimeID != nil {
		runtimeID = strings.TrimSpace(*c.RuntimeID)
	}
	if c.CreationToken != nil {
		token = strings.TrimSpace(*c.CreationToken)
	}
	return s.UpdateSession(ctx, id, func(ss projections.Session) (events.Payload, error) {
		rr, ok := ss.RetainedMatch(runtimeID, token)
		if !ok {
			return nil, fmt.Errorf("%w: no retained runtime of session %q matches this confirmation", core.ErrConflict, id)
		}
		return events.RuntimeCleanupConfirmed{RuntimeID: rr.RuntimeID, CreationToken: rr.CreationToken}, nil
	})
}

// gitRoot reports whether the clone (not the host Workspace, which may
// differ: a copied folder the Agent ran git init in, a .git removed in
// the sandbox) is a repository's root, asked of the Session's file helper.
func (r remote) gitRoot(ctx context.Context, sb sandbox.Sandbox, ss projections.Session) bool {
	_, err := remoteFS{ctx: ctx, c: r.c.envs.files.get(ss.ID, sb, ss.WorkingDir)}.Lstat(".git")
	return err == nil
}

// RemoteHookDir is where a remote Session's host hooks run: its checkout
// is a clone on the engine's host, so not the Workspace folder on this one
// (which nothing of the Session writes into) but a scratch directory of
// the Session's own in scratch, made on first use and removed with its
// runtime (and, being scratch, at the daemon's next start); "" (host hooks
// refused) when it cannot be made. Hooks in the sandbox run in the clone,
// and every hook's cwd names the clone.
func RemoteHookDir(scratch, session string) string {
	dir := remoteHookPath(scratch, session)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return dir
}

func remoteHookPath(scratch, session string) string {
	return filepath.Join(scratch, "lathe-remote-hooks", session)
}

// hostRepo is the Workspace repository of ss on the daemon's host, as git
// finds it (git.FindHome: no sandbox on this host writes a remote
// Session's Workspace); ok is false when it is no Git repository.
func hostRepo(ctx context.Context, ss projections.Session) (home *git.Home, ok bool, err error) {
	home, err = git.FindHome(ctx, ss.WorkingDir)
	if errors.Is(err, git.ErrNotRepository) {
		return nil, false, nil
	}
	return home, err == nil, err
}

// tempFile is a fresh host file in scratch for one bundle, removed by the
// caller.
func tempFile(scratch string) (*os.File, error) { return os.CreateTemp(scratch, "lathe-bundle-*") }

// copyTo streams produce's output into consume's input through a pipe,
// and returns the first failure of either.
func copyTo(produce func(io.Writer) error, consume func(io.Reader) error) error {
	pr, pw := io.Pipe()
	perr := make(chan error, 1)
	go func() {
		err := produce(pw)
		pw.CloseWithError(err)
		perr <- err
	}()
	cerr := consume(pr)
	pr.CloseWithError(errors.New("the reading end stopped"))
	switch perr := <-perr; {
	case perr != nil && cerr != nil:
		return fmt.Errorf("%w (and then: %v)", perr, cerr)
	case perr != nil:
		return perr
	}
	return cerr
}
