package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/sessions"

	"lathe/journal/events"
	"lathe/runtime/sandbox"
)

// An operator's change right after create supersedes (or waits out) the
// create's preparation on every path, never answering "another change is
// in progress": with the runtime absent the changed Session is failed with
// its evidence; with it present the change prepares its own generation.
func TestChangeRightAfterCreate(t *testing.T) {
	absent := func(context.Context) (sandbox.Driver, error) {
		return nil, fmt.Errorf("%w: dial containerd: no such socket", sandbox.ErrUnavailable)
	}
	// The create's generation prepares until it is stopped; the next ones
	// are Ready at once.
	slowFirst := &fakeDriver{prepare: func(ctx context.Context, spec sandbox.Spec) error {
		if spec.Generation == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	present := func(context.Context) (sandbox.Driver, error) { return slowFirst, nil }
	for _, c := range []struct {
		name    string
		connect core.Connect
		state   string
		wantErr error
	}{
		{"runtime absent", absent, events.EnvFailed, core.ErrEnvironmentFailed},
		{"runtime present", present, events.EnvReady, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _, w := newServiceWith(t, c.connect)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range 30 {
				ss, err := s.Sessions.CreateSession(ctx, w.ID, sessions.SessionSpec{Name: fmt.Sprintf("s%d", i), Mode: singleAgent()})
				if err != nil {
					t.Fatal(err)
				}
				got, err := s.Environments.ChangeEnvironment(ctx, ss.ID, environments.EnvironmentPlan{SetupReviewed: new(true)})
				if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
					t.Fatalf("PUT right after create %d: %v, want %v", i, err, c.wantErr)
				}
				e := got.Environment
				if e.State != c.state || e.Generation != 2 || e.Owner != "" {
					t.Fatalf("PUT right after create %d: environment %+v, want %s generation 2, settled", i, e, c.state)
				}
				if c.state == events.EnvFailed && (e.Evidence == nil || !strings.Contains(e.Evidence.Error, "unavailable") || e.Evidence.Fix == "") {
					t.Fatalf("PUT right after create %d: evidence %+v", i, e.Evidence)
				}
			}
		})
	}
}
