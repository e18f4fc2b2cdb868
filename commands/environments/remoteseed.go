package environments

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
	"lathe/runtime/sandbox"
)

// The code goes in: after Prepare, a remote sandbox's WorkingDir (created
// empty by the driver) becomes the Session's checkout. A Git Workspace
// arrives as one git bundle (made on the host while the engine prepares
// the container) streamed over one exec's stdin (HEAD plus the
// uncommitted changes, tracked and untracked, as Ways snapshots them; or
// the branch lathe/<session_id> when an earlier runtime brought work home
// there); any other Workspace as one tar stream.

// seedPrep is the host side of a Git seed (the snapshot and its bundle in
// a host file), made while the engine prepares the container.
type seedPrep struct {
	done   chan struct{}
	isRepo bool
	seed   git.Seed
	file   string
	err    error
}

// prepareSeed starts the host side of the seed of ss; nil under the local
// provider.
func (r remote) prepareSeed(ctx context.Context, ss projections.Session) *seedPrep {
	if !r.on() {
		return nil
	}
	p := &seedPrep{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		host, isRepo, err := hostRepo(ctx, ss)
		if p.isRepo, p.err = isRepo, err; err != nil || !isRepo {
			return
		}
		ref := "refs/lathe/seed/" + ss.ID
		var leaveOut []string // the daemon's config file: no sandbox reads it
		if rel, ok := r.c.ConfigIn(ss.WorkingDir); ok {
			leaveOut = append(leaveOut, rel)
		}
		seed, err := host.SeedCommit(ctx, ref, homeBranch(ss.ID), leaveOut...)
		if err != nil {
			p.err = fmt.Errorf("snapshot the Workspace: %w", err)
			return
		}
		defer func() {
			if err := host.DropRef(context.WithoutCancel(ctx), ref); err != nil {
				r.c.Log.Warn("drop a seed ref", "session", ss.ID, "err", err)
			}
		}()
		f, err := tempFile(r.c.Opts.Scratch())
		if err != nil {
			p.err = err
			return
		}
		p.file = f.Name()
		err = host.WriteBundle(ctx, ref, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			p.err = fmt.Errorf("bundle the Workspace: %w", err)
			return
		}
		p.seed = seed
	}()
	return p
}

// cleanup waits for the host side and removes its file.
func (p *seedPrep) cleanup() {
	if p == nil {
		return
	}
	<-p.done
	if p.file != "" {
		_ = os.Remove(p.file)
	}
}

// seed makes the clone in sb from p, over one exec; nothing under the
// local provider.
func (r remote) seed(ctx context.Context, ss projections.Session, sb sandbox.Sandbox, p *seedPrep) error {
	if !r.on() {
		return nil
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	switch {
	case p.err != nil:
		return p.err
	case !p.isRepo:
		skip, _ := r.c.ConfigIn(ss.WorkingDir) // the daemon's config file: no sandbox reads it
		return copyTree(ctx, ss.WorkingDir, skip, sb)
	}
	f, err := os.Open(p.file)
	if err != nil {
		return err
	}
	defer f.Close()
	return git.NewTransfer(sb, ss.WorkingDir).CloneBundle(ctx, f, p.seed)
}

// discard removes a sandbox that never became the Session's Ready runtime
// (a failed seed or setup) or that ended behind the daemon's back, and
// records, under the remote provider, whether the engine let it go.
func (r remote) discard(ctx context.Context, id string, sb sandbox.Sandbox) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
	err := sb.Teardown(rctx)
	cancel()
	if !r.on() {
		return
	}
	ss, ok := r.c.Store.Session(id)
	if !ok {
		return
	}
	if err != nil {
		err = r.retain(ctx, ss, sb.Generation(), fmt.Errorf("remove the runtime: %w", err))
	} else {
		err = r.c.Append(context.WithoutCancel(ctx), []journal.Event{events.New(id, events.RuntimeReleased{Generation: sb.Generation()})})
	}
	if err != nil {
		r.c.Log.Error("record a discarded runtime", "session", id, "err", err)
	}
}

// copyTree streams the directory root, but for its path skip (relative;
// "" for none), as a tar archive into one tar process in sb, which unpacks
// it at the same path.
func copyTree(ctx context.Context, root, skip string, sb sandbox.Sandbox) error {
	return copyTo(func(w io.Writer) error { return writeTar(root, skip, w) }, func(rd io.Reader) error {
		out := core.NewTail(TailBytes)
		p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"tar", "-x", "-f", "-", "--no-same-owner"}, Dir: root, Stdin: rd, Stdout: out, Stderr: out})
		if err != nil {
			return fmt.Errorf("start tar: %w", err)
		}
		code, err := p.Wait(ctx)
		if err == nil && code != 0 {
			err = fmt.Errorf("tar exited with code %d: %s", code, out.String())
		}
		return err
	})
}

// writeTar writes root's files, directories and symbolic links to w as a
// tar archive of relative paths; other kinds of file, and the path skip
// (relative; "" for none), are left out.
func writeTar(root, skip string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		if skip != "" && p == filepath.Join(root, skip) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case !info.Mode().IsRegular() && !info.IsDir():
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uname, hdr.Gname = filepath.ToSlash(rel), "", ""
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	return errors.Join(err, tw.Close())
}
