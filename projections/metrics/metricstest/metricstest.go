// Package metricstest checks Prometheus text with the real promtool.
package metricstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Promtool checks text with Debian's `promtool check metrics` (make test
// installs it: web/browser-up.sh). Without promtool the check is skipped
// locally and fails in CI ($CI set).
func Promtool(t testing.TB, text string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing; make test installs it (apt package prometheus)")
		}
		t.Skip("promtool not installed (apt package prometheus; make test installs it)")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
