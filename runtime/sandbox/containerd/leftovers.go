package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/core/leases"
	"golang.org/x/sys/unix"

	"lathe/runtime/sandbox"
)

// What a killed daemon leaves in containerd besides its containers (which
// Attach hands to the caller), and how the next start of the same owner
// clears it (sweepLeftovers):
//
//   - exec FIFOs. The stdio of an exec goes through FIFOs that this process
//     reads. A daemon killed between an exec's create and its start leaves
//     the shim opening the stdout FIFO for writing with no reader to come:
//     containerd 1.6's shim holds its lock for that open's 30 s timeout, so
//     the whole task (state, kill, delete) hangs, and the restart's removal
//     of that sandbox timed out. Each process keeps its FIFOs in a folder of
//     its own under FIFOFolder(owner); the sweep opens every FIFO of another
//     process's folder for reading, which ends any such open at once, and
//     removes the folder, which nothing else would.
//   - leases. A container's new snapshots are held by a lease until the
//     container refers to them; a kill in between leaves the lease, and
//     with it the snapshot, for the lease's 24 hours. Leases carry the
//     owner and the process; the sweep deletes the owner's others, and
//     containerd's collector takes what they held.
//
// Only one daemon runs per owner at a time (the data dir's lock), so another
// process's leftovers of the same owner are a stopped process's. Without an
// Owner (tests, tools) nothing is swept and FIFOs stay in containerd's own
// folder.

// FIFORoot is the folder under which each owner's processes keep their exec
// FIFOs.
const FIFORoot = "/run/lathe/fifo"

// FIFOFolder is the folder of owner's processes' exec FIFOs. The owner is
// hashed, so that no owner names another folder (the sweep removes what it
// finds there).
func FIFOFolder(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(FIFORoot, hex.EncodeToString(sum[:12]))
}

// labelProcess names, on a lease, the process that made it.
const labelProcess = "lathe.process"

// fifoDir is the folder of this process's exec FIFOs; empty without an
// Owner (containerd's default folder).
func (d *Driver) fifoDir() string {
	if d.opts.Owner == "" {
		return ""
	}
	return filepath.Join(FIFOFolder(d.opts.Owner), sandbox.ProcessToken)
}

// removeFIFODir removes this process's FIFO folder, and the owner's, when
// they are empty: no exec is under way.
func (d *Driver) removeFIFODir() {
	if dir := d.fifoDir(); dir != "" {
		if os.Remove(dir) == nil {
			_ = os.Remove(filepath.Dir(dir))
		}
	}
}

// lease holds what a container's creation makes until the container refers
// to it; end it with the function returned.
func (d *Driver) lease(ctx context.Context) (context.Context, func(context.Context) error, error) {
	opts := []leases.Opt{leases.WithRandomID(), leases.WithExpiration(24 * time.Hour)}
	if d.opts.Owner != "" {
		opts = append(opts, leases.WithLabels(map[string]string{labelOwner: d.opts.Owner, labelProcess: sandbox.ProcessToken}))
	}
	return d.c.WithLease(ctx, opts...)
}

// sweepLeftovers clears a stopped process's exec FIFOs and leases (above).
func (d *Driver) sweepLeftovers(ctx context.Context) error {
	if d.opts.Owner == "" {
		return nil
	}
	held, err := sweepFIFOs(filepath.Dir(d.fifoDir()), sandbox.ProcessToken)
	if len(held) > 0 {
		go func() {
			select {
			case <-time.After(fifoHold):
			case <-d.ctx.Done():
			}
			for _, fd := range held {
				unix.Close(fd)
			}
		}()
	}
	return errors.Join(err, d.sweepLeases(ctx))
}

// fifoHold is how long the sweep holds a stopped process's FIFOs open for
// reading: as long as the shim would wait to open one.
const fifoHold = 30 * time.Second

// sweepFIFOs opens for reading every FIFO under root that is not in the
// folder keep, removes those folders, and answers the open descriptors. A
// shim blocked opening one for writing then goes on, and so does one that
// opens stdout, then stderr, while they are held; one that comes after the
// removal finds no FIFO and fails at once.
func sweepFIFOs(root, keep string) (held []int, err error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == keep {
			continue
		}
		dir := filepath.Join(root, e.Name())
		_ = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
			if err == nil && de.Type()&fs.ModeNamedPipe != 0 {
				if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
					held = append(held, fd)
				}
			}
			return nil
		})
		errs = append(errs, os.RemoveAll(dir))
	}
	return held, errors.Join(errs...)
}

// sweepLeases deletes the owner's leases made by another process.
func (d *Driver) sweepLeases(ctx context.Context) error {
	ctx = d.nsCtx(ctx)
	ls := d.c.LeasesService()
	found, err := ls.List(ctx, `labels."`+labelOwner+`"==`+strconv.Quote(d.opts.Owner))
	if err != nil {
		return d.wrap(err, "list leases")
	}
	for _, l := range found {
		if l.Labels[labelProcess] == sandbox.ProcessToken {
			continue
		}
		// Synchronous: the collector runs now, not at its next mutation
		// threshold.
		if err := ls.Delete(ctx, l, leases.SynchronousDelete); err != nil {
			return d.wrap(err, fmt.Sprintf("delete lease %s", l.ID))
		}
	}
	return nil
}
