package acprunner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"lathe/commands/core"
	"lathe/runtime/agent/tools"
	"lathe/runtime/errs"
	"lathe/runtime/sandbox"
)

// ErrFiles is the class of a launch file that could not be written into
// the sandbox.
var ErrFiles = errs.New(errs.Unavailable, "writing an outside agent's files into its sandbox")

// writeFiles returns a launch once its files are written under its HOME in
// sb (Gemini CLI's settings, which keep it quiet): through the sandbox's
// own file tools, confined to HOME, never through a path of the host. A
// failed launch passes through unwritten.
func writeFiles(ctx context.Context, sb sandbox.Sandbox) func(core.Launch, error) (core.Launch, error) {
	return func(l core.Launch, err error) (core.Launch, error) {
		if err != nil || len(l.Files) == 0 {
			return l, err
		}
		if l.Home == "" {
			return l, fmt.Errorf("%w: no HOME to write them under", ErrFiles)
		}
		set := tools.New(sb, l.Home)
		for _, rel := range slices.Sorted(maps.Keys(l.Files)) {
			args, err := json.Marshal(map[string]string{"path": rel, "content": l.Files[rel]})
			if err != nil {
				return l, fmt.Errorf("%w: %v", ErrFiles, err)
			}
			if res := set.Call(ctx, "write_file", args); res.IsError {
				return l, fmt.Errorf("%w: %s", ErrFiles, res.Output)
			}
		}
		return l, nil
	}
}
