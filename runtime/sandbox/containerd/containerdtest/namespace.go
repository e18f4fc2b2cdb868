package containerdtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/platforms"

	"lathe/runtime/sandbox/containerd"
)

// Image is the registry-free sandbox image `make containerd-up` imports
// into namespace "lathe".
const Image = "lathe.local/sandbox:bookworm"

// NoPython is Image without python3 (`build-image.sh nopython`), which
// `make containerd-up` imports beside it: the image of the tests that show
// nothing of Lathe needs Python in a sandbox.
const NoPython = "lathe.local/sandbox:nopython"

// Namespace readies containerd namespace ns for one test or benchmark and
// returns a client on it, closed when the test ends: containerd must answer
// (else the test is skipped, or fails when $CI is set), the test holds the
// namespace's file lock until it ends, and Image is copied into ns from
// namespace "lathe" and unpacked if it is missing. When the test ends, every
// managed container left in ns is removed, and a leak fails a test that
// otherwise passed: each test deletes what it creates.
//
// Why a test package has a namespace of its own: a daemon owns its
// containerd namespace, removing at start every managed container that no
// open Session of its own journal claims. So tests that run a daemon never
// use the operator's namespace "lathe", where the driver suite and other
// test binaries' daemons run, nor another test package's namespace; each
// package names its own. The file lock makes a concurrent run of the same
// package wait, and the image is imported into each namespace once per
// machine.
func Namespace(t testing.TB, ns string) *client.Client {
	t.Helper()
	addr := Address()
	unreachable := func(err error) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("containerd at %s: %v (run `make containerd-up`)", addr, err)
		}
		t.Skipf("no containerd at %s (run `make containerd-up`; set CI to fail instead): %v", addr, err)
	}
	if _, err := os.Stat(strings.TrimPrefix(addr, "unix://")); err != nil {
		unreachable(err)
	}
	cl, err := client.New(addr, client.WithDefaultNamespace(ns), client.WithTimeout(2*time.Second))
	if err != nil {
		unreachable(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.Version(ctx); err != nil {
		unreachable(err)
	}

	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "lathe-test-ns-"+ns+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock namespace %s: %v", ns, err)
	}
	t.Cleanup(func() { lock.Close() }) // releases the lock, after the sweep
	t.Cleanup(func() { sweep(t, ns) })

	if err := ensureImage(ctx, cl, ns, Image); err != nil {
		t.Fatalf("sandbox image in namespace %s: %v", ns, err)
	}
	return cl
}

// AddImage copies image (NoPython, say) from namespace "lathe" into the
// namespace of cl, which Namespace readied, and unpacks it, unless it is
// there already.
func AddImage(t testing.TB, cl *client.Client, image string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ensureImage(ctx, cl, cl.DefaultNamespace(), image); err != nil {
		t.Fatalf("image %s in namespace %s: %v", image, cl.DefaultNamespace(), err)
	}
}

// sweep removes every managed container left in ns, failing a test that
// otherwise passed.
func sweep(t testing.TB, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := containerd.New(ctx, containerd.Options{Address: Address(), Namespace: ns})
	if err != nil {
		t.Errorf("sweep namespace %s: %v", ns, err)
		return
	}
	defer drv.Close()
	left, err := drv.Attach(ctx)
	if err != nil {
		t.Errorf("sweep namespace %s: %v", ns, err)
		return
	}
	for _, sb := range left {
		if !t.Failed() {
			t.Errorf("leaked sandbox of session %s generation %d", sb.SessionID(), sb.Generation())
		}
		if err := sb.Teardown(ctx); err != nil {
			t.Errorf("sweep: %v", err)
		}
	}
}

// ensureImage copies image from namespace "lathe" into ns and unpacks it,
// unless it is there already.
func ensureImage(ctx context.Context, cl *client.Client, ns, image string) error {
	dst := namespaces.WithNamespace(ctx, ns)
	if img, err := cl.GetImage(dst, image); err == nil {
		if ok, err := img.IsUnpacked(dst, containerd.DefaultSnapshotter); err == nil && ok {
			return nil
		}
		return img.Unpack(dst, containerd.DefaultSnapshotter)
	}
	src := namespaces.WithNamespace(ctx, containerd.DefaultNamespace)
	if _, err := cl.ImageService().Get(src, image); err != nil {
		return fmt.Errorf("%s is not in namespace %s either (run `make containerd-up`): %w", image, containerd.DefaultNamespace, err)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(cl.Export(src, pw, archive.WithImage(cl.ImageService(), image), archive.WithPlatform(platforms.Default())))
	}()
	imgs, err := cl.Import(dst, pr, client.WithImportPlatform(platforms.Default()))
	pr.Close()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	for _, img := range imgs {
		if img.Name == image {
			return client.NewImageWithPlatform(cl, img, platforms.Default()).Unpack(dst, containerd.DefaultSnapshotter)
		}
	}
	return fmt.Errorf("import did not register %s", image)
}

// SessionContainers lists, sorted, the IDs of a Session's containers in the
// client's namespace.
func SessionContainers(t testing.TB, cl *client.Client, sessionID string) []string {
	t.Helper()
	return containers(t, cl, `labels."lathe.session"==`+sessionID)
}

// ManagedContainers lists, sorted, the IDs of every managed container in the
// client's namespace.
func ManagedContainers(t testing.TB, cl *client.Client) []string {
	t.Helper()
	return containers(t, cl, `labels."lathe.managed"=="true"`)
}

func containers(t testing.TB, cl *client.Client, filter string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctrs, err := cl.Containers(ctx, filter)
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	var ids []string
	for _, c := range ctrs {
		ids = append(ids, c.ID())
	}
	slices.Sort(ids)
	return ids
}

// Kill kills the main task of container id with SIGKILL, as an operator's
// `kill -9` would, behind the back of whoever runs it.
func Kill(ctx context.Context, cl *client.Client, id string) error {
	ctr, err := cl.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("load container: %w", err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return fmt.Errorf("task: %w", err)
	}
	if err := syscall.Kill(int(task.Pid()), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %d: %w", task.Pid(), err)
	}
	return nil
}
