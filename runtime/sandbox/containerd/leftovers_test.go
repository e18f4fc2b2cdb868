package containerd_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// deadIO is the stdio of an exec whose reader was killed: FIFOs that nobody
// opens.
type deadIO struct{ fifos *cio.FIFOSet }

func (d deadIO) Config() cio.Config { return d.fifos.Config }
func (deadIO) Cancel()              {}
func (deadIO) Wait()                {}
func (d deadIO) Close() error       { return nil }

// TestLeftoversOfAKilledDaemon: what a daemon killed mid-work leaves in
// containerd is cleared by the next start of the same owner. An exec
// started whose stdout reader is gone holds the shim (and so the removal
// of its sandbox) for 30 s; a lease held the snapshot of a create cut
// before its container for 24 hours; the FIFOs' folder stayed for good.
func TestLeftoversOfAKilledDaemon(t *testing.T) {
	b := make([]byte, 6)
	rand.Read(b)
	owner := "test-" + hex.EncodeToString(b)
	t.Cleanup(func() { os.RemoveAll(containerd.FIFOFolder(owner)) })
	opts := containerd.Options{Address: containerdtest.Address(), Owner: owner}
	ctx := sandboxtest.Context(t, 2*time.Minute)
	d1, err := containerd.New(ctx, opts)
	if err != nil {
		t.Fatalf("containerd: %v", err)
	}
	t.Cleanup(func() { d1.Close() }) // after the sandbox's removal
	spec := sandboxtest.NewSpec(t)
	sandboxtest.Prepare(t, d1, spec)

	// The previous process's leftovers, made by hand.
	cl, err := client.New(containerdtest.Address(), client.WithDefaultNamespace(containerd.DefaultNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctr, err := cl.LoadContainer(ctx, containerd.ContainerID(spec.SessionID, spec.Generation))
	if err != nil {
		t.Fatal(err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ctr.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pspec := *cs.Process
	pspec.Args = []string{"echo", "nobody reads this"}
	previous := filepath.Join(containerd.FIFOFolder(owner), "previous")
	fifos, err := cio.NewFIFOSetInDir(previous, "exec-stuck", false)
	if err != nil {
		t.Fatal(err)
	}
	fifos.Stdin = ""
	for _, p := range []string{fifos.Stdout, fifos.Stderr} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	proc, err := task.Exec(ctx, "exec-stuck", &pspec, func(string) (cio.IO, error) { return deadIO{fifos}, nil })
	if err != nil {
		t.Fatal(err)
	}
	// The client goes mid-start: a cancel, unlike a deadline, does not
	// reach the shim, which goes on opening the stdout FIFO.
	gone, cancel := context.WithCancel(ctx)
	time.AfterFunc(time.Second, cancel)
	err = proc.Start(gone)
	t.Logf("the exec's start: %v", err)
	l, err := cl.LeasesService().Create(ctx, leases.WithRandomID(),
		leases.WithLabels(map[string]string{containerd.LabelOwner: owner, containerd.LabelProcess: "previous"}))
	if err != nil {
		t.Fatal(err)
	}
	snap := "lathe-test-leftover-" + hex.EncodeToString(b)
	sn := cl.SnapshotService(containerd.DefaultSnapshotter)
	if _, err := sn.Prepare(leases.WithLease(ctx, l.ID), snap, ""); err != nil {
		t.Fatal(err)
	}

	// The next start of the owner.
	d2, err := containerd.New(ctx, opts)
	if err != nil {
		t.Fatalf("the next start: %v", err)
	}
	defer d2.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d2.Remove(rctx, spec.SessionID, spec.Generation); err != nil {
		t.Errorf("the sandbox of the stuck exec: %v", err)
	}
	if _, err := os.Stat(previous); !os.IsNotExist(err) {
		t.Errorf("the previous process's FIFOs stayed: %v", err)
	}
	if found, err := cl.LeasesService().List(ctx, `id==`+l.ID); err != nil || len(found) != 0 {
		t.Errorf("the previous process's lease stayed: %v %v", found, err)
	}
	if _, err := polltest.Poll(func() error {
		if _, err := sn.Stat(ctx, snap); !errdefs.IsNotFound(err) {
			return fmt.Errorf("stat: %v", err)
		}
		return nil
	}, polltest.Within(10*time.Second)); err != nil {
		t.Errorf("the snapshot the lease held stayed: %v", err)
	}
}
