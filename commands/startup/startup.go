package startup

import (
	"context"
	"fmt"

	"lathe/commands/environments"
	"lathe/commands/tasks"
)

// StartReconstruct runs the environments' Reconstruct, then ReconcileTasks (which needs to
// know which sandboxes were reattached), in the background and returns at
// once; the channel receives their outcome. From the call on, the commands
// that depend on it wait for it (see above). Call it once, before serving.
func StartReconstruct(ctx context.Context, s *environments.Environments, t *tasks.Tasks) <-chan error {
	s.Reconciled.Arm()
	out := make(chan error, 1)
	go func() {
		err := s.Reconstruct(ctx)
		if err != nil {
			err = fmt.Errorf("reconstruct environments: %w", err)
		} else if err = t.ReconcileTasks(ctx); err != nil {
			err = fmt.Errorf("reconcile tasks: %w", err)
		}
		s.Reconciled.Open(err)
		out <- err
	}()
	return out
}
