// Package commands assembles the daemon's write side: one package per
// aggregate or capability over commands/core, and the process managers
// beside them, built into one Service that transport calls.
package commands

import (
	"lathe/commands/a2a"
	"lathe/commands/acprunner"
	"lathe/commands/agents"
	"lathe/commands/approvals"
	"lathe/commands/attachments"
	"lathe/commands/audit"
	"lathe/commands/automationrunner"
	"lathe/commands/chatrunner"
	"lathe/commands/chats"
	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/files"
	"lathe/commands/mcpservers"
	"lathe/commands/scm"
	"lathe/commands/sessions"
	"lathe/commands/startup"
	"lathe/commands/sweeps"
	"lathe/commands/tasks"
	"lathe/commands/turnrunner"
	"lathe/commands/turns"
	"lathe/commands/ways"
	"lathe/commands/worktrees"
	"lathe/journal"
)

// Service is every capability of one daemon, sharing one core. It is safe for
// concurrent use.
type Service struct {
	Sessions     *sessions.Sessions
	Environments *environments.Environments
	Turns        *turns.Turns
	Git          *scm.Git
	Attachments  *attachments.Attachments
	Tasks        *tasks.Tasks
	Files        *files.Files
	TurnCode     *turns.TurnCode
	Agents       *agents.Agents
	MCP          *mcpservers.MCP
	Approvals    *approvals.Approvals
	Skills       *agents.Skills
	Audit        *audit.Audit
	Automations  *automationrunner.Automations
	// Chats and SharedFiles: commands/chats/chats.go, commands/chats/sharedfiles.go.
	Chats       *chats.Chats
	SharedFiles *chats.SharedFiles
	Ways        *ways.Ways
	// Worktrees merges worktree Sessions home (commands/worktrees/merge.go).
	Worktrees *worktrees.Worktrees
	// A2A runs the inbound A2A tasks (commands/a2a/a2a.go).
	A2A *a2a.A2A
	// Blobs collects the blobs no record references (commands/sweeps/blobgc.go).
	Blobs *sweeps.BlobCollector
	// Effects settles the effect intents a stop left open
	// (commands/startup/effects.go).
	Effects *startup.Effects
	// Outside runs the outside Agents' processes (commands/acprunner).
	Outside *acprunner.ACPRunner
}

// New returns the commands appending to j and deciding against store, which
// must be fed by j's commit feed.
func New(j *journal.Journal, store core.Reader, opts core.Options) *Service {
	c := core.NewCore(j, store, opts)
	appr := approvals.NewApprovals(c)
	sb := environments.NewSandboxes(c)
	att := attachments.NewAttachments(c)
	fileCmds := &files.Files{Sandboxes: sb}
	taskCmds := tasks.NewTasks(sb)
	wt := worktrees.NewWorktrees(sb)
	outside := acprunner.New(c)
	return &Service{
		Outside:      outside,
		Sessions:     &sessions.Sessions{Sandboxes: sb},
		Environments: &environments.Environments{Sandboxes: sb},
		Turns:        turns.NewTurns(sb, turnrunner.NewTurnRunner(sb, att)),
		Git:          scm.NewGit(sb),
		Attachments:  att,
		Tasks:        taskCmds,
		Files:        fileCmds,
		TurnCode:     &turns.TurnCode{Sandboxes: sb},
		Agents:       agents.NewAgents(c, opts.Runtime),
		MCP:          mcpservers.NewMCP(c, opts.MCP),
		Approvals:    appr,
		Skills:       &agents.Skills{Core: c},
		Audit:        &audit.Audit{Core: c},
		Automations:  automationrunner.NewAutomations(c, store),
		Chats:        &chats.Chats{Core: c, Runner: &chatrunner.ChatRunner{Core: c}},
		A2A:          a2a.NewA2A(c, opts.A2A),
		SharedFiles:  chats.NewSharedFiles(att),
		Blobs:        sweeps.NewBlobCollector(c),
		Ways:         ways.NewWays(sb),
		Effects:      startup.NewEffects(c, fileCmds.Reconcilers(), taskCmds.Reconcilers(), wt.Reconcilers()),
		Worktrees:    wt,
	}
}
