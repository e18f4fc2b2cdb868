package environments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/blobs"
	"lathe/runtime/sandbox"
)

// Rescuing a clone: when its work cannot be brought home although the
// engine answers (a host fault: host git refusing the bundle, an unsafe
// repository, a full disk), the clone's WorkingDir, .git and uncommitted
// changes included, is streamed out of the sandbox as one tar archive
// over one exec's stdout into the blob store, bounded by MaxRescue, and
// journaled (WorkRescued) before the runtime is removed. Only a rescue
// that fails too (the engine went, the archive is over the bound, the
// disk is full) leaves the runtime retained. The archive is the
// sandbox's: Lathe never extracts it; the operator does, into an empty
// folder.

// DefaultMaxRescue bounds one rescue archive when Options.MaxRescue is 0.
const DefaultMaxRescue int64 = 4 << 30

// rescueTimeout bounds one rescue.
const rescueTimeout = 10 * time.Minute

// rescue keeps the clone of ss as a tar archive in the blob store and
// journals it, with cause (why its work did not come home) as evidence.
func (r remote) rescue(ctx context.Context, ss projections.Session, sb sandbox.Sandbox, gen uint64, cause error) error {
	store := r.c.Opts.Blobs
	if store == nil {
		return errors.New("this daemon has no blob store to keep it in")
	}
	limit := r.c.Opts.MaxRescue
	if limit <= 0 {
		limit = DefaultMaxRescue
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rescueTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	tarred := make(chan error, 1)
	go func() {
		err := tarOut(ctx, sb, ss.WorkingDir, pw)
		pw.CloseWithError(err)
		tarred <- err
	}()
	hash, size, err := store.Put(pr, limit)
	if err != nil {
		cancel() // a tar the store stopped reading ends here
		pr.CloseWithError(err)
	}
	terr := <-tarred
	switch {
	case errors.Is(err, blobs.ErrTooLarge):
		return fmt.Errorf("the clone's working tree, .git included, is over the rescue limit of %d bytes: %w", limit, err)
	case terr != nil:
		return fmt.Errorf("stream the clone's working tree out: %w", terr)
	case err != nil:
		return fmt.Errorf("store the clone's working tree: %w", err)
	}
	path, err := store.Path(hash)
	if err != nil {
		return err
	}
	ev := events.Evidence{
		Error: fmt.Sprintf("the clone's work on the Docker engine at %s could not be brought home: %v", r.host(), cause),
		Fix: fmt.Sprintf("its working tree, .git and uncommitted changes included, is the tar archive %s on the daemon's host (sha256 %s, %d bytes): extract it into an empty folder (mkdir rescue && tar -xf %s -C rescue) and take the work from there",
			path, hash, size, path),
	}
	r.c.Log.Warn("rescue a remote clone", "session", ss.ID, "runtime", ss.Environment.RuntimeID, "sha256", hash, "size", size, "err", cause)
	return r.c.Append(context.WithoutCancel(ctx), []journal.Event{events.New(ss.ID, events.WorkRescued{
		Generation: gen, SHA256: hash, Size: size, Path: path, Evidence: ev})})
}

// tarOut streams dir in sb to w as one tar archive.
func tarOut(ctx context.Context, sb sandbox.Sandbox, dir string, w io.Writer) error {
	errb := core.NewTail(4 << 10)
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"tar", "-cf", "-", "-C", dir, "."}, Dir: dir, Stdout: w, Stderr: errb})
	if err != nil {
		return fmt.Errorf("start tar: %w", err)
	}
	code, err := p.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = p.Signal(kctx, syscall.SIGKILL)
		cancel()
	}
	switch {
	case err != nil:
		return fmt.Errorf("tar: %w", err)
	case code != 0:
		return fmt.Errorf("tar exited %d: %s", code, strings.TrimSpace(errb.String()))
	}
	return nil
}
