package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/cmd/lathe/internal/daemon"
)

// common flags shared by the subcommands that read the configuration.
type common struct {
	config, data string
	// file is the config file load read ("" for none).
	file string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "config file (default: $LATHE_CONFIG, then ./lathe.yaml)")
	fs.StringVar(&c.data, "data", "", "data directory (default: $XDG_DATA_HOME/lathe)")
}

// load reads and validates the configuration, applying overrides first.
func (c *common) load(override func(*config.Config)) (config.Config, string, error) {
	cfg, file, err := config.Load(c.config)
	if err != nil {
		return cfg, "", err
	}
	c.file = file
	if override != nil {
		override(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, "", fmt.Errorf("invalid configuration:\n%w", err)
	}
	dir, err := config.DataDir(c.data, cfg)
	return cfg, dir, err
}

func serve(args []string, stderr io.Writer) error {
	fset := flag.NewFlagSet("serve", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var c common
	c.register(fset)
	listen := fset.String("listen", "", "listen address, host:port (overrides server.listen)")
	if err := fset.Parse(args); err != nil {
		return err
	}
	cfg, dataDir, err := c.load(func(cfg *config.Config) {
		if *listen != "" {
			cfg.Server.Listen = *listen
		}
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel()}))
	d, err := daemon.Start(ctx, cfg, dataDir, log, buildVersion(), daemon.WithConfigFile(c.file))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		d.Close()
		return fmt.Errorf("listen on %s: %w", cfg.Server.Listen, err)
	}
	srv := &http.Server{
		Handler:           d.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(stderr, "lathe listening on http://%s\n", ln.Addr())
	if addr := cfg.Telemetry.MetricsListen; addr != "" {
		if _, err := d.ServeMetrics(ctx, addr); err != nil {
			log.Error("metrics listener", "err", err)
		}
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	go d.CheckpointLoop(ctx)
	go d.BlobGCLoop(ctx)

	select {
	case err = <-served:
		err = fmt.Errorf("serve: %w", err)
	case err = <-d.Fatal():
	case <-ctx.Done():
		err = nil
	}
	stop()
	// One budget for the whole shutdown (CONTRACT.md: exit within 10 s):
	// daemon.ShutdownGrace for the drains, then Close's bounded steps.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), daemon.ShutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Shutdown(shutdownCtx) })
	wg.Go(func() { _ = d.Shutdown(shutdownCtx) })
	wg.Wait()
	d.Close()
	return err
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("LATHE_LOG"))); err != nil {
		return slog.LevelWarn
	}
	return l
}

// listenPort returns the port of a host:port listen address.
func listenPort(listen string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" || port == "0" {
		return "8080"
	}
	return strings.TrimSpace(port)
}
