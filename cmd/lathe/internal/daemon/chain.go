package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lathe/journal"
)

// ChainHint adds to a broken hash chain what the user can do about it.
func ChainHint(err error) error {
	var ce *journal.ChainError
	if !errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%w\nrun `lathe journal verify` to name the break, and `lathe journal dump --before %d` to export the "+
		"intact events before seq %d; move journal.db aside, it is evidence, and restore it from a backup or start afresh",
		err, ce.Seq, ce.Seq)
}

// verifyTail checks the hash chain of the events the projections replayed
// on top of their checkpoint (after is the checkpoint's seq; 0 without one),
// before the daemon serves: a journal whose tail was changed never starts.
func (d *Daemon) verifyTail(ctx context.Context, after uint64) error {
	if _, err := d.journal.VerifyChain(ctx, after); err != nil {
		return ChainHint(err)
	}
	return nil
}

// verifyAll checks the whole chain in the background after the daemon
// serves, since a long journal takes a second or more; a break stops the
// daemon (Fatal) with the same message a refused start gives.
func (d *Daemon) verifyAll(ctx context.Context) {
	t0 := time.Now()
	n, err := d.journal.VerifyChain(ctx, 0)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		// The daemon has served since its listening line: say so, and what
		// clients may have seen meanwhile (README, "Crash and tamper").
		err = fmt.Errorf("stopping after %v of serving from the checkpoint: the background check of the whole hash chain failed "+
			"(reads in that window came from the checkpoint; writes were appended after the break): %w",
			time.Since(t0).Round(time.Millisecond), ChainHint(err))
		d.log.Error("the journal's hash chain is broken; stopping", "err", err)
		select {
		case d.fatal <- err:
		default:
		}
		return
	}
	d.log.Info("hash chain verified", "events", n, "took", time.Since(t0))
}

// Fatal delivers an error that must stop the daemon (a broken hash chain
// found after start).
func (d *Daemon) Fatal() <-chan error { return d.fatal }
