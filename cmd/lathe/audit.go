package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"lathe/cmd/lathe/internal/daemon"
	"lathe/journal"
	"lathe/runtime/blobs"
	"lathe/transport"
)

// journalCmd runs `lathe journal verify|dump`.
func journalCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: lathe journal verify|dump [--data DIR] [--aggregate ID] [--after SEQ]")
	}
	sub := args[0]
	fset := flag.NewFlagSet("journal "+sub, flag.ContinueOnError)
	var c common
	c.register(fset)
	aggregate := fset.String("aggregate", "", "dump only this aggregate's events (its full audit trail)")
	after := fset.Uint64("after", 0, "dump only events with a greater seq")
	before := fset.Uint64("before", 0, "dump only events with a smaller seq (0: all): the intact part before a broken link")
	if err := fset.Parse(args[1:]); err != nil {
		return err
	}
	_, dataDir, err := c.load(nil)
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, "journal.db")
	j, err := journal.Open(path, journal.Options{ReadOnly: true, LockTimeout: 2 * time.Second})
	if errors.Is(err, journal.ErrLocked) {
		return fmt.Errorf("%w; stop the daemon first (journal %s)", err, path)
	}
	if err != nil {
		return err
	}
	defer j.Close()
	switch sub {
	case "verify":
		rep, err := j.Verify()
		if err != nil {
			return fmt.Errorf("verify %s: %w", path, err)
		}
		if _, err := j.VerifyChain(context.Background(), 0); err != nil {
			return fmt.Errorf("verify %s: %w", path, daemon.ChainHint(err))
		}
		nblobs, err := verifyBlobs(filepath.Join(dataDir, "blobs"))
		if err != nil {
			return fmt.Errorf("verify %s: %w", dataDir, err)
		}
		seq, hash := j.HeadHash()
		out, _ := json.Marshal(struct {
			journal.Report
			HeadSeq  uint64 `json:"head_seq"`
			HeadHash string `json:"head_hash"`
			Blobs    int    `json:"blobs"`
		}{rep, seq, hash, nblobs})
		fmt.Fprintf(stdout, "ok %s\n", out)
		return nil
	case "dump":
		w := bufio.NewWriter(stdout)
		emit := func(seq uint64, raw []byte) error {
			if *before > 0 && seq >= *before {
				return errDumped
			}
			w.Write(raw)
			return w.WriteByte('\n')
		}
		// Envelopes as published, with their hashes; a journal no daemon
		// of this version has opened yet has no chain to add.
		scan, scanAggregate := j.ScanSealed, j.ScanAggregateSealed
		if !j.HasChain() {
			scan, scanAggregate = j.Scan, j.ScanAggregate
		}
		if *aggregate != "" {
			err = scanAggregate(context.Background(), *aggregate, *after, 0, emit)
		} else {
			err = scan(context.Background(), *after, 0, emit)
		}
		if err != nil && !errors.Is(err, errDumped) {
			return err
		}
		return w.Flush()
	default:
		return fmt.Errorf("unknown journal command %q (verify or dump)", sub)
	}
}

// verifyBlobs checks every blob of the data dir against its hash; a data
// dir without a blob store has none to check.
func verifyBlobs(dir string) (int, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	store, err := blobs.Open(dir)
	if err != nil {
		return 0, err
	}
	return store.Verify()
}

// errDumped ends a dump at --before.
var errDumped = errors.New("dumped")

// printURL prints the workbench link; with keys configured it is the
// sign-in link, which carries a secret: it is printed, never logged.
func printURL(args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("url", flag.ContinueOnError)
	var c common
	c.register(fset)
	if err := fset.Parse(args); err != nil {
		return err
	}
	cfg, _, err := c.load(nil)
	if err != nil {
		return err
	}
	secret := make([]byte, transport.MinCookieSecret)
	_, _ = rand.Read(secret) // the link does not depend on it
	g, err := transport.NewGuard(daemon.SecurityOptions(cfg, secret), nil, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, g.SignInURL("http://localhost:"+listenPort(cfg.Server.Listen)))
	return nil
}
