package docker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// Proxy modes.
const (
	forward = iota // pass connections to the engine
	hang           // accept and never answer, as a stalled link does
	refuse         // close every connection at once
)

// proxy stands between the driver and the engine's unix socket, so that a
// test can put TLS in front of it or cut the link.
type proxy struct {
	ln     net.Listener
	target string // the engine's socket path
	mode   atomic.Int32

	mu    sync.Mutex
	conns map[net.Conn]bool
}

func newProxy(t *testing.T, ln net.Listener) *proxy {
	t.Helper()
	target, ok := strings.CutPrefix(dockertest.Host(), "unix://")
	if !ok {
		t.Skip("the proxy tests need the engine on a unix socket")
	}
	dockertest.Docker(t, docker.Options{}) // skips without an engine
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		switch p.mode.Load() {
		case refuse:
			c.Close()
			continue
		case hang:
			p.track(c)
			continue
		}
		go p.pipe(c)
	}
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = true
	}
}

func (p *proxy) pipe(c net.Conn) {
	e, err := net.Dial("unix", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.track(c, e)
	half := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}
	go half(e, c)
	half(c, e)
}

// cut closes every connection the proxy holds.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// pki writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all made here, and returns the server's TLS config and the
// client's files.
func pki(t *testing.T) (*tls.Config, docker.TLS) {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lathe test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "lathe test"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	write := func(name, typ string, der []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	server := issue(2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	client := issue(3, x509.ExtKeyUsageClientAuth, nil)
	clientKey, _ := x509.MarshalECPrivateKey(client.PrivateKey.(*ecdsa.PrivateKey))
	files := docker.TLS{
		CAFile:   write("ca.pem", "CERTIFICATE", caDER),
		CertFile: write("cert.pem", "CERTIFICATE", client.Certificate[0]),
		KeyFile:  write("key.pem", "EC PRIVATE KEY", clientKey),
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}, files
}

// TestTCPWithTLS reaches the engine through tcp:// and TLS that requires
// the client's certificate: lifecycle, exec with stdin, a terminal and Dial
// all work over it, and a client without a certificate gets nowhere.
func TestTCPWithTLS(t *testing.T) {
	serverTLS, files := pki(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	newProxy(t, ln)
	host := "tcp://" + ln.Addr().String()
	d := dockertest.Docker(t, docker.Options{Host: host, TLS: files, Owner: "lathe-test-tls"})
	spec := sandboxtest.NewSpec(t)
	sb := sandboxtest.Prepare(t, d, spec)
	es := sandbox.ExecSpec{Args: []string{"sh", "-c", "cat; echo; pwd"}, Stdin: strings.NewReader("over tls")}
	if out, _, code := sandboxtest.Output(t, sb, es); out != "over tls\n"+spec.WorkingDir+"\n" || code != 0 {
		t.Errorf("exec over TLS: %q, code %d", out, code)
	}
	if out, _, _ := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"stty", "size"}, TTY: true, Rows: 7, Cols: 77}); out != "7 77\r\n" {
		t.Errorf("terminal over TLS: %q", out)
	}
	if _, err := sb.Exec(sandboxtest.Context(t, time.Minute), sandbox.ExecSpec{Args: []string{"python3", "-c", sandboxtest.PyServer, "8000", "tls"}}); err != nil {
		t.Fatal(err)
	}
	if got := sandboxtest.Greeting(t, sb, 8000, 30*time.Second); got != "tls" {
		t.Errorf("Dial over TLS: %q", got)
	}

	ctx := sandboxtest.Context(t, time.Minute)
	for name, f := range map[string]docker.TLS{"no client certificate": {CAFile: files.CAFile}, "no TLS": {}} {
		if _, err := docker.New(ctx, docker.Options{Host: host, TLS: f, Timeout: 5 * time.Second}); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestEngineCut cuts the link to the engine, then stalls it: every call
// fails with sandbox.ErrUnavailable naming the host within the timeout, a
// running sandbox is not taken for dead, and all works again once the link
// is back.
func TestEngineCut(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, ln)
	host := "unix://" + sock
	const timeout = 2 * time.Second
	d := dockertest.Docker(t, docker.Options{Host: host, Owner: "lathe-test-cut", Timeout: timeout})
	spec := sandboxtest.NewSpec(t)
	sb := sandboxtest.Prepare(t, d, spec)
	if out, _, _ := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"echo", "up"}}); out != "up\n" {
		t.Fatalf("before the cut: %q", out)
	}
	// victim is killed while the link is cut: the driver learns it when
	// the link is back.
	victim := sandboxtest.Prepare(t, d, sandboxtest.NewSpec(t)).(*docker.Sandbox)

	calls := map[string]func(ctx context.Context) error{
		"New": func(ctx context.Context) error {
			_, err := docker.New(ctx, docker.Options{Host: host, Timeout: timeout})
			return err
		},
		"Prepare": func(ctx context.Context) error { _, err := d.Prepare(ctx, sandboxtest.NewSpec(t)); return err },
		"Attach":  func(ctx context.Context) error { _, err := d.Attach(ctx); return err },
		"Exec": func(ctx context.Context) error {
			_, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"true"}})
			return err
		},
		"Dial":   func(ctx context.Context) error { _, err := sb.Dial(ctx, 8000); return err },
		"Remove": func(ctx context.Context) error { return d.Remove(ctx, spec.SessionID, spec.Generation) },
	}
	for _, mode := range []struct {
		name string
		mode int32
	}{{"refused", refuse}, {"stalled", hang}} {
		p.mode.Store(mode.mode)
		p.cut()
		var wg sync.WaitGroup
		for name, call := range calls {
			wg.Go(func() {
				start := time.Now()
				err := call(sandboxtest.Context(t, time.Minute))
				el := time.Since(start)
				if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), host) {
					t.Errorf("%s, %s: %v, want ErrUnavailable naming %s", mode.name, name, err, host)
				}
				if el > 4*timeout+time.Second { // creating or removing may take 4 timeouts
					t.Errorf("%s, %s took %v with a %v timeout", mode.name, name, el, timeout)
				}
			})
		}
		wg.Wait()
	}
	if err := sb.Err(); err != nil {
		t.Errorf("the sandbox was taken for dead while the engine was cut off: %v", err)
	}
	direct := dockertest.Docker(t, docker.Options{Owner: "lathe-test-cut"})
	if err := direct.Kill(sandboxtest.Context(t, time.Minute), victim.RuntimeID()); err != nil {
		t.Fatal(err)
	}
	p.mode.Store(forward)
	p.cut()
	select {
	case <-victim.Done():
	case <-sandboxtest.Context(t, 30*time.Second).Done():
		t.Error("a sandbox killed while the link was cut is not seen dead after it is back")
	}
	if out, _, _ := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"echo", "back"}}); out != "back\n" {
		t.Errorf("after the link is back: %q", out)
	}
}

// TestTemplateIsTheOnlyImage: with Options.Template, a Spec's image is not
// used.
func TestTemplateIsTheOnlyImage(t *testing.T) {
	d := dockertest.Docker(t, docker.Options{Owner: "lathe-test-template", Template: docker.DefaultImage})
	spec := sandboxtest.NewSpec(t)
	spec.Image = "lathe.invalid/not-the-template:1"
	sb := sandboxtest.Prepare(t, d, spec)
	if out, _, _ := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"sh", "-c", "test -x /usr/bin/python3 && echo template"}}); out != "template\n" {
		t.Errorf("image in use: %q", out)
	}
}

// TestLabels: a container carries the contract's labels, and Attach gives
// back its creation token and the engine's container ID.
func TestLabels(t *testing.T) {
	d := dockertest.Docker(t, docker.Options{Owner: "lathe-test-labels"})
	spec := sandboxtest.NewSpec(t)
	spec.CreationToken = "tok-" + spec.SessionID
	sb := sandboxtest.Prepare(t, d, spec).(*docker.Sandbox)
	restarted := dockertest.Docker(t, docker.Options{Owner: "lathe-test-labels"})
	sbs, err := restarted.Attach(sandboxtest.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var found *docker.Sandbox
	for _, s := range sbs {
		if s.SessionID() == spec.SessionID {
			found = s.(*docker.Sandbox)
		}
	}
	if found == nil || found.CreationToken() != spec.CreationToken || found.RuntimeID() != sb.RuntimeID() || found.RuntimeID() == "" {
		t.Fatalf("attached: %+v", found)
	}
	labels, err := restarted.Labels(sandboxtest.Context(t, time.Minute), sb.RuntimeID())
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{docker.LabelCreationToken: spec.CreationToken, docker.LabelSession: spec.SessionID, docker.LabelDaemon: "lathe-test-labels"} {
		if labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, labels[k], want)
		}
	}
	// Another attempt's token replaces the container.
	spec.CreationToken += "-2"
	sb2 := sandboxtest.Prepare(t, d, spec).(*docker.Sandbox)
	if sb2.RuntimeID() == sb.RuntimeID() || sb2.CreationToken() != spec.CreationToken {
		t.Errorf("a second attempt kept container %s (token %q)", sb2.RuntimeID(), sb2.CreationToken())
	}
}

// TestSSHUnreachable: an ssh:// host runs the user's ssh; one that cannot be
// reached is sandbox.ErrUnavailable naming the host, within the timeout.
func TestSSHUnreachable(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	const host = "ssh://nobody@lathe.invalid"
	start := time.Now()
	_, err := docker.New(sandboxtest.Context(t, time.Minute), docker.Options{Host: host, Timeout: 3 * time.Second})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), host) || strings.Contains(err.Error(), "containerd") {
		t.Errorf("New(%s): %v, want ErrUnavailable naming the host and not containerd", host, err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("New(%s) took %v", host, el)
	}
	for _, bad := range []string{"http://box", "ssh://", "unix://x:y:z%"} {
		if _, err := docker.New(sandboxtest.Context(t, time.Minute), docker.Options{Host: bad}); err == nil || errors.Is(err, sandbox.ErrUnavailable) {
			t.Errorf("New(%s): %v, want a configuration error", bad, err)
		}
	}
}
