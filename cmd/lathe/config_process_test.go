package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"lathe/journal/events"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// TestConfigFileUnreadableInItsWorkspace: `lathe serve --config` names a
// file in a folder that becomes a Workspace (lathe.yaml in the project, a
// common layout); that Workspace's sandbox reads the file as empty.
func TestConfigFileUnreadableInItsWorkspace(t *testing.T) {
	containerdtest.Namespace(t, procNamespace)
	cfg := writeConfig(t, fmt.Sprintf("sandbox:\n  default_image: %q\n  containerd:\n    address: %q\n    namespace: %q\n",
		containerdtest.Image, containerdtest.Address(), procNamespace))
	dir, err := filepath.EvalSymlinks(filepath.Dir(cfg))
	if err != nil {
		t.Fatal(err)
	}
	d := procStart(t, t.TempDir(), "--config", cfg)
	id := procCreate(t, d, dir, "")
	if ss := procWait(t, d, id, "settled", procSettled); ss.Environment.State != events.EnvReady {
		t.Fatalf("environment %+v", ss.Environment)
	}
	if code := procRunTask(t, d, id, "test -e lathe.yaml && ! test -s lathe.yaml"); code != 0 {
		t.Errorf("the sandbox read the config file (the check exited %d)", code)
	}
	procDelete(t, d, id)
	d.stop(t)
}
