package commands

// sandboxes owns each Session's live sandbox: it prepares, watches and
// tears down the generations of a Session's environment
// (commands/environment.go), and hands the sandbox of a Ready Session, its
// file root and its Git repository to the capabilities that work in it
// (files, tree changes, Git, tasks, turns, Ways). The capabilities that
// need it embed it; the rest never see a sandbox.
type sandboxes struct {
	*core
	connect     Connect
	sandboxOpts SandboxOptions
	envs        environments
	// turns are the Agent runs of this daemon (commands/turns.go): a live
	// turn refuses environment changes.
	turns *turnRuns
}

func newSandboxes(c *core, runs *turnRuns) *sandboxes {
	return &sandboxes{core: c, connect: c.opts.Connect, sandboxOpts: c.opts.Sandbox, envs: newEnvironments(), turns: runs}
}
