// Package docker is the remote sandbox provider: one container per Session
// environment generation on a Docker Engine API endpoint (a dockerd on this
// machine or another, or Podman's compatible service), driven through the
// Moby Go client (github.com/moby/moby/client, which negotiates down to the
// API 1.41 of Debian's docker.io 20.10).
//
// The engine may be on another host, so nothing of this machine is mounted:
// the driver creates Spec.WorkingDir inside the container, an empty anonymous
// volume (removed with it), and the Session layer fills it. Each container
// idles in a small init loop (it reaps the orphans of exec'd commands) on
// network "none" (loopback only) or, for host-egress, EgressNetwork (on
// Podman a slirp4netns of its own), with the Spec's limits, a narrow
// capability set and no-new-privileges. Commands are engine execs, wrapped
// in a /bin/sh line that records the process's PID (Signal execs `kill` on
// it) and sizes its terminal. Dial opens a stream of the sandbox's helper
// (helper.go), Lathe's own static binary, mounted from a volume: the
// engine publishes no port. Containers carry the labels lathe.session,
// lathe.daemon (the Owner), lathe.generation and service_creation_token, so
// that a restarted daemon finds them again with Attach.
package docker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/helper"

	"github.com/containerd/errdefs"
	"github.com/docker/cli/cli/connhelper"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
)

// Defaults for Options.
const (
	DefaultHost    = "unix:///var/run/docker.sock"
	DefaultImage   = "lathe.local/sandbox:bookworm"
	DefaultTimeout = 10 * time.Second
	// DefaultOwner labels the sandboxes of a driver given no Owner.
	DefaultOwner = "lathe"
)

// Container labels (the first three are fixed by the contract).
const (
	LabelCreationToken = "service_creation_token"
	LabelSession       = "lathe.session"
	LabelDaemon        = "lathe.daemon"
	labelGeneration    = "lathe.generation"
	labelSpec          = "lathe.spec" // hash of the normalised Spec, for idempotent Prepare
)

// initScript is the main process: it makes the shims' PID dir, idles and,
// as PID 1 of the sandbox, reaps the orphans of exec'd commands. SIGTERM
// stops it cleanly.
const initScript = `mkdir -p ` + pidDir + `; trap 'exit 0' TERM; while :; do sleep 2147483647 & wait $!; done`

// EgressNetwork is the engine network of host-egress sandboxes: a bridge
// with traffic between its containers off (enable_icc false), made on
// first use unless the operator (or make docker-up) made it.
const EgressNetwork = "lathe-egress"

// capabilities is the whole set a sandbox gets, as the local provider's
// (docs/design/sandbox.md).
var capabilities = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "NET_BIND_SERVICE"}

// TLS names the PEM files of a tcp:// host's TLS: the CA that signed the
// engine's certificate, and the client's certificate and key.
type TLS struct {
	CAFile, CertFile, KeyFile string
}

// Options configure a Driver. Zero values take the defaults above.
type Options struct {
	// Host is unix://PATH, tcp://HOST:PORT (with TLS when set) or
	// ssh://[USER@]HOST[:PORT], which runs `docker system dial-stdio` there
	// through the user's ssh, as `docker -H ssh://` does.
	Host string
	TLS  TLS
	// SSHOptions are extra ssh options (as "-o", "Key=value" pairs) for an
	// ssh:// host; the user's ssh config applies besides.
	SSHOptions []string
	// DefaultImage is used when a Spec names no image.
	DefaultImage string
	// Template, when set, is the only image: every sandbox runs it,
	// whatever its Spec names (the remote provider's sandbox.remote.template).
	Template string
	// Owner names the daemon whose sandboxes these are (label lathe.daemon).
	// Attach and Remove see only the owner's sandboxes.
	Owner string
	// Timeout bounds every engine request but the streams of running
	// processes and image pulls (creating, starting and removing a
	// container get four): past it the engine counts as unreachable.
	Timeout time.Duration
	// Helper is the sandbox helper on this host: a static build of lathe
	// (helper.Open), copied once per build into a volume on the engine
	// and mounted into every sandbox. Empty: no helper, so no Dial and no
	// file streams.
	Helper string
}

// Driver is a sandbox.Driver on a Docker Engine.
type Driver struct {
	c    *client.Client
	opts Options

	// ctx lives as long as the Driver: it carries the container watchers.
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	live map[string]*Sandbox // by container name

	netMu   sync.Mutex
	netMode string // host-egress sandboxes' network mode, once known

	watching sync.Once // the events watcher runs

	helper   *helper.Binary // nil without Options.Helper
	helperMu sync.Mutex     // one fill of the helper's volume at a time
	toolMu   sync.Mutex     // one fill of a tool's volume at a time

	limitsIgnored atomic.Bool // a sandbox came back without its Spec's limits

	archMu      sync.Mutex
	archChecked bool  // the engine said its architecture
	archErr     error // it is not the helper's
}

var _ sandbox.Driver = (*Driver)(nil)

// New connects to the engine at opts.Host and checks that it answers. An
// unreachable engine is an error wrapping sandbox.ErrUnavailable that names
// the host, returned within Options.Timeout.
func New(ctx context.Context, opts Options) (*Driver, error) {
	opts.Host = cmp.Or(opts.Host, DefaultHost)
	opts.DefaultImage = cmp.Or(opts.DefaultImage, DefaultImage)
	opts.Owner = cmp.Or(opts.Owner, DefaultOwner)
	opts.Timeout = cmp.Or(max(opts.Timeout, 0), DefaultTimeout)
	copts, err := clientOptions(opts)
	if err != nil {
		return nil, err
	}
	c, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker engine at %s: %w", opts.Host, err)
	}
	d := &Driver{c: c, opts: opts, live: map[string]*Sandbox{}}
	if opts.Helper != "" {
		if d.helper, err = helper.Open(opts.Helper); err != nil {
			c.Close()
			return nil, err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if _, err := c.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		c.Close()
		return nil, d.wrap(ctx, err, "ping")
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// clientOptions picks the connection for opts.Host.
func clientOptions(opts Options) ([]client.Opt, error) {
	u, err := url.Parse(opts.Host)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", opts.Host, err)
	}
	copts := []client.Opt{client.WithAPIVersionNegotiation()}
	tlsSet := opts.TLS != (TLS{})
	switch u.Scheme {
	case "unix":
		copts = append(copts, client.WithHost(opts.Host))
	case "tcp":
		copts = append(copts, client.WithHost(opts.Host))
		if tlsSet {
			copts = append(copts, client.WithTLSClientConfig(opts.TLS.CAFile, opts.TLS.CertFile, opts.TLS.KeyFile))
		}
	case "ssh":
		// BatchMode: never a prompt the daemon could not answer.
		flags := append([]string{"-o", "BatchMode=yes"}, opts.SSHOptions...)
		helper, err := connhelper.GetConnectionHelperWithSSHOpts(opts.Host, flags)
		if err != nil {
			return nil, fmt.Errorf("docker host %q: %w", opts.Host, err)
		}
		copts = append(copts, client.WithHost(helper.Host), client.WithDialContext(helper.Dialer))
	default:
		return nil, fmt.Errorf("docker host %q: the scheme must be unix, tcp or ssh", opts.Host)
	}
	if tlsSet && u.Scheme != "tcp" {
		return nil, fmt.Errorf("docker host %q: TLS files are for tcp:// hosts only", opts.Host)
	}
	return copts, nil
}

// Close stops watching sandboxes and disconnects. The containers keep
// running; a new Driver finds them with Attach.
func (d *Driver) Close() error {
	d.cancel()
	d.mu.Lock()
	for _, s := range d.live {
		s.closeLink()
	}
	clear(d.live)
	d.mu.Unlock()
	return d.c.Close()
}

// Host is the engine address the driver talks to.
func (d *Driver) Host() string { return d.opts.Host }

// Capabilities: the working dir is the container's own, not the host's.
func (d *Driver) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{HostWorkingDir: false}
}

// ContainerName names the container of a Session environment generation of
// an owner's.
func ContainerName(owner, sessionID string, generation uint64) string {
	sum := sha256.Sum256([]byte(owner))
	return fmt.Sprintf("lathe-%s-g%d-%s", sessionID, generation, hex.EncodeToString(sum[:4]))
}

func (d *Driver) name(sessionID string, generation uint64) string {
	return ContainerName(d.opts.Owner, sessionID, generation)
}

// call bounds one engine request by the driver's timeout.
func (d *Driver) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.opts.Timeout)
}

// slowCall bounds a request that makes or kills processes (create, start,
// forced remove), which a busy engine takes seconds to answer.
func (d *Driver) slowCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, slowFactor*d.opts.Timeout)
}

// slowFactor: a slow call may take this many Timeouts.
const slowFactor = 4

// wrap classifies an engine error: the caller's own cancellation as it is,
// a missing object as sandbox.ErrNotFound, an engine that does not answer
// (in time) as sandbox.ErrUnavailable naming the host.
func (d *Driver) wrap(ctx context.Context, err error, what string) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %s: %w", sandbox.ErrNotFound, what, err)
	}
	if unreachable(err) {
		return &unavailableError{host: d.opts.Host, what: what, err: err}
	}
	return fmt.Errorf("docker engine at %s: %s: %w", d.opts.Host, what, err)
}

// unavailableError is sandbox.ErrUnavailable for a remote engine. It reads
// without the sentinel's hint about the local runtime.
type unavailableError struct {
	host, what string
	err        error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("docker engine at %s unreachable: %s: %v", e.host, e.what, e.err)
}

func (e *unavailableError) Is(target error) bool { return target == sandbox.ErrUnavailable }
func (e *unavailableError) Unwrap() error        { return e.err }

// unreachable reports whether err means the engine could not be reached or
// stopped answering, rather than answering with an error.
func unreachable(err error) bool {
	var ne net.Error
	return client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// Prepare creates and starts the container for spec's generation. A running
// container of that generation with the same spec and creation token is
// returned as it is; any other container of that generation is replaced.
func (d *Driver) Prepare(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := d.normalise(&spec); err != nil {
		return nil, err
	}
	name := d.name(spec.SessionID, spec.Generation)
	hash := specHash(spec)
	cctx, cancel := d.call(ctx)
	res, err := d.c.ContainerInspect(cctx, name, client.ContainerInspectOptions{})
	cancel()
	switch {
	case err == nil:
		c := res.Container
		if c.Config != nil && c.Config.Labels[labelSpec] == hash && c.Config.Labels[LabelCreationToken] == spec.CreationToken &&
			c.State != nil && c.State.Running {
			return d.track(c.ID, name, c.Config.Labels[labelHelper], spec), nil
		}
		if err := d.Remove(ctx, spec.SessionID, spec.Generation); err != nil {
			return nil, err
		}
	case !errdefs.IsNotFound(err):
		return nil, d.wrap(ctx, err, "inspect "+name)
	}
	return d.create(ctx, name, hash, spec)
}

// normalise checks spec and fills in its defaults.
func (d *Driver) normalise(spec *sandbox.Spec) error {
	if err := spec.Check(); err != nil {
		return err
	}
	if !validName(d.name(spec.SessionID, spec.Generation)) {
		return fmt.Errorf("session ID %q cannot name a container", spec.SessionID)
	}
	if spec.Source != "" {
		return fmt.Errorf("sandbox source %q: a remote sandbox mounts nothing of this machine (Ways need the local container runtime)", spec.Source)
	}
	for _, t := range spec.Tools {
		if fi, err := os.Stat(t.Dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("sandbox tool %s: %q is not a directory", t.Name, t.Dir)
		}
	}
	spec.Image = cmp.Or(d.opts.Template, spec.Image, d.opts.DefaultImage)
	return nil
}

// validName: what the engine takes as a container name.
func validName(s string) bool {
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && strings.ContainsRune("_.-", r)
		if !ok {
			return false
		}
	}
	return len(s) > 1 && len(s) <= 200
}

// specHash identifies a normalised spec (the creation token is not in it).
func specHash(spec sandbox.Spec) string {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

func (d *Driver) create(ctx context.Context, name, hash string, spec sandbox.Spec) (sandbox.Sandbox, error) {
	mounts, tag, err := d.helperMount()
	if err != nil {
		return nil, err
	}
	cfg := &container.Config{
		Image:      spec.Image,
		Cmd:        []string{"/bin/sh", "-c", initScript},
		Entrypoint: []string{},
		Hostname:   "sandbox",
		WorkingDir: spec.WorkingDir,
		Env:        append(append([]string{}, sandbox.DefaultEnv...), spec.Env...), // defaults first: Spec.Env wins
		Labels: map[string]string{
			LabelSession:       spec.SessionID,
			LabelDaemon:        d.opts.Owner,
			LabelCreationToken: spec.CreationToken,
			labelGeneration:    strconv.FormatUint(spec.Generation, 10),
			labelSpec:          hash,
			labelHelper:        tag,
		},
		StopSignal: "SIGTERM",
		// The working dir is an anonymous volume, not the container's own
		// layer: a checkout of a thousand files writes there in tens of
		// milliseconds instead of half a second through the overlay
		// snapshot, and Remove deletes it with the container.
		Volumes: map[string]struct{}{spec.WorkingDir: {}},
	}
	host := &container.HostConfig{
		NetworkMode: "none",
		CapDrop:     []string{"ALL"},
		CapAdd:      capabilities,
		SecurityOpt: []string{"no-new-privileges"},
		Mounts:      append(mounts, d.toolMounts(spec.Tools)...),
	}
	if spec.Network == sandbox.NetworkHostEgress {
		mode, err := d.egressNetwork(ctx)
		if err != nil {
			return nil, err
		}
		host.NetworkMode = container.NetworkMode(mode)
	}
	if l := spec.Limits; l.MemoryMB > 0 {
		host.Memory = int64(l.MemoryMB) << 20
		host.MemorySwap = host.Memory
	}
	if l := spec.Limits; l.CPUs > 0 {
		host.NanoCPUs = int64(l.CPUs * 1e9)
	}
	if l := spec.Limits; l.PIDs > 0 {
		pids := int64(l.PIDs)
		host.PidsLimit = &pids
	}
	id, err := d.createContainer(ctx, name, cfg, host)
	for wait := 50 * time.Millisecond; errdefs.IsConflict(err); wait = min(2*wait, time.Second) {
		// The name is this generation's: a create that a killed daemon had
		// sent holds it, still under way in the engine (which reserves the
		// name before the container shows) or landed after Prepare looked.
		// Replace it once it shows.
		if err := d.Remove(ctx, spec.SessionID, spec.Generation); err != nil {
			return nil, err
		}
		if id, err = d.createContainer(ctx, name, cfg, host); !errdefs.IsConflict(err) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, d.wrap(ctx, err, "create "+name)
		case <-time.After(wait):
		}
	}
	if err == nil {
		err = d.ensureHelper(ctx, id, spec.Image)
	}
	if err == nil {
		err = d.ensureTools(ctx, id, spec.Image, spec.Tools)
	}
	if err != nil {
		if id != "" {
			d.Remove(context.WithoutCancel(ctx), spec.SessionID, spec.Generation)
		}
		return nil, err
	}
	sctx, cancel := d.slowCall(ctx)
	_, err = d.c.ContainerStart(sctx, id, client.ContainerStartOptions{})
	cancel()
	if err == nil {
		err = d.ownWorkingDir(ctx, id, spec)
	}
	if err != nil {
		err = d.wrap(ctx, err, "start "+name)
		if !errors.Is(err, sandbox.ErrUnavailable) {
			// Unreachable: no way to clean up; the next Attach reports the
			// leftover for the caller to remove.
			d.Remove(context.WithoutCancel(ctx), spec.SessionID, spec.Generation)
		}
		return nil, err
	}
	return d.track(id, name, tag, spec), nil
}

// egressNetwork returns the network mode of host-egress sandboxes:
// EgressNetwork, made sure to exist, or on Podman "slirp4netns", each
// sandbox its own user-mode network stack. Podman takes enable_icc false
// as its "isolate" option, which parts networks but lets the containers of
// one talk; and rootless, its bridges sit in the user's own network
// namespace, where no rule of this machine's reaches. A sandbox alone
// behind its own slirp4netns has no sibling to reach (nor this machine's
// loopback: slirp4netns keeps host loopback off by default).
func (d *Driver) egressNetwork(ctx context.Context) (string, error) {
	d.netMu.Lock()
	defer d.netMu.Unlock()
	if d.netMode != "" {
		return d.netMode, nil
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	v, err := d.c.ServerVersion(cctx, client.ServerVersionOptions{})
	if err != nil {
		return "", d.wrap(ctx, err, "version")
	}
	if slices.ContainsFunc(v.Components, func(c system.ComponentVersion) bool { return c.Name == "Podman Engine" }) {
		d.netMode = "slirp4netns"
		return d.netMode, nil
	}
	_, err = d.c.NetworkInspect(cctx, EgressNetwork, client.NetworkInspectOptions{})
	if errdefs.IsNotFound(err) {
		_, err = d.c.NetworkCreate(cctx, EgressNetwork, client.NetworkCreateOptions{
			Driver:  "bridge",
			Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
			Labels:  map[string]string{LabelDaemon: d.opts.Owner},
		})
		if errdefs.IsConflict(err) || err != nil && strings.Contains(err.Error(), "already exists") {
			err = nil // another daemon made it meanwhile
		}
	}
	if err != nil {
		return "", d.wrap(ctx, err, "network "+EgressNetwork)
	}
	d.netMode = EgressNetwork
	return d.netMode, nil
}

// createContainer creates the container, pulling its image first when the
// engine lacks it. A missing or unpullable image is sandbox.ErrImage.
func (d *Driver) createContainer(ctx context.Context, name string, cfg *container.Config, host *container.HostConfig) (string, error) {
	for pulled := false; ; pulled = true {
		cctx, cancel := d.slowCall(ctx)
		res, err := d.c.ContainerCreate(cctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host})
		cancel()
		if err == nil {
			return res.ID, nil
		}
		if !errdefs.IsNotFound(err) || pulled {
			if errdefs.IsNotFound(err) {
				return "", fmt.Errorf("%w: %s on the docker engine at %s: %w", sandbox.ErrImage, cfg.Image, d.opts.Host, err)
			}
			return "", d.wrap(ctx, err, "create "+name)
		}
		if err := d.pull(ctx, cfg.Image); err != nil {
			return "", err
		}
	}
}

// pull fetches image onto the engine. It runs as long as ctx allows.
func (d *Driver) pull(ctx context.Context, image string) error {
	resp, err := d.c.ImagePull(ctx, image, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(ctx)
		resp.Close()
	}
	if err != nil {
		if werr := d.wrap(ctx, err, "pull "+image); errors.Is(werr, sandbox.ErrUnavailable) || ctx.Err() != nil {
			return werr
		}
		return fmt.Errorf("%w: %s is not on the docker engine at %s and pulling it failed: %w", sandbox.ErrImage, image, d.opts.Host, err)
	}
	return nil
}

// ownWorkingDir hands the working dir the engine made at start (owned by
// root) to the image's user, when that is someone else.
func (d *Driver) ownWorkingDir(ctx context.Context, id string, spec sandbox.Spec) error {
	cctx, cancel := d.call(ctx)
	res, err := d.c.ContainerInspect(cctx, id, client.ContainerInspectOptions{})
	cancel()
	if err != nil {
		return err
	}
	d.checkLimits(spec, res.Container.HostConfig)
	user := ""
	if res.Container.Config != nil {
		user = res.Container.Config.User
	}
	if user == "" || user == "root" || user == "0" || strings.HasPrefix(user, "0:") {
		return nil
	}
	_, _, code, err := d.run(ctx, id, "0", []string{"chown", user, spec.WorkingDir})
	if err == nil && code != 0 {
		err = fmt.Errorf("chown %s %s: exit code %d", user, spec.WorkingDir, code)
	}
	return err
}

// checkLimits notes an engine that dropped spec's limits from the
// container it made (host is the container's as the engine reports it):
// rootless Podman on cgroup v1 does, since nothing delegates a cgroup to
// an unprivileged user there, and says so only in its own log.
func (d *Driver) checkLimits(spec sandbox.Spec, host *container.HostConfig) {
	l := spec.Limits
	if l == (sandbox.Limits{}) || host == nil {
		return
	}
	if l.MemoryMB > 0 && host.Memory == 0 || l.PIDs > 0 && (host.PidsLimit == nil || *host.PidsLimit <= 0) || l.CPUs > 0 && host.NanoCPUs == 0 {
		d.limitsIgnored.Store(true)
	}
}

// LimitsIgnored says why the engine does not enforce Spec.Limits, once a
// sandbox made with limits came back without them; empty while they hold.
func (d *Driver) LimitsIgnored() string {
	if !d.limitsIgnored.Load() {
		return ""
	}
	return fmt.Sprintf("the engine at %s ignores sandbox limits (memory, CPUs, pids): rootless Podman sets no cgroup limits on a cgroup v1 host (it needs cgroup v2 with the controllers delegated to the user)", d.opts.Host)
}

// track returns the Sandbox of container id, watching it once; tag is
// the helper build it mounts.
func (d *Driver) track(id, name, tag string, spec sandbox.Spec) *Sandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.live[name]; ok && s.id == id {
		return s
	}
	s := newSandbox(d, id, name, tag, spec)
	d.live[name] = s
	d.watching.Do(func() { go d.watch() })
	return s
}

// watch closes the Done of every tracked sandbox whose container dies or
// goes, from one stream of the engine's events (one connection, however
// many sandboxes: over ssh:// each is an ssh process). After each
// (re)subscription it lists the containers, for what happened while the
// stream was down. It runs until the driver closes.
func (d *Driver) watch() {
	// Podman filters events by its own names, "died" and "remove" (it
	// reports them as "die" and "remove"): with only dockerd's "die" and
	// "destroy" it sends nothing. dockerd matches the extra names to none.
	filters := make(client.Filters).Add("type", "container").Add("label", LabelDaemon+"="+d.opts.Owner).Add("event", "die", "destroy", "died", "remove")
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		ctx, cancel := context.WithCancel(d.ctx)
		res := d.c.Events(ctx, client.EventsListOptions{Filters: filters})
		if d.resync(ctx) == nil {
			backoff = 100 * time.Millisecond
		}
	stream:
		for {
			select {
			case m := <-res.Messages:
				d.gone(m.Actor.ID, fmt.Errorf("sandbox container %s: %s (exit code %s)", m.Actor.Attributes["name"], m.Action, m.Actor.Attributes["exitCode"]))
			case <-res.Err:
				break stream
			}
		}
		cancel()
		select {
		case <-d.ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// resync finishes every sandbox tracked before it asked whose container
// is not running (one tracked since may have started after the list).
func (d *Driver) resync(ctx context.Context) error {
	d.mu.Lock()
	before := slices.Collect(maps.Values(d.live))
	d.mu.Unlock()
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.c.ContainerList(cctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", LabelDaemon+"="+d.opts.Owner).Add("status", "running"),
	})
	if err != nil {
		return err
	}
	running := map[string]bool{}
	for _, c := range res.Items {
		running[c.ID] = true
	}
	for _, s := range before {
		if running[s.id] {
			continue
		}
		s.finish(fmt.Errorf("%w: sandbox container %s is not running", sandbox.ErrNotFound, s.name))
	}
	return nil
}

// gone finishes the tracked sandbox of container id, if any.
func (d *Driver) gone(id string, err error) {
	d.mu.Lock()
	var hit *Sandbox
	for _, s := range d.live {
		if s.id == id {
			hit = s
		}
	}
	d.mu.Unlock()
	if hit != nil {
		hit.finish(err)
	}
}

// Attach returns every container of this owner's on the engine. One whose
// main process is gone comes back with Done closed.
func (d *Driver) Attach(ctx context.Context) ([]sandbox.Sandbox, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.c.ContainerList(cctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelDaemon+"="+d.opts.Owner),
	})
	if err != nil {
		return nil, d.wrap(ctx, err, "list containers")
	}
	var out []sandbox.Sandbox
	for _, c := range res.Items {
		gen, err := strconv.ParseUint(c.Labels[labelGeneration], 10, 64)
		sid := c.Labels[LabelSession]
		if err != nil || sid == "" {
			continue
		}
		name := d.name(sid, gen)
		spec := sandbox.Spec{SessionID: sid, Generation: gen, CreationToken: c.Labels[LabelCreationToken]}
		if c.State != container.StateRunning {
			// Reported, not tracked: a container still "created" may be a
			// Prepare of this driver in flight, which tracks it once started.
			s := newSandbox(d, c.ID, name, c.Labels[labelHelper], spec)
			s.finish(fmt.Errorf("sandbox container %s is %s", name, c.State))
			out = append(out, s)
			continue
		}
		out = append(out, d.track(c.ID, name, c.Labels[labelHelper], spec))
	}
	return out, nil
}

// Remove deletes the container of that generation, running or not.
// Removing a missing one is not an error; two concurrent removals both
// succeed.
func (d *Driver) Remove(ctx context.Context, sessionID string, generation uint64) error {
	name := d.name(sessionID, generation)
	for {
		cctx, cancel := d.slowCall(ctx)
		_, err := d.c.ContainerRemove(cctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		cancel()
		if err == nil || errdefs.IsNotFound(err) {
			break
		}
		if !errdefs.IsConflict(err) && !strings.Contains(err.Error(), "already in progress") {
			return d.wrap(ctx, err, "remove "+name)
		}
		// Another removal is under way: wait for it to finish.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.mu.Lock()
	s := d.live[name]
	delete(d.live, name)
	d.mu.Unlock()
	if s != nil {
		s.finish(fmt.Errorf("%w: sandbox %s was removed", sandbox.ErrNotFound, name))
	}
	return nil
}

// Kill sends SIGKILL to the main process of container id, behind the
// sandbox's back (tests stand for an operator with it).
func (d *Driver) Kill(ctx context.Context, id string) error {
	cctx, cancel := d.call(ctx)
	defer cancel()
	_, err := d.c.ContainerKill(cctx, id, client.ContainerKillOptions{Signal: "SIGKILL"})
	return d.wrap(ctx, err, "kill "+id)
}

// Labels returns the labels of container id (a runtime ID).
func (d *Driver) Labels(ctx context.Context, id string) (map[string]string, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.c.ContainerInspect(cctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, d.wrap(ctx, err, "inspect "+id)
	}
	if res.Container.Config == nil {
		return map[string]string{}, nil
	}
	return res.Container.Config.Labels, nil
}
