// Command lathe-fakellm serves a fakellm script on a loopback address, for
// demos and for tests that run the daemon as a separate process.
//
//	lathe-fakellm -listen 127.0.0.1:0 -script turns.json
//
// It prints "lathe-fakellm listening on http://HOST:PORT" to stderr once it
// accepts connections, and stops on SIGINT or SIGTERM.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"lathe/runtime/llm/fakellm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lathe-fakellm:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("lathe-fakellm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	scriptPath := fs.String("script", "", "JSON script file (fakellm.Script); empty serves no turns")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var script fakellm.Script
	if *scriptPath != "" {
		b, err := os.ReadFile(*scriptPath)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&script); err != nil {
			return fmt.Errorf("script %s: %w", *scriptPath, err)
		}
	}
	h, err := fakellm.NewHandler(script)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "lathe-fakellm listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	h.Close() // release stalls so that Shutdown can finish
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
