// Package containerd is the local sandbox provider: one containerd container
// per Session environment generation, driven through the containerd v2 Go
// client.
//
// Each container runs a tiny init as its main task and gets its own network
// namespace, the Session's Workspace bind-mounted read-write at the same path
// inside, the Spec's memory, CPU and pids limits, and the privilege boundary
// of security.go: a user namespace that maps container root to the
// Workspace's owner, a narrow capability set and a seccomp profile. With
// network "none" the namespace has loopback only; with "host-egress" it also
// has an eth0 on a host bridge, with outbound traffic masqueraded (see
// network.go). Commands
// run as extra processes of that task (task.Exec). Containers carry the labels
// lathe.managed, lathe.session and lathe.generation, so that a restarted daemon
// finds them again with Attach, and lathe.security, so that it never reuses
// one built under an older boundary.
package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/helper"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Defaults for Options.
const (
	DefaultAddress     = "/run/containerd/containerd.sock"
	DefaultNamespace   = "lathe"
	DefaultSnapshotter = "overlayfs"
	DefaultImage       = "lathe.local/sandbox:bookworm"
	DefaultTimeout     = 5 * time.Second
)

// Container labels.
const (
	labelManaged    = "lathe.managed"
	labelOwner      = "lathe.owner" // the daemon (data dir) that owns the sandbox
	labelSession    = "lathe.session"
	labelGeneration = "lathe.generation"
	labelSpec       = "lathe.spec" // hash of the normalised Spec, for idempotent Prepare
	// labelSecurity (security.go) holds the privilege boundary's generation.
)

// initScript is the main task: it idles and, as PID 1 of the sandbox, reaps
// the orphans of exec'd commands (the shell's wait reaps any child). SIGTERM
// stops it cleanly.
const initScript = `trap 'exit 0' TERM; while :; do sleep 2147483647 & wait $!; done`

// Options configure a Driver. Zero values take the defaults above.
type Options struct {
	Address     string
	Namespace   string
	Snapshotter string
	// DefaultImage is used when a Spec names no image.
	DefaultImage string
	// Owner names the daemon whose sandboxes these are. Attach sees only
	// the owner's sandboxes, so daemons on other data dirs that share the
	// namespace never reattach or remove each other's. Empty: unlabelled.
	Owner string
	// Timeout bounds connecting to containerd.
	Timeout time.Duration
	// HelperDir is a host directory that holds the sandbox helper as
	// "lathe" (helper.Stage), a static build of lathe: every sandbox
	// mounts it read-only at helper.Dir, so what is there when a process
	// starts is what runs. Empty: no helper (Lathe's file tools, tool-run
	// kills and Ways restores cannot run in the sandboxes).
	HelperDir string
	// Bridge and Subnet serve host-egress sandboxes: the host bridge, created
	// on first use, and the IPv4 subnet whose first address it takes as the
	// sandboxes' gateway. Defaults: DefaultBridge, DefaultSubnet.
	Bridge string
	Subnet string
}

// Driver is a sandbox.Driver on containerd.
type Driver struct {
	c    *client.Client
	opts Options
	net  *egress

	// ctx lives as long as the Driver: it carries the task watchers, which
	// must outlive the requests that started them.
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	live map[string]*Sandbox // by container ID
	// removing holds, by container ID, the removal under way: a second
	// Remove of the same container waits for it (containerd answers two
	// concurrent task deletes with an error for one).
	removing map[string]chan struct{}

	// snapMu serialises preparing root filesystems: the first one of an
	// image and Workspace owner remaps a copy of the image, which the others
	// wait for rather than make again.
	snapMu sync.Mutex
}

var _ sandbox.Driver = (*Driver)(nil)

// New connects to containerd and checks that it answers. An unreachable
// containerd is an error wrapping sandbox.ErrUnavailable, returned within
// Options.Timeout.
func New(ctx context.Context, opts Options) (*Driver, error) {
	if opts.Address == "" {
		opts.Address = DefaultAddress
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Snapshotter == "" {
		opts.Snapshotter = DefaultSnapshotter
	}
	if opts.DefaultImage == "" {
		opts.DefaultImage = DefaultImage
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Bridge == "" {
		opts.Bridge = DefaultBridge
	}
	if opts.Subnet == "" {
		opts.Subnet = DefaultSubnet
	}
	egress, err := newEgress(opts.Bridge, opts.Subnet)
	if err != nil {
		return nil, err
	}
	if opts.HelperDir != "" {
		b, err := helper.Open(filepath.Join(opts.HelperDir, "lathe"))
		if err != nil {
			return nil, err
		}
		if b.Arch != runtime.GOARCH {
			return nil, fmt.Errorf("%w: %s is built for %s, and this machine's sandboxes run %s", helper.ErrBinary, b.Path, b.Arch, runtime.GOARCH)
		}
	}
	// containerd's dialer waits for a missing socket to appear: fail now.
	if path, ok := strings.CutPrefix(opts.Address, "unix://"); ok || filepath.IsAbs(opts.Address) {
		if !ok {
			path = opts.Address
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%w: containerd at %s: %w", sandbox.ErrUnavailable, opts.Address, err)
		}
	}
	c, err := client.New(opts.Address, client.WithDefaultNamespace(opts.Namespace), client.WithTimeout(opts.Timeout))
	if err != nil {
		return nil, fmt.Errorf("%w: containerd at %s: %w", sandbox.ErrUnavailable, opts.Address, err)
	}
	// client.New does not connect: ask for the version to know it answers.
	pctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if _, err := c.Version(pctx); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: containerd at %s: %w", sandbox.ErrUnavailable, opts.Address, err)
	}
	d := &Driver{c: c, opts: opts, net: egress, live: map[string]*Sandbox{}, removing: map[string]chan struct{}{}}
	d.ctx, d.cancel = context.WithCancel(namespaces.WithNamespace(context.Background(), opts.Namespace))
	sctx, scancel := context.WithTimeout(ctx, opts.Timeout)
	defer scancel()
	if err := d.sweepLeftovers(sctx); err != nil {
		d.cancel()
		c.Close()
		return nil, fmt.Errorf("clear what a stopped daemon left in containerd: %w", err)
	}
	return d, nil
}

// Close stops watching sandboxes and disconnects. The containers keep
// running; a new Driver finds them with Attach.
func (d *Driver) Close() error {
	d.cancel()
	d.mu.Lock()
	for id, s := range d.live {
		s.closeNetns()
		delete(d.live, id)
	}
	d.mu.Unlock()
	d.removeFIFODir()
	return d.c.Close()
}

// ContainerID names the container of a Session environment generation.
func ContainerID(sessionID string, generation uint64) string {
	return fmt.Sprintf("lathe-%s-g%d", sessionID, generation)
}

// Prepare creates and starts the container for spec's generation. A running
// container of that generation with the same spec is returned as it is; one
// whose main task has stopped is replaced.
func (d *Driver) Prepare(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	ctx = d.nsCtx(ctx)
	if err := d.normalise(&spec); err != nil {
		return nil, err
	}
	id := ContainerID(spec.SessionID, spec.Generation)
	hash := specHash(spec)

	ctr, err := d.c.LoadContainer(ctx, id)
	switch {
	case err == nil:
		labels, err := ctr.Labels(ctx)
		if err != nil {
			return nil, d.wrap(err, "read labels of "+id)
		}
		if labels[labelSecurity] != securityGeneration {
			// Built under an older privilege boundary: never kept.
			if err := d.Remove(ctx, spec.SessionID, spec.Generation); err != nil {
				return nil, err
			}
			return d.create(ctx, id, hash, spec)
		}
		if labels[labelSpec] != hash {
			return nil, fmt.Errorf("prepare %s: generation %d of session %s already exists with a different spec", id, spec.Generation, spec.SessionID)
		}
		s, err := d.load(ctx, ctr, labels, spec.SessionID, spec.Generation)
		if err != nil {
			return nil, err
		}
		if !s.exited() {
			return s, nil
		}
		if err := d.Remove(ctx, spec.SessionID, spec.Generation); err != nil {
			return nil, err
		}
	case !errdefs.IsNotFound(err):
		return nil, d.wrap(err, "look up "+id)
	}
	return d.create(ctx, id, hash, spec)
}

// normalise checks spec and fills in its defaults.
func (d *Driver) normalise(spec *sandbox.Spec) error {
	if err := spec.Check(); err != nil {
		return err
	}
	if err := identifiers.Validate(ContainerID(spec.SessionID, spec.Generation)); err != nil {
		return fmt.Errorf("session ID %q cannot name a sandbox: %w", spec.SessionID, err)
	}
	if spec.Source != "" && (!filepath.IsAbs(spec.Source) || filepath.Clean(spec.Source) != spec.Source || spec.Source == "/") {
		return fmt.Errorf("sandbox source dir %q must be a clean absolute path other than /", spec.Source)
	}
	for _, p := range spec.Masked {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("sandbox masked path %q must be a clean absolute path other than /", p)
		}
	}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Path) || filepath.Clean(m.Path) != m.Path || m.Path == "/" {
			return fmt.Errorf("sandbox mount %q must be a clean absolute path other than /", m.Path)
		}
		if _, err := os.Stat(m.Path); err != nil {
			return fmt.Errorf("sandbox mount: %w", err)
		}
	}
	for _, t := range spec.Tools {
		if fi, err := os.Stat(t.Dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("sandbox tool %s: %q is not a directory", t.Name, t.Dir)
		}
	}
	if fi, err := os.Stat(hostDir(*spec)); err != nil {
		return fmt.Errorf("sandbox working dir: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("sandbox working dir %q is not a directory", hostDir(*spec))
	}
	if spec.Image == "" {
		spec.Image = d.opts.DefaultImage
	}
	named, err := reference.ParseDockerRef(spec.Image)
	if err != nil {
		return fmt.Errorf("%w: invalid image reference %q: %w", sandbox.ErrImage, spec.Image, err)
	}
	spec.Image = named.String()
	return nil
}

// hostDir is the host directory mounted at the spec's working dir.
func hostDir(spec sandbox.Spec) string {
	if spec.Source != "" {
		return spec.Source
	}
	return spec.WorkingDir
}

// extraMounts binds Spec.Mounts, each at its own path.
func extraMounts(ms []sandbox.Mount) []specs.Mount {
	out := make([]specs.Mount, 0, len(ms))
	for _, m := range ms {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		out = append(out, specs.Mount{Type: "bind", Source: m.Path, Destination: m.Path, Options: []string{"rbind", mode}})
	}
	return out
}

// toolMounts binds Spec.Tools, each read-only at its own path.
func toolMounts(tools []sandbox.Tool) []specs.Mount {
	out := make([]specs.Mount, 0, len(tools))
	for _, t := range tools {
		out = append(out, specs.Mount{Type: "bind", Source: t.Dir, Destination: t.Dir, Options: []string{"rbind", "ro", "nodev"}})
	}
	return out
}

// withMasked adds paths to the spec's masked paths (runc binds /dev/null
// over a file, a read-only tmpfs over a directory, after every mount),
// keeping the defaults (/proc/kcore and the like) oci.WithMaskedPaths
// would replace.
func withMasked(paths []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if len(paths) > 0 {
			s.Linux.MaskedPaths = append(s.Linux.MaskedPaths, paths...)
		}
		return nil
	}
}

// specHash identifies a normalised spec.
func specHash(spec sandbox.Spec) string {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

func (d *Driver) create(ctx context.Context, id, hash string, spec sandbox.Spec) (sandbox.Sandbox, error) {
	img, err := d.image(ctx, spec.Image)
	if err != nil {
		return nil, err
	}
	uid, gid, err := workspaceOwner(hostDir(spec))
	if err != nil {
		return nil, err
	}
	uidMap, err := idMappings(uid)
	if err != nil {
		return nil, err
	}
	gidMap, err := idMappings(gid)
	if err != nil {
		return nil, err
	}
	specOpts := []oci.SpecOpts{
		withSecurity(uidMap, gidMap),
		oci.WithImageConfig(img),
		oci.WithHostname("sandbox"),
		oci.WithProcessArgs("/bin/sh", "-c", initScript),
		oci.WithProcessCwd(spec.WorkingDir),
		oci.WithEnv(append(slices.Clone(sandbox.DefaultEnv), spec.Env...)), // defaults first: Spec.Env wins
		oci.WithMounts(append([]specs.Mount{{
			Type: "bind", Source: hostDir(spec), Destination: spec.WorkingDir,
			Options: []string{"rbind", "rw"},
		}}, append(extraMounts(spec.Mounts), toolMounts(spec.Tools)...)...)),
		withMasked(spec.Masked),
	}
	if d.opts.HelperDir != "" {
		specOpts = append(specOpts, oci.WithMounts([]specs.Mount{{
			Type: "bind", Source: d.opts.HelperDir, Destination: helper.Dir,
			Options: []string{"rbind", "ro", "nosuid", "nodev"},
		}}))
	}
	if l := spec.Limits; l.MemoryMB > 0 {
		specOpts = append(specOpts, oci.WithMemoryLimit(uint64(l.MemoryMB)<<20))
	}
	if l := spec.Limits; l.CPUs > 0 {
		const period = 100000
		specOpts = append(specOpts, oci.WithCPUCFS(int64(l.CPUs*period), period))
	}
	if l := spec.Limits; l.PIDs > 0 {
		specOpts = append(specOpts, oci.WithPidsLimit(int64(l.PIDs)))
	}
	labels := map[string]string{
		labelManaged:    "true",
		labelSession:    spec.SessionID,
		labelGeneration: strconv.FormatUint(spec.Generation, 10),
		labelSpec:       hash,
		labelSecurity:   securityGeneration,
	}
	var addr netip.Addr
	if spec.Network == sandbox.NetworkHostEgress {
		// The container keeps runc's fresh network namespace (loopback only);
		// start adds the veth before the task runs.
		if err := d.net.ensure(ctx); err != nil {
			return nil, err
		}
		if addr, err = d.net.pick(); err != nil {
			return nil, err
		}
		defer d.net.release(addr)
		labels[labelAddr] = addr.String()
		if rc := resolvConf(); rc != "" {
			specOpts = append(specOpts, oci.WithMounts([]specs.Mount{{
				Type: "bind", Source: rc, Destination: "/etc/resolv.conf",
				Options: []string{"rbind", "ro"},
			}}))
		}
	}
	ctr, err := d.newContainer(ctx, id, img, uidMap, gidMap,
		client.WithImage(img),
		client.WithNewSpec(specOpts...),
		client.WithContainerLabels(d.labels(labels)),
	)
	if err != nil {
		return nil, d.wrap(err, "create container "+id)
	}
	s, err := d.start(ctx, ctr, spec, addr)
	if errors.Is(err, sandbox.ErrUnavailable) {
		// No way to clean up: the next Attach reports the leftover for the
		// caller to remove.
		return nil, err
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.Timeout)
		defer cancel()
		if t, terr := ctr.Task(cctx, nil); terr == nil {
			t.Delete(cctx, client.WithProcessKill)
		}
		ctr.Delete(cctx, client.WithSnapshotCleanup)
		if addr.IsValid() {
			d.net.delete(cctx, id, netip.Addr{})
		}
		return nil, err
	}
	return s, nil
}

// newContainer creates container id on a root filesystem of img remapped to
// the sandbox's ID mappings (remappedSnapshot).
func (d *Driver) newContainer(ctx context.Context, id string, img client.Image, uidMap, gidMap []specs.LinuxIDMapping, opts ...client.NewContainerOpts) (client.Container, error) {
	// The lease holds the new snapshots until the container refers to them.
	ctx, done, err := d.lease(ctx)
	if err != nil {
		return nil, err
	}
	defer done(context.WithoutCancel(ctx))
	d.snapMu.Lock()
	err = d.remappedSnapshot(ctx, id, img, uidMap, gidMap)
	d.snapMu.Unlock()
	if err != nil {
		return nil, err
	}
	opts = append([]client.NewContainerOpts{client.WithSnapshotter(d.opts.Snapshotter), client.WithSnapshot(id)}, opts...)
	ctr, err := d.c.NewContainer(ctx, id, opts...)
	if err != nil {
		d.c.SnapshotService(d.opts.Snapshotter).Remove(context.WithoutCancel(ctx), id)
	}
	return ctr, err
}

// start runs the container's main task and registers the sandbox. With a
// valid addr (host-egress), it first wires the task's network namespace to
// the bridge at addr, or at another free address when addr turns out taken.
func (d *Driver) start(ctx context.Context, ctr client.Container, spec sandbox.Spec, addr netip.Addr) (*Sandbox, error) {
	task, err := ctr.NewTask(ctx, cio.NullIO)
	if err != nil {
		return nil, d.wrap(err, "create task of "+ctr.ID())
	}
	if addr.IsValid() {
		if err := d.wire(ctx, ctr, task.Pid(), addr); err != nil {
			task.Delete(ctx, client.WithProcessKill)
			return nil, err
		}
	}
	// Wait before Start, so that no exit is missed.
	exitC, err := task.Wait(d.ctx)
	if err != nil {
		task.Delete(ctx)
		return nil, d.wrap(err, "wait for task of "+ctr.ID())
	}
	if err := task.Start(ctx); err != nil {
		task.Delete(ctx)
		return nil, d.wrap(err, "start task of "+ctr.ID())
	}
	s := newSandbox(d, ctr, spec.SessionID, spec.Generation)
	if err := s.running(task); err != nil {
		task.Delete(ctx, client.WithProcessKill)
		return nil, err
	}
	go s.watch(task, exitC)
	return d.register(s, true), nil
}

// wire gives the created task's network namespace its veth, retrying with
// another address, recorded on the container, when another sandbox (of this
// or another daemon) took addr meanwhile.
func (d *Driver) wire(ctx context.Context, ctr client.Container, pid uint32, addr netip.Addr) error {
	for range 32 {
		err := d.net.attach(ctx, ctr.ID(), pid, addr)
		if !errors.Is(err, errAddrTaken) {
			return err
		}
		if addr, err = d.net.pick(); err != nil {
			return err
		}
		defer d.net.release(addr)
		if _, err := ctr.SetLabels(ctx, map[string]string{labelAddr: addr.String()}); err != nil {
			return d.wrap(err, "record address of "+ctr.ID())
		}
	}
	return fmt.Errorf("wire %s: no free address after 32 tries", ctr.ID())
}

// register makes s the Driver's sandbox for its container. A sandbox just
// started replaces any other; a reattached one yields to an existing one.
func (d *Driver) register(s *Sandbox, started bool) *Sandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.live[s.ctr.ID()]; old != nil {
		if !started {
			s.closeNetns()
			return old
		}
		// An Attach that ran during our Prepare saw the task not yet started.
		old.closeNetns()
	}
	d.live[s.ctr.ID()] = s
	return s
}

// image finds ref in containerd's store, unpacked for the snapshotter, and
// pulls it when it is not there.
func (d *Driver) image(ctx context.Context, ref string) (client.Image, error) {
	img, err := d.c.GetImage(ctx, ref)
	if errdefs.IsNotFound(err) {
		img, err = d.c.Pull(ctx, ref, client.WithPullUnpack, client.WithPullSnapshotter(d.opts.Snapshotter))
		if err != nil {
			if ctx.Err() != nil || errdefs.IsUnavailable(err) {
				return nil, d.wrap(err, "pull image "+ref)
			}
			return nil, fmt.Errorf("%w: %s is not in containerd namespace %q and pulling it failed: %w", sandbox.ErrImage, ref, d.opts.Namespace, err)
		}
		return img, nil
	}
	if err != nil {
		return nil, d.wrap(err, "look up image "+ref)
	}
	ok, err := img.IsUnpacked(ctx, d.opts.Snapshotter)
	if err != nil {
		return nil, d.wrap(err, "check image "+ref)
	}
	if !ok {
		if err := img.Unpack(ctx, d.opts.Snapshotter); err != nil {
			if ctx.Err() != nil || errdefs.IsUnavailable(err) {
				return nil, d.wrap(err, "unpack image "+ref)
			}
			return nil, fmt.Errorf("%w: unpack %s for %s: %w", sandbox.ErrImage, ref, d.opts.Snapshotter, err)
		}
	}
	return img, nil
}

// labels adds the owner label, when there is an owner.
func (d *Driver) labels(l map[string]string) map[string]string {
	if d.opts.Owner != "" {
		l[labelOwner] = d.opts.Owner
	}
	return l
}

// Attach returns a sandbox for every container labelled lathe.managed=true
// (and, with an Owner, lathe.owner=Owner), running or not. Containers without valid session and generation labels are
// skipped. It is meant for startup: a generation whose Prepare is still under
// way comes back as not running.
func (d *Driver) Attach(ctx context.Context) ([]sandbox.Sandbox, error) {
	ctx = d.nsCtx(ctx)
	filter := `labels."` + labelManaged + `"=="true"`
	if d.opts.Owner != "" {
		filter += `,labels."` + labelOwner + `"==` + strconv.Quote(d.opts.Owner)
	}
	ctrs, err := d.c.Containers(ctx, filter)
	if err != nil {
		return nil, d.wrap(err, "list sandboxes")
	}
	var out []sandbox.Sandbox
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(ctx)
		if errdefs.IsNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, d.wrap(err, "read labels of "+ctr.ID())
		}
		sid := labels[labelSession]
		gen, err := strconv.ParseUint(labels[labelGeneration], 10, 64)
		if err != nil || sid == "" || ContainerID(sid, gen) != ctr.ID() {
			continue
		}
		s, err := d.load(ctx, ctr, labels, sid, gen)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// load returns the Driver's sandbox for an existing container, reattaching
// to its task. A container without a running task comes back exited, and so
// does one built under an older privilege boundary (labelSecurity), so that
// its owner removes it and prepares a new one.
func (d *Driver) load(ctx context.Context, ctr client.Container, labels map[string]string, sid string, gen uint64) (*Sandbox, error) {
	d.mu.Lock()
	s := d.live[ctr.ID()]
	d.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s = newSandbox(d, ctr, sid, gen)
	if g := labels[labelSecurity]; g != securityGeneration {
		s.finish(fmt.Errorf("sandbox %s was built under security generation %q, not %q: it must be rebuilt", ctr.ID(), g, securityGeneration))
		return d.register(s, false), nil
	}
	if err := d.reattach(ctx, s); errdefs.IsNotFound(err) {
		// The task is gone, or went while we looked.
		s.finish(fmt.Errorf("%w: sandbox %s has no main task", sandbox.ErrNotFound, ctr.ID()))
	} else if err != nil {
		return nil, d.wrap(err, "reattach to "+ctr.ID())
	}
	return d.register(s, false), nil
}

// reattach finds s's main task and watches it, or marks s exited when the
// task is not running.
func (d *Driver) reattach(ctx context.Context, s *Sandbox) error {
	task, err := s.ctr.Task(ctx, nil)
	if err != nil {
		return err
	}
	st, err := task.Status(ctx)
	if err != nil {
		return err
	}
	if st.Status != client.Running && st.Status != client.Paused && st.Status != client.Pausing {
		s.finish(fmt.Errorf("sandbox main task is %s (exit status %d)", st.Status, st.ExitStatus))
		return nil
	}
	exitC, err := task.Wait(d.ctx)
	if err != nil {
		return err
	}
	if err := s.running(task); err != nil {
		s.finish(err) // it died between Status and here
		return nil
	}
	go s.watch(task, exitC)
	return nil
}

// Remove kills the generation's task and deletes it, the container and its
// snapshot. A missing container is not an error.
func (d *Driver) Remove(ctx context.Context, sessionID string, generation uint64) error {
	ctx = d.nsCtx(ctx)
	id := ContainerID(sessionID, generation)
	for {
		d.mu.Lock()
		busy := d.removing[id]
		if busy == nil {
			done := make(chan struct{})
			d.removing[id] = done
			d.mu.Unlock()
			defer func() {
				d.mu.Lock()
				delete(d.removing, id)
				d.mu.Unlock()
				close(done)
			}()
			break
		}
		d.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return d.wrap(ctx.Err(), "remove "+id)
		}
	}
	d.mu.Lock()
	if s := d.live[id]; s != nil {
		delete(d.live, id)
		defer s.closeNetns()
	}
	d.mu.Unlock()

	ctr, err := d.c.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return d.wrap(err, "look up "+id)
	}
	labels, err := ctr.Labels(ctx)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return d.wrap(err, "read labels of "+id)
	}
	task, err := ctr.Task(ctx, nil)
	switch {
	case err == nil:
		if err := killAndDelete(ctx, task); err != nil {
			return d.wrap(err, "delete task of "+id)
		}
	case !errdefs.IsNotFound(err):
		return d.wrap(err, "look up task of "+id)
	}
	// The veth goes with the task's network namespace; make sure of it, and
	// so free the address, before reporting the sandbox removed.
	if a, ok := labels[labelAddr]; ok {
		addr, _ := netip.ParseAddr(a)
		if err := d.net.delete(ctx, id, addr); err != nil {
			return err
		}
	}
	if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return d.wrap(err, "delete "+id)
	}
	return nil
}

// nsCtx puts the Driver's namespace on ctx.
func (d *Driver) nsCtx(ctx context.Context) context.Context {
	if _, ok := namespaces.Namespace(ctx); ok {
		return ctx
	}
	return namespaces.WithNamespace(ctx, d.opts.Namespace)
}

// wrap describes a containerd error and files it under a sandbox class when
// it has one. Context errors stay visible to errors.Is.
func (d *Driver) wrap(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", what, err)
	case errdefs.IsUnavailable(err):
		return fmt.Errorf("%w: %s: containerd at %s: %w", sandbox.ErrUnavailable, what, d.opts.Address, err)
	case errdefs.IsNotFound(err):
		return fmt.Errorf("%w: %s: %w", sandbox.ErrNotFound, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// killAndDelete kills every process of a sandbox's task and deletes it.
// The shim marks the task stopped only once it has reaped the init process
// and every exec process with it, after the exit that WithProcessKill
// waits for; until then a delete answers "cannot delete a running
// process". That happens when processes were exec'd under a daemon that
// was killed (their exits reach nobody), so the delete is tried again,
// with the kill, until ctx ends.
func killAndDelete(ctx context.Context, task client.Task) error {
	wait := 20 * time.Millisecond
	for {
		_, err := task.Delete(ctx, client.WithProcessKill)
		if err == nil || errdefs.IsNotFound(err) {
			return nil
		}
		if !strings.Contains(err.Error(), "cannot delete a running process") {
			return err
		}
		_ = task.Kill(ctx, syscall.SIGKILL, client.WithKillAll)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after %v)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
