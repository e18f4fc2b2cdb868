package daemon

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git"
)

func TestGitAuthor(t *testing.T) {
	for _, tc := range []struct {
		name, global string
		author       config.GitAuthor
		want         git.Identity
		source       string
	}{
		{name: "the config wins", global: "[user]\n\tname = Host\n\temail = host@example.org\n", author: config.GitAuthor{Name: "Conf", Email: "conf@example.org"},
			want: git.Identity{Name: "Conf", Email: "conf@example.org"}, source: "config"},
		{name: "the host's global identity", global: "[user]\n\tname = Host\n\temail = host@example.org\n", want: git.Identity{Name: "Host", Email: "host@example.org"}, source: "host"},
		{name: "a host name without an email is none", global: "[user]\n\tname = Host\n"},
		{name: "none", global: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gitconfig")
			writeFile(t, path, tc.global)
			t.Setenv("GIT_CONFIG_GLOBAL", path)
			cfg := config.Default()
			cfg.Git.Author = tc.author
			id, source := gitAuthor(testContext(t, 10*time.Second), cfg, slog.New(slog.DiscardHandler))
			if id != tc.want || source != tc.source {
				t.Errorf("gitAuthor = %+v from %q, want %+v from %q", id, source, tc.want, tc.source)
			}
		})
	}
}
