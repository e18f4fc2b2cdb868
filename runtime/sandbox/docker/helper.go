package docker

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/helper"

	"github.com/containerd/errdefs"
	"github.com/klauspost/compress/gzip"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// The engine publishes no port and may be on another host, so the way into
// a sandbox's own loopback, and to its files, is the sandbox's helper
// (runtime/sandbox/helper): one `lathe sandbox-helper serve` per sandbox,
// exec'd at its first use and again when it ends, whose stdin and stdout
// carry a yamux session. A Dial is one stream of it (helper.KindDial), a
// file client another (OpenStream). One process for every connection,
// rather than one exec each, is what makes the Preview fast through the
// engine: a request costs no exec, and the bytes of many connections cross
// dockerd and the shim in one write (both ends batch their writes).
//
// The binary reaches the engine once per build: a named volume per owner
// and helper build (labelHelper, its content hash) holds it, filled by a
// short-lived container whose main process is the copy itself
// (`sandbox-helper install`, which takes the name only once its content is
// right), and every sandbox mounts it read-only at helper.Dir. A container
// of another build (one a restarted daemon reattached) gets this build's
// helper copied in beside it at first use (HelperPath).

// labelHelper holds the helper build a container mounts.
const labelHelper = "lathe.helper"

// helperTag is the short form of the helper's content hash in names.
func helperTag(hash string) string { return hash[:16] }

// links holds a sandbox's helper session, started at its first use.
type links struct {
	mu   sync.Mutex
	link *helper.Link
	// path is where this build's helper is in the container, once known.
	path string
}

// Dial connects to 127.0.0.1:port inside the sandbox through its helper.
// A closed port fails with the sandbox's own error.
func (s *Sandbox) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial: port %d out of range", port)
	}
	cctx, cancel := s.d.call(ctx)
	defer cancel()
	c, err := s.OpenStream(cctx, helper.KindDial, strconv.Itoa(port))
	switch refused, isRefusal := errors.AsType[*helper.RefusedError](err); {
	case err == nil:
		return c, nil
	case isRefusal:
		return nil, fmt.Errorf("dial 127.0.0.1:%d in sandbox %s: %s", port, s.name, refused.Msg)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrUnavailable):
		return nil, err
	}
	return nil, s.d.wrap(ctx, err, fmt.Sprintf("dial 127.0.0.1:%d in sandbox %s", port, s.name))
}

// OpenStream opens a stream of kind with arg to the sandbox's helper,
// starting the helper when none runs. A refusal is a *helper.RefusedError.
func (s *Sandbox) OpenStream(ctx context.Context, kind helper.Kind, arg string) (net.Conn, error) {
	if s.exited() {
		return nil, s.notFound(s.Err())
	}
	link, err := s.helperLink(ctx)
	if err != nil {
		return nil, err
	}
	c, err := link.Open(ctx, kind, arg)
	if err != nil && link.Closed() && s.exited() {
		return nil, s.notFound(s.Err())
	}
	return c, err
}

// helperLink returns the sandbox's helper session, starting one when there
// is none or the last one ended. Callers that come while it starts wait.
func (s *Sandbox) helperLink(ctx context.Context) (*helper.Link, error) {
	s.links.mu.Lock()
	defer s.links.mu.Unlock()
	if s.links.link != nil && !s.links.link.Closed() {
		return s.links.link, nil
	}
	path, err := s.helperPath(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.startHelper(ctx, path)
	if err != nil {
		return nil, err
	}
	link, err := helper.Connect(c, s.d.opts.Timeout)
	if err != nil {
		c.Close()
		if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
			return nil, fmt.Errorf("the helper in sandbox %s: %s", s.name, msg)
		}
		return nil, s.d.wrap(ctx, err, "start the helper in sandbox "+s.name)
	}
	s.links.link = link
	return link, nil
}

// closeLink ends the helper session, if any: its streams end with it.
func (s *Sandbox) closeLink() {
	s.links.mu.Lock()
	defer s.links.mu.Unlock()
	if s.links.link != nil {
		s.links.link.Close()
		s.links.link = nil
	}
}

// HelperPath is where this build's helper is inside the sandbox
// (helper.Locator): helper.Path in a container this build made; in one
// another build made, a copy the first call puts there.
func (s *Sandbox) HelperPath(ctx context.Context) (string, error) {
	s.links.mu.Lock()
	defer s.links.mu.Unlock()
	return s.helperPath(ctx)
}

// helperPath is HelperPath; s.links.mu is held.
func (s *Sandbox) helperPath(ctx context.Context) (string, error) {
	if s.links.path != "" {
		return s.links.path, nil
	}
	b := s.d.helper
	if b == nil {
		return "", errors.New("the docker driver has no sandbox helper (Options.Helper)")
	}
	hash, err := b.Hash()
	if err != nil {
		return "", err
	}
	if s.helperTag == helperTag(hash) {
		s.links.path = helper.Path
		return s.links.path, nil
	}
	if s.exited() {
		return "", s.notFound(s.Err())
	}
	if err := s.d.checkArch(ctx); err != nil {
		return "", err
	}
	dir := "/.lathe-" + helperTag(hash)
	tmp := helper.TempPrefix + randomHex(8)
	if err := s.d.copyHelper(ctx, s.id, "/", dir[1:]+"/"+tmp); err != nil {
		return "", err
	}
	_, errOut, code, err := s.d.run(ctx, s.id, "0", []string{dir + "/" + tmp, helper.Subcommand, "install", hash, dir + "/" + tmp})
	if err != nil {
		return "", s.execError(ctx, err)
	}
	if code != 0 {
		return "", fmt.Errorf("install the helper in sandbox %s: exit code %d: %s", s.name, code, strings.TrimSpace(errOut))
	}
	s.links.path = dir + "/lathe"
	return s.links.path, nil
}

// startHelper execs the helper's serve mode and returns its streams.
func (s *Sandbox) startHelper(ctx context.Context, path string) (*execConn, error) {
	cctx, cancel := s.d.call(ctx)
	defer cancel()
	res, err := s.d.c.ExecCreate(cctx, s.id, client.ExecCreateOptions{
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: []string{path, helper.Subcommand, "serve"},
	})
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	hj, err := s.d.c.ExecAttach(cctx, res.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	return &execConn{Conn: hj.Conn, r: hj.Reader}, nil
}

// execConn is an exec's streams as a net.Conn: writes go to its stdin;
// reads demultiplex the engine's framing (an 8-byte header, stream and
// length, per frame) inline, so that the connection's deadlines hold. The
// process's stderr is kept for its start error.
type execConn struct {
	net.Conn
	r      *bufio.Reader
	left   int // bytes left in the current stdout frame
	stderr strings.Builder
}

func (c *execConn) Read(p []byte) (int, error) {
	for c.left == 0 {
		var h [8]byte
		if _, err := io.ReadFull(c.r, h[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return 0, err
		}
		n := int(binary.BigEndian.Uint32(h[4:]))
		if h[0] != 1 { // stderr (2), or stdin (0), which the engine never sends
			if _, err := io.CopyN(&limitedBuilder{&c.stderr, 4096}, c.r, int64(n)); err != nil {
				return 0, err
			}
			continue
		}
		c.left = n
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

// limitedBuilder keeps the first max bytes written to it and drops the
// rest: a helper's stderr is kept for its error, never without bound.
type limitedBuilder struct {
	b   *strings.Builder
	max int
}

func (l *limitedBuilder) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// helperVolume is the volume that holds the helper build hash for this
// driver's owner.
func (d *Driver) helperVolume(hash string) string {
	sum := sha256.Sum256([]byte(d.opts.Owner))
	return "lathe-helper-" + hex.EncodeToString(sum[:4]) + "-" + helperTag(hash)
}

// helperMount is the mount of the helper's volume in a sandbox, and the
// label that names its build; none without a helper.
func (d *Driver) helperMount() ([]mount.Mount, string, error) {
	if d.helper == nil {
		return nil, "", nil
	}
	hash, err := d.helper.Hash()
	if err != nil {
		return nil, "", fmt.Errorf("the sandbox helper %s: %w", d.helper.Path, err)
	}
	return []mount.Mount{{
		Type: mount.TypeVolume, Source: d.helperVolume(hash), Target: helper.Dir, ReadOnly: true,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true, Labels: map[string]string{LabelDaemon: d.opts.Owner, labelHelper: helperTag(hash)}},
	}}, helperTag(hash), nil
}

// ensureHelper makes sure the helper's volume, which the created
// container id mounts, holds the helper, filling it when it does not
// (the engine made it empty, at the create).
func (d *Driver) ensureHelper(ctx context.Context, id, image string) error {
	if d.helper == nil {
		return nil
	}
	d.helperMu.Lock()
	defer d.helperMu.Unlock()
	cctx, cancel := d.call(ctx)
	_, err := d.c.ContainerStatPath(cctx, id, client.ContainerStatPathOptions{Path: helper.Path})
	cancel()
	if err == nil {
		return nil
	}
	if !errdefs.IsNotFound(err) {
		return d.wrap(ctx, err, "look for the helper in "+id)
	}
	if err := d.checkArch(ctx); err != nil {
		return err
	}
	hash, err := d.helper.Hash()
	if err != nil {
		return err
	}
	return d.fillHelperVolume(ctx, hash, image)
}

// fillHelperVolume copies the helper into its volume through a container
// of image that mounts it read-write, then removes the volumes of this
// owner's other builds that no container uses.
func (d *Driver) fillHelperVolume(ctx context.Context, hash, image string) error {
	vol := d.helperVolume(hash)
	tmp := helper.TempPrefix + randomHex(8)
	name := vol + "-fill-" + randomHex(4)
	cctx, cancel := d.slowCall(ctx)
	res, err := d.c.ContainerCreate(cctx, client.ContainerCreateOptions{Name: name,
		Config: &container.Config{
			Image: image, Entrypoint: []string{}, User: "0",
			Cmd:    []string{helper.Dir + "/" + tmp, helper.Subcommand, "install", hash, helper.Dir + "/" + tmp},
			Labels: map[string]string{LabelDaemon: d.opts.Owner, labelHelper: helperTag(hash)},
		},
		HostConfig: &container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: helper.Dir}}},
	})
	cancel()
	if err != nil {
		return d.wrap(ctx, err, "create "+name)
	}
	defer d.forceRemove(ctx, res.ID)
	if err := d.copyHelper(ctx, res.ID, helper.Dir, tmp); err != nil {
		return err
	}
	sctx, cancel := d.slowCall(ctx)
	wait := d.c.ContainerWait(sctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	_, err = d.c.ContainerStart(sctx, res.ID, client.ContainerStartOptions{})
	if err != nil {
		cancel()
		return d.wrap(ctx, err, "start "+name)
	}
	var code int64
	select {
	case r := <-wait.Result:
		code = r.StatusCode
	case err = <-wait.Error:
	}
	cancel()
	if err != nil {
		return d.wrap(ctx, err, "wait for "+name)
	}
	if code != 0 {
		return fmt.Errorf("install the sandbox helper into volume %s on the docker engine at %s: exit code %d", vol, d.opts.Host, code)
	}
	d.dropOldHelpers(ctx, vol)
	return nil
}

// dropOldHelpers removes this owner's helper volumes other than keep;
// those a container still uses stay.
func (d *Driver) dropOldHelpers(ctx context.Context, keep string) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.c.VolumeList(cctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", LabelDaemon+"="+d.opts.Owner).Add("label", labelHelper)})
	if err != nil {
		return
	}
	for _, v := range res.Items {
		if v.Name != keep {
			d.c.VolumeRemove(cctx, v.Name, client.VolumeRemoveOptions{})
		}
	}
}

// copyHelper copies the helper into container id as dir/name (the
// engine's archive API; the parents dir/name's path names are made),
// mode 0755. Over the network it goes compressed.
func (d *Driver) copyHelper(ctx context.Context, id, dir, name string) error {
	f, err := os.Open(d.helper.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	err = d.copyArchive(ctx, id, dir, func(tw *tar.Writer) error { return writeTree(tw, name, fi.Size(), f) })
	return d.wrap(ctx, err, "copy the sandbox helper into "+id)
}

// copyArchive extracts the tar stream write makes at dir in container id
// (the engine's archive API), compressed over the network.
func (d *Driver) copyArchive(ctx context.Context, id, dir string, write func(*tar.Writer) error) error {
	pr, pw := io.Pipe()
	go func() {
		var w io.WriteCloser = nopCloser{pw}
		if !strings.HasPrefix(d.opts.Host, "unix://") {
			w, _ = gzip.NewWriterLevel(pw, gzip.BestSpeed)
		}
		tw := tar.NewWriter(w)
		err := write(tw)
		if err == nil {
			err = tw.Close()
		}
		if err == nil {
			err = w.Close()
		}
		pw.CloseWithError(err)
	}()
	_, err := d.c.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dir, Content: pr})
	pr.CloseWithError(err)
	return err
}

// writeTree writes name's parent directories and name, size bytes of r,
// as a tar stream.
func writeTree(tw *tar.Writer, name string, size int64, r io.Reader) error {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(parts[:i], "/") + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := io.CopyN(tw, r, size)
	return err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// checkArch refuses a helper built for another architecture than the
// engine's. The engine's answer is kept; a failure to ask is not.
func (d *Driver) checkArch(ctx context.Context) error {
	d.archMu.Lock()
	defer d.archMu.Unlock()
	if d.archChecked {
		return d.archErr
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.c.Info(cctx, client.InfoOptions{})
	if err != nil {
		return d.wrap(ctx, err, "info")
	}
	d.archChecked = true
	if arch := engineArch(res.Info.Architecture); arch != d.helper.Arch {
		d.archErr = fmt.Errorf("%w: the docker engine at %s runs %s, but the sandbox helper %s (this lathe) is built for %s: "+
			"the remote provider needs an engine of the daemon's architecture",
			helper.ErrBinary, d.opts.Host, res.Info.Architecture, d.helper.Path, d.helper.Arch)
	}
	return d.archErr
}

// engineArch maps the engine's architecture (uname's) to GOARCH's names.
func engineArch(a string) string {
	switch a {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	case "i386", "i686":
		return "386"
	case "armv7l", "armv6l":
		return "arm"
	}
	return a
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// forceRemove removes a short-lived container, even after ctx ends.
func (d *Driver) forceRemove(ctx context.Context, id string) {
	rctx, cancel := d.slowCall(context.WithoutCancel(ctx))
	defer cancel()
	d.c.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true})
}
