package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"time"

	"lathe/runtime/sandbox"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// A Spec.Tools entry reaches the engine as the helper does: a named volume
// per owner and tool name, filled once from the host directory by a
// container that is never started (the engine's archive API writes into
// its volume), and mounted read-only at the tool's path in every sandbox.
// The fill's archive ends with toolDone, so a volume holds it only when
// the whole tree arrived; one without it (an interrupted fill) is filled
// again over what it has.

// labelTool holds the tool name a volume is filled with.
const labelTool = "lathe.tool"

// toolDone is the file the last entry of a fill writes at a tool's root.
const toolDone = ".lathe-tool-complete"

// volumeUnsafe is what a volume name cannot hold.
var volumeUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// toolVolume is the volume that holds tool name for this driver's owner: a
// readable form of the name and a hash of it (two names never share one).
func (d *Driver) toolVolume(name string) string {
	owner := sha256.Sum256([]byte(d.opts.Owner))
	sum := sha256.Sum256([]byte(name))
	readable := strings.Trim(volumeUnsafe.ReplaceAllString(name, "_"), "_.-")
	return "lathe-tool-" + hex.EncodeToString(owner[:4]) + "-" + readable[:min(len(readable), 64)] + "-" + hex.EncodeToString(sum[:6])
}

// toolMounts are the read-only mounts of spec's tools' volumes.
func (d *Driver) toolMounts(tools []sandbox.Tool) []mount.Mount {
	out := make([]mount.Mount, 0, len(tools))
	for _, t := range tools {
		out = append(out, mount.Mount{
			Type: mount.TypeVolume, Source: d.toolVolume(t.Name), Target: t.Dir, ReadOnly: true,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true, Labels: map[string]string{LabelDaemon: d.opts.Owner, labelTool: t.Name}},
		})
	}
	return out
}

// ensureTools fills the volume of each of the created container id's
// tools that is not complete.
func (d *Driver) ensureTools(ctx context.Context, id, image string, tools []sandbox.Tool) error {
	if len(tools) == 0 {
		return nil
	}
	d.toolMu.Lock()
	defer d.toolMu.Unlock()
	for _, t := range tools {
		cctx, cancel := d.call(ctx)
		_, err := d.c.ContainerStatPath(cctx, id, client.ContainerStatPathOptions{Path: t.Dir + "/" + toolDone})
		cancel()
		switch {
		case err == nil:
			continue
		case !errdefs.IsNotFound(err):
			return d.wrap(ctx, err, "look for tool "+t.Name+" in "+id)
		}
		if err := d.fillTool(ctx, t, image); err != nil {
			return err
		}
	}
	return nil
}

// fillTool copies t's directory into its volume through a container of
// image that mounts it read-write and never runs.
func (d *Driver) fillTool(ctx context.Context, t sandbox.Tool, image string) error {
	vol := d.toolVolume(t.Name)
	name := vol + "-fill-" + randomHex(4)
	cctx, cancel := d.slowCall(ctx)
	res, err := d.c.ContainerCreate(cctx, client.ContainerCreateOptions{Name: name,
		Config: &container.Config{
			Image: image, Entrypoint: []string{}, Cmd: []string{"/nonexistent"}, User: "0",
			Labels: map[string]string{LabelDaemon: d.opts.Owner, labelTool: t.Name},
		},
		HostConfig: &container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"},
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: t.Dir,
				VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{LabelDaemon: d.opts.Owner, labelTool: t.Name}}}}},
	})
	cancel()
	if err != nil {
		return d.wrap(ctx, err, "create "+name)
	}
	defer d.forceRemove(ctx, res.ID)
	sctx, cancel := d.slowCall(ctx)
	defer cancel()
	err = d.copyArchive(sctx, res.ID, t.Dir, func(tw *tar.Writer) error {
		if err := tw.AddFS(os.DirFS(t.Dir)); err != nil {
			return err
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: toolDone, Mode: 0o444, ModTime: time.Unix(0, 0)})
	})
	return d.wrap(ctx, err, "copy tool "+t.Name+" into its volume")
}
