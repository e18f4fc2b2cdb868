package doctext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PDF extraction limits.
const (
	// Timeout bounds one PDF's extraction, child start included.
	Timeout = 20 * time.Second
	// MaxPDFPages bounds the pages read; extraction also stops once the
	// text reaches its limit.
	MaxPDFPages = 2000
	// MaxPDFInput bounds a PDF that is not an *os.File, which the child
	// reads into memory.
	MaxPDFInput = 32 << 20
	// childCPU is the child's CPU seconds (RLIMIT_CPU), a backstop
	// behind Timeout.
	childCPU = 60
	// stderrTail bounds the child's diagnostics kept for the error.
	stderrTail = 2 << 10
)

// Environment of the child (see child.go).
const (
	envChild  = "LATHE_DOCTEXT_PDF_CHILD"
	envLimit  = "LATHE_DOCTEXT_LIMIT"
	envMemory = "LATHE_DOCTEXT_MEMORY"
)

// childMemory is what a child may allocate beyond what it holds when it
// starts (RLIMIT_DATA). Tests lower it to make memory bombs cheap.
var childMemory uint64 = 512 << 20

// ErrTimeout: a PDF's extraction overran Timeout (or ctx's deadline).
var ErrTimeout = errors.New("doctext: PDF extraction timed out")

// slots bounds the children running at once: each may use a CPU and
// childMemory.
var slots = make(chan struct{}, 2)

// extractPDF runs a child that extracts r's text, and returns at most
// limit bytes of it as valid UTF-8.
func extractPDF(ctx context.Context, r io.ReaderAt, size int64, limit int) ([]byte, error) {
	if size > MaxPDFInput {
		if _, isFile := r.(*os.File); !isFile {
			return nil, fmt.Errorf("doctext: a %d-byte PDF is over the %d MiB in-memory limit", size, MaxPDFInput>>20)
		}
	}
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()

	// /proc/self/exe is this executable even if its file was replaced
	// since it started.
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{"lathe-doctext-pdf"}
	cmd.Env = []string{envChild + "=1", envLimit + "=" + strconv.Itoa(limit),
		envMemory + "=" + strconv.FormatUint(childMemory, 10), "GOMAXPROCS=1"}
	cmd.Dir = "/"
	if f, ok := r.(*os.File); ok {
		cmd.Stdin = f // the child reads it in place with pread
	} else {
		cmd.Stdin = io.NewSectionReader(r, 0, size)
	}
	out := &boundedBuffer{max: limit}
	errOut := &boundedBuffer{max: stderrTail}
	cmd.Stdout, cmd.Stderr = out, errOut
	// The child dies with the daemon. Pdeathsig fires when the thread that
	// started the child exits, not the process: keep this goroutine on its
	// thread until the child is reaped.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	runtime.LockOSThread()
	err := cmd.Run()
	runtime.UnlockOSThread()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, ErrTimeout
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		msg, _, _ := strings.Cut(strings.TrimSpace(errOut.String()), "\n")
		if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 1 {
			return nil, fmt.Errorf("doctext: %s", msg) // the PDF did not parse
		}
		return nil, fmt.Errorf("doctext: the PDF parser crashed (%v): %s", err, msg)
	}
	return []byte(strings.ToValidUTF8(string(cut(out.Bytes(), limit)), "\uFFFD")), nil
}

// boundedBuffer keeps the first max bytes written to it and drops the
// rest, so a child cannot make its parent hold more.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
