package daemon

import (
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git"
)

// gitAuthor is the identity Source Control commits are signed with when a
// repository names none of its own: git.author from the config, else the
// daemon user's global git identity (`git config --global user.name` and
// `user.email`, read once at start), else none; with none, commits are
// refused with a message naming how to set one. It never makes one up.
func gitAuthor(ctx context.Context, cfg config.Config, log *slog.Logger) (git.Identity, string) {
	if a := cfg.Git.Author; a.Name != "" && a.Email != "" {
		return git.Identity{Name: a.Name, Email: a.Email}, "config"
	}
	id := git.Identity{Name: hostGitConfig(ctx, "user.name"), Email: hostGitConfig(ctx, "user.email")}
	if id.Name == "" || id.Email == "" {
		log.Warn("no commit identity: Source Control commits are refused until git.author is set in the config or the daemon user's global git config names user.name and user.email")
		return git.Identity{}, ""
	}
	return id, "host"
}

// hostGitConfig reads one key of the daemon user's global git config; ""
// when it is unset, invalid or git is missing.
func hostGitConfig(ctx context.Context, key string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "config", "--global", "--get", key).Output()
	if err != nil { // exit 1: unset
		return ""
	}
	v := strings.TrimSpace(string(out))
	if strings.ContainsAny(v, "<>\n\x00") {
		return ""
	}
	return v
}
