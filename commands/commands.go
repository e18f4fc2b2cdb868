package commands

import (
	"lathe/journal"
)

// Service is every capability of one daemon, sharing one core. It is safe for
// concurrent use.
type Service struct {
	Sessions     *Sessions
	Environments *Environments
	Turns        *Turns
	Git          *Git
	Attachments  *Attachments
	Tasks        *Tasks
	Files        *Files
	TurnCode     *TurnCode
	Agents       *Agents
	MCP          *MCP
	Approvals    *Approvals
	Skills       *Skills
	Audit        *Audit
	Automations  *Automations
	// Chats and SharedFiles: commands/chats.go, commands/sharedfiles.go.
	Chats       *Chats
	SharedFiles *SharedFiles
	Ways        *Ways
	// Worktrees merges worktree Sessions home (commands/merge.go).
	Worktrees *Worktrees
	// A2A runs the inbound A2A tasks (commands/a2a.go).
	A2A *A2A
	// Blobs collects the blobs no record references (commands/blobgc.go).
	Blobs *BlobCollector
	// Effects settles the effect intents a stop left open
	// (commands/effects.go).
	Effects *Effects
}

// New returns the commands appending to j and deciding against store, which
// must be fed by j's commit feed.
func New(j *journal.Journal, store Reader, opts Options) *Service {
	c := newCore(j, store, opts)
	appr := newApprovals(c)
	sb := newSandboxes(c)
	att := newAttachments(c)
	fileCmds := &Files{sandboxes: sb}
	taskCmds := newTasks(sb)
	wt := newWorktrees(sb)
	return &Service{
		Sessions:     &Sessions{sandboxes: sb},
		Environments: &Environments{sandboxes: sb},
		Turns:        newTurns(sb, newTurnRunner(sb, att)),
		Git:          newGit(sb),
		Attachments:  att,
		Tasks:        taskCmds,
		Files:        fileCmds,
		TurnCode:     &TurnCode{sandboxes: sb},
		Agents:       newAgents(c, opts.Runtime),
		MCP:          newMCP(c, opts.MCP),
		Approvals:    appr,
		Skills:       &Skills{core: c},
		Audit:        &Audit{core: c},
		Automations:  newAutomations(c, store),
		Chats:        &Chats{core: c, runner: &ChatRunner{core: c}},
		A2A:          newA2A(c, opts.A2A),
		SharedFiles:  newSharedFiles(att),
		Blobs:        newBlobCollector(c),
		Ways:         newWays(sb),
		Effects:      newEffects(c, fileCmds.reconcilers(), taskCmds.reconcilers(), wt.reconcilers()),
		Worktrees:    wt,
	}
}
