package docker_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// sshd runs an OpenSSH server on a free loopback port for this test only
// (its own host key, config and authorized key) and returns the port and
// the ssh options that reach it with the client key it made.
func sshd(t *testing.T) (port int, opts []string) {
	t.Helper()
	bin, err := exec.LookPath("sshd")
	if err != nil {
		bin = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(bin); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("no sshd to test ssh:// against (make docker-up installs it): %v", err)
		}
		t.Skip("no sshd, or not root")
	}
	dir := t.TempDir()
	keygen := func(name string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	keygen("host")
	keygen("client")
	pub, err := os.ReadFile(filepath.Join(dir, "host.pub"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	must(t, os.Rename(filepath.Join(dir, "client.pub"), filepath.Join(dir, "authorized_keys")))
	must(t, os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(fmt.Sprintf("[127.0.0.1]:%d %s", port, pub)), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/host
AuthorizedKeysFile %s/authorized_keys
PidFile %s/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
`, port, dir, dir, dir)), 0o600))
	os.MkdirAll("/run/sshd", 0o755) // its privilege separation dir
	cmd := exec.Command(bin, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sandboxtest.WaitFor(t, 10*time.Second, func() bool {
		c, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return port, []string{"-o", "UserKnownHostsFile=" + filepath.Join(dir, "known_hosts"), "-o", "StrictHostKeyChecking=yes",
		"-o", "IdentityFile=" + filepath.Join(dir, "client"), "-o", "IdentitiesOnly=yes"}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSSH reaches the engine as `docker -H ssh://` does: the user's ssh
// runs `docker system dial-stdio` on the host, here an sshd of the test's
// in front of this machine's engine.
func TestSSH(t *testing.T) {
	if !strings.HasPrefix(dockertest.Host(), "unix:///var/run/docker.sock") {
		t.Skip("dial-stdio on the ssh side reaches the default socket")
	}
	dockertest.Docker(t, docker.Options{}) // skips without an engine
	port, opts := sshd(t)
	d := dockertest.Docker(t, docker.Options{Host: fmt.Sprintf("ssh://root@127.0.0.1:%d", port), SSHOptions: opts, Owner: "lathe-test-ssh"})
	spec := sandboxtest.NewSpec(t)
	sb := sandboxtest.Prepare(t, d, spec)
	es := sandbox.ExecSpec{Args: []string{"sh", "-c", "cat; echo; pwd"}, Stdin: strings.NewReader("over ssh")}
	if out, _, code := sandboxtest.Output(t, sb, es); out != "over ssh\n"+spec.WorkingDir+"\n" || code != 0 {
		t.Errorf("exec over ssh: %q, code %d", out, code)
	}
	if _, err := sb.Exec(sandboxtest.Context(t, time.Minute), sandbox.ExecSpec{Args: []string{"python3", "-c", sandboxtest.PyServer, "8000", "ssh"}}); err != nil {
		t.Fatal(err)
	}
	if got := sandboxtest.Greeting(t, sb, 8000, 30*time.Second); got != "ssh" {
		t.Errorf("Dial over ssh: %q", got)
	}
}
