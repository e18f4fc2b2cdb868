package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRemoteDefaults(t *testing.T) {
	clearEnv(t)
	c := Default()
	if r := c.Sandbox.Remote; r.Engine != EngineDocker || r.Host != DefaultDockerHost || c.Sandbox.Template() != c.Sandbox.DefaultImage {
		t.Errorf("defaults: %+v, template %q", r, c.Sandbox.Template())
	}
	t.Setenv("LATHE_DOCKER", "unix:///tmp/d.sock")
	if got := Default().Sandbox.Remote.Host; got != "unix:///tmp/d.sock" {
		t.Errorf("$LATHE_DOCKER: host %q", got)
	}
}

func TestParseRemote(t *testing.T) {
	clearEnv(t)
	c, err := Parse([]byte(`
sandbox:
  provider: remote
  remote:
    host: "ssh://builder@build-box"
    template: "lathe.local/sandbox:bookworm"
`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox
	if s.Provider != SandboxRemote || s.Remote.Engine != EngineDocker || s.Remote.Host != "ssh://builder@build-box" ||
		s.Template() != "lathe.local/sandbox:bookworm" {
		t.Errorf("parsed: %+v", s)
	}
	if _, err := Parse([]byte("sandbox:\n  remote:\n    hots: x\n")); err == nil {
		t.Error("a misspelt remote key parsed")
	}
}

func TestValidateRemote(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	pem := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tlsFiles := RemoteTLS{CAFile: pem("ca.pem"), CertFile: pem("cert.pem"), KeyFile: pem("key.pem")}
	tests := []struct {
		name   string
		remote Remote
		want   string // "" means valid
	}{
		{"unix", Remote{Host: "unix:///var/run/docker.sock"}, ""},
		{"unix relative", Remote{Host: "unix://var/run/docker.sock"}, `sandbox.remote.host: "unix://var/run/docker.sock" must be unix:// and an absolute socket path`},
		{"no host", Remote{}, `sandbox.remote.host: required with the remote provider`},
		{"scheme", Remote{Host: "http://box:2375"}, `sandbox.remote.host: "http://box:2375": the scheme must be unix, tcp or ssh`},
		{"engine", Remote{Engine: "podman", Host: "unix:///run/podman.sock"}, `sandbox.remote.engine: "podman" is not one of docker`},
		{"tcp loopback plain", Remote{Host: "tcp://127.0.0.1:2375"}, ""},
		{"tcp without port", Remote{Host: "tcp://box", TLS: tlsFiles}, `sandbox.remote.host: "tcp://box" must be tcp://HOST:PORT`},
		{"tcp beyond loopback plain", Remote{Host: "tcp://box:2375"}, `sandbox.remote.host: "tcp://box:2375" is reachable beyond this machine without TLS`},
		{"tcp with tls", Remote{Host: "tcp://box:2376", TLS: tlsFiles}, ""},
		{"tcp with ca only", Remote{Host: "tcp://box:2376", TLS: RemoteTLS{CAFile: tlsFiles.CAFile}}, ""},
		{"cert without key", Remote{Host: "tcp://box:2376", TLS: RemoteTLS{CertFile: tlsFiles.CertFile}}, `sandbox.remote.tls: cert_file and key_file go together`},
		{"tls relative", Remote{Host: "tcp://box:2376", TLS: RemoteTLS{CAFile: "ca.pem"}}, `sandbox.remote.tls.ca_file: "ca.pem" must be an absolute path`},
		{"tls missing file", Remote{Host: "tcp://box:2376", TLS: RemoteTLS{CAFile: filepath.Join(dir, "none.pem")}}, `sandbox.remote.tls.ca_file: stat`},
		{"tls on ssh", Remote{Host: "ssh://me@box", TLS: tlsFiles}, `sandbox.remote.tls: is for tcp:// hosts only, and the host is ssh://`},
		{"ssh", Remote{Host: "ssh://me@box:2222"}, ""},
		{"ssh without host", Remote{Host: "ssh://"}, `sandbox.remote.host: "ssh://" must be ssh://[USER@]HOST[:PORT]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Sandbox.Provider = SandboxRemote
			if tt.remote.Engine == "" {
				tt.remote.Engine = EngineDocker
			}
			c.Sandbox.Remote = tt.remote
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %s", err, tt.want)
			}
		})
	}
	// The remote keys are not checked under containerd.
	c := Default()
	c.Sandbox.Remote = Remote{Engine: "x"}
	if err := c.Validate(); err != nil {
		t.Errorf("containerd provider with a bad remote block: %v", err)
	}
}
