package docker_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// tarOf packs n files of a few bytes each under dir/ (dirs of 100 files).
func tarOf(t testing.TB, n int) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range n {
		if i%100 == 0 {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/", i/100), Typeflag: tar.TypeDir, Mode: 0o755})
		}
		body := fmt.Sprintf("file %d\n", i)
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/f%d.txt", i/100, i), Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// TestCopyInOut: a tar stream goes into the working dir in one request and
// comes back out.
func TestCopyInOut(t *testing.T) {
	d := dockertest.Docker(t, docker.Options{Owner: "lathe-test-copy"})
	spec := sandboxtest.NewSpec(t)
	sb := sandboxtest.Prepare(t, d, spec).(*docker.Sandbox)
	ctx := sandboxtest.Context(t, time.Minute)
	if err := sb.CopyIn(ctx, spec.WorkingDir, tarOf(t, 250)); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"sh", "-c", "find . -type f | wc -l; cat d2/f249.txt; stat -c %U d2/f249.txt"}})
	if out != "250\nfile 249\nroot\n" {
		t.Errorf("after CopyIn: %q %q", out, errOut)
	}
	rc, err := sb.CopyOut(ctx, spec.WorkingDir+"/d1/f150.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(tr)
	if h.Name != "f150.txt" || string(b) != "file 150\n" {
		t.Errorf("CopyOut: %s %q", h.Name, b)
	}
	if err := sb.CopyIn(ctx, "/no/such/dir", tarOf(t, 1)); err == nil {
		t.Error("CopyIn to a missing dir succeeded")
	}
}

// BenchmarkDockerCopyIn50k unpacks 50,000 small files into a fresh
// sandbox's working dir through the archive API.
//
//	go test -run '^$' -bench DockerCopyIn50k -benchtime 3x ./runtime/sandbox/docker/
func BenchmarkDockerCopyIn50k(b *testing.B) {
	d := dockertest.Docker(b, docker.Options{Owner: "lathe-bench"})
	ctx := sandboxtest.Context(b, 10*time.Minute)
	data := tarOf(b, 50000).Bytes()
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		spec := sandboxtest.NewSpec(b)
		sb := sandboxtest.Prepare(b, d, spec).(*docker.Sandbox)
		b.StartTimer()
		start := time.Now()
		if err := sb.CopyIn(ctx, spec.WorkingDir, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		sb.Teardown(ctx)
		b.StartTimer()
	}
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(took, 50)), "p50-ms")
	b.ReportMetric(float64(len(data))/(1<<20), "tar-MiB")
}
