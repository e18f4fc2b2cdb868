package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/image-spec/identity"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// remappedSnapshot prepares the root filesystem snapshot key for a sandbox
// of img under the ID mappings: a writable layer on a copy of the image whose
// files are owned by the host IDs that the image's IDs map to, so that root
// inside owns what the image's root owns.
//
// The copy is made once per image and mapping, and only files whose owner
// changes are touched: overlayfs copies a file up whole when its owner
// changes, so with container root mapped to host root (a root-owned
// Workspace) it costs almost nothing, and with another owner it copies the
// image once (seconds). The image keeps a reference to its copies, so that
// containerd's garbage collector keeps them while the image exists.
//
// Each remap works on a key of its own, so that a daemon that dies halfway
// leaves nothing in the way (its lease frees the leftover); when two daemons
// remap the same copy at once, the first commit wins and the other's work is
// dropped. ctx must carry a lease that holds the snapshots until a container
// or the image refers to them.
func (d *Driver) remappedSnapshot(ctx context.Context, key string, img client.Image, uidMap, gidMap []specs.LinuxIDMapping) error {
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return err
	}
	parent := identity.ChainID(diffIDs).String()
	b, _ := json.Marshal([]any{parent, uidMap, gidMap})
	sum := sha256.Sum256(b)
	base := "lathe-remapped-" + hex.EncodeToString(sum[:16])

	sn := d.c.SnapshotService(d.opts.Snapshotter)
	if _, err := sn.Stat(ctx, base); errdefs.IsNotFound(err) {
		work := base + "-remap-" + execID()
		mounts, err := sn.Prepare(ctx, work, parent)
		if err != nil {
			return err
		}
		if err := mount.WithTempMount(ctx, mounts, func(root string) error {
			return chownTree(root, uidMap, gidMap)
		}); err != nil {
			sn.Remove(ctx, work)
			return fmt.Errorf("remap the image's owners: %w", err)
		}
		if err := sn.Commit(ctx, base, work); err != nil {
			sn.Remove(ctx, work)
			if !errdefs.IsAlreadyExists(err) {
				return err
			}
		}
	} else if err != nil {
		return err
	}
	if err := d.keep(ctx, img, base); err != nil {
		return err
	}
	_, err = sn.Prepare(ctx, key, base)
	return err
}

// keep labels img with a garbage-collection reference to snapshot name.
func (d *Driver) keep(ctx context.Context, img client.Image, name string) error {
	label := "containerd.io/gc.ref.snapshot." + d.opts.Snapshotter + "/" + name
	meta := img.Metadata()
	if meta.Labels[label] == name {
		return nil
	}
	meta.Labels = map[string]string{label: name}
	_, err := d.c.ImageService().Update(ctx, meta, "labels."+label)
	return err
}

// chownTree gives every file under root the host owner its IDs map to.
// Changing the owner clears set-id bits, which the image's own files keep.
// A hard link already remapped through another name is left alone; one that
// overlayfs broke apart when it copied the other name up is remapped too.
func chownTree(root string, uidMap, gidMap []specs.LinuxIDMapping) error {
	type inode struct{ dev, ino uint64 }
	type owner struct{ uid, gid uint32 }
	done := map[inode]owner{}
	return filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		in := inode{uint64(st.Dev), st.Ino}
		if o, ok := done[in]; ok && o == (owner{st.Uid, st.Gid}) {
			return nil
		}
		uid, err := toHost(st.Uid, uidMap)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		gid, err := toHost(st.Gid, gidMap)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if uid == st.Uid && gid == st.Gid {
			return nil
		}
		if err := os.Lchown(path, int(uid), int(gid)); err != nil {
			return err
		}
		if st.Nlink > 1 {
			done[in] = owner{uid, gid}
		}
		if m := fi.Mode(); m&fs.ModeSymlink == 0 && m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			return os.Chmod(path, m)
		}
		return nil
	})
}

// toHost maps a container ID to the host.
func toHost(id uint32, m []specs.LinuxIDMapping) (uint32, error) {
	for _, r := range m {
		if id >= r.ContainerID && id-r.ContainerID < r.Size {
			return r.HostID + id - r.ContainerID, nil
		}
	}
	return 0, fmt.Errorf("ID %d is outside the sandbox's mapping", id)
}
