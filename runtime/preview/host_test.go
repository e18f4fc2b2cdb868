package preview

import (
	"errors"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
)

const testID = "01J9ZQ3V5K8WQ2N4X6Y7B8C9DE"

func TestParseHost(t *testing.T) {
	lower := strings.ToLower(testID)
	tests := []struct {
		host    string
		want    Host
		wantErr string
	}{
		{host: lower + "-p5173.localhost:8080", want: Host{Session: testID, Port: 5173, ListenPort: 8080}},
		{host: testID + "-P5173.LOCALHOST:8080", want: Host{Session: testID, Port: 5173, ListenPort: 8080}},
		{host: lower + "-p1.localhost", want: Host{Session: testID, Port: 1, ListenPort: 80}},
		{host: lower + "-p65535.localhost:65535", want: Host{Session: testID, Port: 65535, ListenPort: 65535}},
		{host: lower + "-p0.localhost:8080", wantErr: "port 0 is not a port"},
		{host: lower + "-p00.localhost:8080", wantErr: "port 0 is not a port"},
		{host: lower + "-p65536.localhost:8080", wantErr: "above 65535"},
		{host: lower + "-p123456.localhost:8080", wantErr: "above 65535"},
		{host: lower + "-p08080.localhost:8080", wantErr: "leading zero"},
		{host: lower + "-p+80.localhost:8080", wantErr: "not a decimal port"},
		{host: lower + "-p-80.localhost:8080", wantErr: "not a decimal port"},
		{host: lower + "-p.localhost:8080", wantErr: "port is empty"},
		{host: lower + "-p80.localhost:", wantErr: "listener port"},
		{host: lower + "-p80.localhost:0", wantErr: "listener port"},
		{host: lower + "-p80.localhost:99999", wantErr: "listener port"},
		{host: lower + "-p80.localhost:80:80", wantErr: "listener port"},
		{host: lower + "-p80.localhost.:8080", wantErr: "does not end in .localhost"},
		{host: lower + "p80.localhost:8080", wantErr: "is not <session_id>-p<port>"},
		{host: lower[1:] + "-p80.localhost:8080", wantErr: "does not start with a session ID"},
		{host: "8" + lower[1:] + "-p80.localhost:8080", wantErr: "does not start with a session ID"}, // overflows 128 bits
		{host: strings.Replace(lower, "9", "u", 1) + "-p80.localhost:8080", wantErr: "does not start with a session ID"},
		{host: "x." + lower + "-p80.localhost:8080", wantErr: "does not start with a session ID"},
		{host: "-p80.localhost:8080", wantErr: "does not start with a session ID"},
		{host: "localhost:8080", wantErr: "does not end in .localhost"},
		{host: "example.com", wantErr: "does not end in .localhost"},
		{host: "", wantErr: "does not end in .localhost"},
		{host: strings.Repeat("a", 300) + ".localhost", wantErr: "longer than 255"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got, err := ParseHost(tt.host)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrHost) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseHost(%q) = %+v, %v; want an ErrHost error containing %q", tt.host, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseHost(%q) = %+v, %v; want %+v", tt.host, got, err, tt.want)
			}
			if a := got.Authority(); !strings.EqualFold(a, strings.TrimSuffix(tt.host, ":80")) {
				t.Errorf("Authority() = %q, want %q case-insensitively", a, tt.host)
			}
		})
	}
}

func TestClaims(t *testing.T) {
	for host, want := range map[string]bool{
		"a.localhost":              true,
		"A.LocalHost:8080":         true,
		"x-p80.localhost.:8080":    true,
		"deep.sub.localhost":       true,
		"localhost":                false,
		"localhost:8080":           false,
		"127.0.0.1:8080":           false,
		"[::1]:8080":               false,
		"notlocalhost":             false,
		"a.localhost.example.com":  false,
		"evil-localhost:8080":      false,
		"[a.localhost]:8080":       true, // malformed, but still ours to refuse
		"":                         false,
		"foo.localhost:bad:port:x": true,
	} {
		if got := Claims(host); got != want {
			t.Errorf("Claims(%q) = %v, want %v", host, got, want)
		}
	}
}

func FuzzParseHost(f *testing.F) {
	lower := strings.ToLower(testID)
	for _, s := range []string{
		lower + "-p5173.localhost:8080", testID + "-p1.LOCALHOST", lower + "-p0.localhost:1",
		lower + "-p65536.localhost:1", "a-p1.localhost", "-p.localhost:", ":", "[::1]:80", "x.localhost.",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHost(s)
		if err != nil {
			if !errors.Is(err, ErrHost) {
				t.Fatalf("ParseHost(%q): error %v is not ErrHost", s, err)
			}
			return
		}
		if !Claims(s) {
			t.Fatalf("ParseHost(%q) accepted a host Claims refuses", s)
		}
		if h.Port < 1 || h.Port > 65535 || h.ListenPort < 1 || h.ListenPort > 65535 {
			t.Fatalf("ParseHost(%q) = %+v: port out of range", s, h)
		}
		if id, err := ulid.ParseStrict(h.Session); err != nil || id.String() != h.Session {
			t.Fatalf("ParseHost(%q) = %+v: session is not a canonical ID", s, h)
		}
		// One Session and port have one authority: the parse round-trips.
		back, err := ParseHost(h.Authority())
		if err != nil || back != h {
			t.Fatalf("ParseHost(%q) = %+v; its authority %q parses to %+v, %v", s, h, h.Authority(), back, err)
		}
	})
}
