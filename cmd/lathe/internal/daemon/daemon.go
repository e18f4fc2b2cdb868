// Package daemon assembles a running Lathe from its parts: the journal, the
// projections rebuilt from it, the embedded NATS bus, the commands and the
// HTTP surface. cmd/lathe serves it; integration tests drive it whole.
package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"lathe/commands/attachments"
	"lathe/commands/core"
	"lathe/commands/startup"

	"github.com/oklog/ulid/v2"

	"lathe/cmd/lathe/internal/config"
	"lathe/commands"
	"lathe/journal"
	"lathe/journal/bus"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/blobs"
	"lathe/runtime/git"
	"lathe/runtime/hooks"
	"lathe/runtime/mcp"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/helper"
	"lathe/transport"
	"lathe/transport/a2aserve"
)

// MaxRequestBytes is the Guard's request body cap: the largest attachment
// (commands.MaxDocumentAttachment) plus room for the multipart framing.
const MaxRequestBytes = attachments.MaxDocumentAttachment + 1<<20

// checkpointEvery is how often a changed projection is checkpointed.
const checkpointEvery = time.Minute

// ShutdownGrace is what the caller gives Shutdown (running turns journal
// their interrupted ends, /ws clients and terminals drain) and, alongside
// it, http.Server.Shutdown. It is one budget with Close's own bounded
// steps, so that SIGTERM to exit stays within the contract's 10 s:
//
//	7 s    Shutdown ∥ http.Server.Shutdown (turns end once, here)
//	≤ 1 s  NATS drain (journal/bus drainMax)
//	< 1 s  journal close (commits what is queued) and the checkpoint
const ShutdownGrace = 7 * time.Second

// closeTurnGrace bounds Close's wait for running turns when Shutdown did
// not run (a failed start, a test): they journal their interrupted ends.
const closeTurnGrace = 5 * time.Second

// Daemon is every long-lived part of a running Lathe, in start order.
type Daemon struct {
	log     *slog.Logger
	dataDir string
	journal *journal.Journal
	store   *projections.Store
	bus     *bus.Bus
	server  *transport.Server
	runtime *runtimeConn
	cmds    *commands.Service
	mcp     *mcp.Registry
	// obs are the commit feed's telemetry read models (telemetry.go).
	obs observers
	// owner is this data dir's stable ID; version the binary's.
	owner, version string

	// reconciled is closed when the start-up reconstruction that runs
	// after Start returns has finished, with its outcome in reconcileErr;
	// cancelReconcile stops it at shutdown.
	reconciled      chan struct{}
	reconcileErr    error
	cancelReconcile context.CancelFunc
	// fatal carries what must stop a running daemon (chain.go).
	fatal chan error
	// stopTurns ends the running turns once, in Shutdown or else in Close.
	stopTurns sync.Once
}

// Start opens the journal, loads the projections, starts NATS, builds the
// commands and the HTTP surface, wires the commit feed and ends what the
// stop interrupted that costs only what was running (turns, approvals).
// Nothing listens yet. The cold reconstruction of the environments
// (reattaching sandboxes, redoing interrupted lifecycles, then the tasks
// that depend on them) runs in the background: the commands that depend
// on it wait for it (commands/core/reconcile.go), so the listening line and the
// read routes do not.
//
// Options adjust the assembly: the binary names its config file
// (WithConfigFile); the others are for tests.
func Start(ctx context.Context, cfg config.Config, dataDir string, log *slog.Logger, version string, opts ...Option) (_ *Daemon, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	d := &Daemon{log: log, dataDir: dataDir, fatal: make(chan error, 1), version: version}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if err := d.open(ctx, cfg); err != nil {
		return nil, err
	}
	if err := d.assemble(ctx, cfg, o, version); err != nil {
		return nil, err
	}
	if err := d.wire(); err != nil {
		return nil, err
	}
	if err := d.reconcile(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// open opens what the daemon keeps on disk and its bus: the journal, the
// projections (checkpoint plus the journal's tail) and NATS.
func (d *Daemon) open(ctx context.Context, cfg config.Config) error {
	if err := os.MkdirAll(d.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	var err error
	d.journal, err = journal.Open(filepath.Join(d.dataDir, "journal.db"), journal.Options{})
	if err != nil {
		return err
	}
	// The journal's lock is the data dir's: no other daemon runs on it.
	if err := d.clearLeftovers(); err != nil {
		return err
	}
	t0 := time.Now()
	var replayed int
	d.store, replayed, err = projections.Load(ctx, d.journal, d.checkpointPath())
	if err != nil {
		return err
	}
	d.log.Info("projections ready", "seq", d.store.Seq(), "replayed", replayed, "took", time.Since(t0))
	if err := git.HostJail(); err != nil {
		d.log.Warn("host-side git runs without its Landlock jail (docs/design/git.md, Host-side git)", "err", err)
	}
	if err := d.verifyTail(ctx, d.store.Seq()-uint64(replayed)); err != nil {
		return err
	}
	var users []bus.User
	for _, u := range cfg.NATS.OutsideUsers() {
		users = append(users, bus.User{Name: u.User, Password: u.Password})
	}
	d.bus, err = bus.Start(bus.Options{Listen: cfg.NATS.Listen, Users: users})
	if err != nil {
		return err
	}
	if err := d.bus.ServeJournal(d.journal, d.version); err != nil {
		return err
	}
	if url := d.bus.ClientURL(); url != "" {
		d.log.Info("nats exposed", "url", url)
	}
	return nil
}

// assemble builds the runtime parts, the commands and the HTTP surface on
// the opened parts.
func (d *Daemon) assemble(ctx context.Context, cfg config.Config, o options, version string) error {
	secret, err := cookieSecret(filepath.Join(d.dataDir, "cookie-secret"))
	if err != nil {
		return err
	}
	agents := make([]string, len(cfg.Agents))
	for i, a := range cfg.Agents {
		agents[i] = a.ID
	}
	owner, err := daemonID(filepath.Join(d.dataDir, "daemon-id"))
	if err != nil {
		return err
	}
	blobStore, err := blobs.Open(filepath.Join(d.dataDir, "blobs"))
	if err != nil {
		return err
	}
	if err := blobStore.RemoveStaged(); err != nil {
		return err
	}
	d.store.ResolveWith(blobStore) // large turn content lives in blobs
	llmCat := llmCatalog(cfg)
	agentRuntime := agent.New(agent.Options{Catalog: llmCat, ProviderFor: providerFor(cfg)})
	// The configured MCP servers connect in the background: listed at once
	// as connecting, never delaying the listening line.
	filesDir := cmp.Or(cfg.MCP.FilesDir, filepath.Join(d.dataDir, "mcp"))
	if err := os.MkdirAll(filesDir, 0o700); err != nil {
		return fmt.Errorf("mcp files dir: %w", err)
	}
	d.mcp = mcp.New(mcp.Options{Logger: d.log, FilesDir: filesDir})
	for _, m := range cfg.MCP.Servers {
		if err := d.mcp.Start(mcpConfig(m)); err != nil {
			return fmt.Errorf("mcp server %q: %w", m.Name, err)
		}
	}
	if err := d.startObservers(cfg, version); err != nil {
		return err
	}
	d.runtime = &runtimeConn{cfg: cfg.Sandbox, owner: owner}
	if !o.withoutSandbox {
		d.runtime.helper, d.runtime.helperErr = stageHelper(o.sandboxHelper, filepath.Join(d.dataDir, "sandbox-helper"))
		if d.runtime.helperErr != nil {
			d.log.Error("no sandbox can be prepared", "err", d.runtime.helperErr)
		}
	}
	connect := core.Connect(d.runtime.connect)
	if o.withoutSandbox {
		connect = nil
	}
	author, authorSource := gitAuthor(ctx, cfg, d.log)
	skills := make([]core.SkillSpec, len(cfg.Skills))
	for i, sk := range cfg.Skills {
		skills[i] = core.SkillSpec{ID: sk.ID, Name: sk.Name, Description: sk.Description, Emits: sk.Emits}
	}
	d.owner, d.version = owner, version
	receivers := make([]core.A2AReceiver, len(cfg.A2A.Receivers))
	for i, r := range cfg.A2A.Receivers {
		receivers[i] = core.A2AReceiver{ID: r.ID, AgentID: r.AgentID, Name: r.Name, Description: r.Description}
	}
	cmds := commands.New(d.journal, d.store, core.Options{
		A2A:                          receivers,
		GitAuthor:                    author,
		GitAuthorSource:              authorSource,
		Agents:                       agents,
		DefaultImage:                 cfg.Sandbox.DefaultImage,
		RemoteSandbox:                cfg.Sandbox.Provider == config.SandboxRemote,
		RemoteHost:                   cfg.Sandbox.Remote.Host,
		RemoteTemplate:               cfg.Sandbox.Template(),
		AutoApproveDevcontainerSetup: cfg.Sandbox.AutoApproveDevcontainerSetup,
		Connect:                      connect,
		Sandbox: core.SandboxOptions{
			Network: cfg.Sandbox.Network,
			Limits:  sandbox.Limits{MemoryMB: cfg.Sandbox.Limits.MemoryMB, CPUs: cfg.Sandbox.Limits.CPUs, PIDs: cfg.Sandbox.Limits.PIDs},
		},
		Blobs:           blobStore,
		Runtime:         agentRuntime,
		MCP:             d.mcp,
		Skills:          skills,
		Lattice:         core.LatticeTeam{Coordinator: cfg.Lattice.Coordinator, Workers: cfg.Lattice.Workers},
		CredentialNames: auditNames(cfg.Server),
		Live:            livePublisher{d.bus},
		Turns:           core.TurnOptions{MaxSteps: cfg.Turns.MaxSteps, StallTimeout: time.Duration(cfg.Turns.StallTimeoutSeconds) * time.Second},
		Logger:          d.log,
		DataDir:         d.dataDir,
		ConfigFile:      o.configFile,
		WaysDir:         filepath.Join(d.dataDir, "ways"),
		WorktreesDir:    filepath.Join(d.dataDir, "worktrees"),
		ScratchDir:      d.scratchDir(),
		Hooks:           cfg.HookSet(),
		Outside:         newOutsideAgents(agentRuntime, cmp.Or(o.agentsDir, filepath.Join(d.dataDir, "agents"))),
	})
	d.cmds = cmds
	sec := SecurityOptions(cfg, secret)
	d.server, err = transport.New(sec, transport.Deps{
		Sessions:     cmds.Sessions,
		Environments: cmds.Environments,
		Files:        cmds.Files,
		Attachments:  cmds.Attachments,
		Git:          cmds.Git,
		Worktrees:    cmds.Worktrees,
		Tasks:        cmds.Tasks,
		Turns:        cmds.Turns,
		TurnCode:     cmds.TurnCode,
		Sandboxes:    sandboxesAdapter{cmds.Environments},
		// Each route group reads the model of its aggregate; the groups
		// that read across aggregates (a Session and its turns, its
		// attachments or its Attempt sets; the seq; the snapshot) read the
		// store, which embeds every model.
		WorkspaceReads:  d.store.SessionModel,
		SessionReads:    d.store.SessionModel,
		TaskReads:       d.store.TaskModel,
		AutomationReads: d.store.AutomationModel,
		ChatReads:       d.store.ChatModel,
		SharedFileReads: d.store.ChatModel,
		ApprovalReads:   d.store.ApprovalModel,
		AttachmentReads: d.store,
		TurnReads:       d.store,
		WaysReads:       d.store,
		EventReads:      d.store,
		FrameReads:      d.store,
		Journal:         d.journal,
		Audit:           cmds.Audit,
		Folders:         foldersAdapter{},
		Capabilities: transport.Capabilities{
			SupportsSessionImage:         cfg.Sandbox.Provider != config.SandboxRemote,
			Template:                     remoteTemplate(cfg.Sandbox),
			AutoApproveDevcontainerSetup: cfg.Sandbox.AutoApproveDevcontainerSetup,
		},
		LLM:           catalogAdapter{llmCat},
		Runtime:       actorsAdapter{agentRuntime},
		Agents:        agentsAdapter{cmds.Agents},
		Spawned:       agentRuntime.Spawned,
		MCP:           mcpAdapter{cmds.MCP},
		MCPRegistry:   registryAdapter{d.mcp},
		Approvals:     cmds.Approvals,
		Skills:        skills,
		SkillCommands: cmds.Skills,
		Automations:   cmds.Automations,
		Chats:         cmds.Chats,
		SharedFiles:   cmds.SharedFiles,
		A2A:           a2aserve.New(cmds.A2A, version, len(sec.APIKeys) > 0, len(sec.BearerTokens) > 0),
		Ways:          cmds.Ways,
		Lattice:       cmds.Turns.LatticeTeam(),
		Preview:       transport.PreviewOptions{ResponseHeaderTimeout: o.previewTimeout},
		Version:       version,
		Logger:        d.log,
		Metrics:       d.obs.metrics.Handler(),
	})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// wire connects the pipeline. The commit feed, in seq order: projections
// first, so that /ws frames and NATS subscribers never see an event the
// read models lack; a command's append returns once its frames and NATS
// messages are out. Live turn deltas, published by the turn runners on
// their NATS live subjects, are folded into the live-run projection and
// sent as frames.
func (d *Daemon) wire() error {
	if types := projections.Unclaimed(); len(types) > 0 {
		// A forgotten claim (projections/claims.go): their events change no
		// read model, and the feed goes on past them.
		d.log.Error("event types that no read model claims; their events change no read model", "types", types)
	}
	d.journal.OnCommit(func(batch []journal.Record) {
		d.obs.observe(batch)
		err := d.store.ApplyChanges(batch, func(changes []projections.Change) {
			d.server.Broadcast(changes)
			if err := d.bus.Publish(batch); err != nil {
				d.log.Error("publish failed", "err", err)
			}
			publishTyped(d.bus, changes, d.log)
			d.cmds.Automations.Observe(changes)
		})
		if err != nil {
			// The journal is the truth; a projection that cannot follow it
			// is a bug that a restart's replay will surface.
			d.log.Error("projection apply failed", "err", err)
		}
	})
	d.store.OnLive(d.server.SendLive)
	return d.bus.Subscribe(events.LiveSubjectAll, func(data []byte) {
		var delta events.LiveDelta
		if err := json.Unmarshal(data, &delta); err != nil || !delta.KnownKind() {
			d.log.Error("malformed live delta", "err", err, "kind", delta.Kind)
			return
		}
		d.store.DeliverLive(delta)
	})
}

// reconcile ends what the stop interrupted. What costs only what was
// running goes before the daemon serves: the Agent patches of the run
// before end (daemon-started), the approvals of interrupted runs expire,
// and the turns no runner owns get their one terminal record. The cold
// reconstruction of the environments, then the tasks, run in the
// background (commands.Environments.StartReconstruct); a failure there is
// logged, and the commands that depend on it answer 503 with it.
func (d *Daemon) reconcile(ctx context.Context) error {
	if err := d.cmds.Agents.Started(ctx, d.owner, d.version); err != nil {
		return fmt.Errorf("journal the start: %w", err)
	}
	if err := d.cmds.Approvals.ExpireInterrupted(ctx); err != nil {
		return fmt.Errorf("expire approvals: %w", err)
	}
	if err := d.cmds.Turns.ReconcileTurns(ctx); err != nil {
		return fmt.Errorf("reconcile turns: %w", err)
	}
	// Runs the stop cut resume from their last completed node; waiting
	// runs stay waiting. Then the schedules and event triggers start.
	d.cmds.Automations.ResumeRuns()
	if err := d.cmds.Chats.ReconcileChats(ctx); err != nil {
		return fmt.Errorf("reconcile chats: %w", err)
	}
	if err := d.cmds.A2A.ReconcileA2A(ctx); err != nil {
		return fmt.Errorf("reconcile a2a tasks: %w", err)
	}
	ctx, d.cancelReconcile = context.WithCancel(context.WithoutCancel(ctx))
	d.cmds.Automations.StartTriggers(ctx)
	done := startup.StartReconstruct(ctx, d.cmds.Environments, d.cmds.Tasks)
	// After the reconstruction is armed: the lanes' settlements wait for it.
	if err := d.cmds.Ways.ReconcileLanes(ctx); err != nil {
		return fmt.Errorf("reconcile Ways lanes: %w", err)
	}
	go d.verifyAll(ctx)
	d.store.KeepPasts(ctx, d.journal) // images of long Sessions' pasts for time travel
	d.reconciled = make(chan struct{})
	go func() {
		defer close(d.reconciled)
		t0 := time.Now()
		// A merge a stop cut off left the Workspace folder half written:
		// it is settled first, needing no sandbox.
		if err := d.cmds.Effects.ReconcileMerges(ctx); err != nil && ctx.Err() == nil {
			d.log.Error("settle interrupted merges", "err", err)
		}
		d.reconcileErr = <-done
		// The effects a stop cut off (record, then act) are settled once
		// the Sessions' runtimes are back.
		if err := d.cmds.Effects.Reconcile(ctx); err != nil && ctx.Err() == nil {
			d.log.Error("settle interrupted effects", "err", err)
		}
		if d.reconcileErr != nil && ctx.Err() == nil {
			d.log.Error("start-up reconstruction", "err", d.reconcileErr)
			return
		}
		d.log.Info("start-up reconstruction done", "took", time.Since(t0))
	}()
	return nil
}

// Reconciled waits until the start-up reconstruction of the environments
// has finished and returns its outcome.
func (d *Daemon) Reconciled(ctx context.Context) error {
	select {
	case <-d.reconciled:
		return d.reconcileErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Option adjusts Start.
type Option func(*options)

type options struct {
	configFile     string
	withoutSandbox bool
	previewTimeout time.Duration
	sandboxHelper  string
	agentsDir      string
}

// WithAgentsDir installs the outside Agents' packages in dir instead of
// the data dir's agents folder: tests share one install per machine.
func WithAgentsDir(dir string) Option { return func(o *options) { o.agentsDir = dir } }

// WithoutSandbox assembles a daemon whose Session environments are never
// prepared: records and routes only, for tests of the control plane.
func WithoutSandbox() Option { return func(o *options) { o.withoutSandbox = true } }

// WithConfigFile names the config file cfg was read from: a sandbox whose
// Workspace holds it reads it as empty (commands.Options.ConfigFile).
func WithConfigFile(path string) Option { return func(o *options) { o.configFile = path } }

// WithSandboxHelper runs path as the sandbox helper instead of the
// daemon's own binary: a test binary is not lathe, and -race builds are
// not static (runtime/sandbox/helper/helpertest builds one that is).
func WithSandboxHelper(path string) Option {
	return func(o *options) { o.sandboxHelper = path }
}

// WithPreviewTimeout bounds how long a Preview app may take to answer
// (transport.DefaultPreviewResponseHeaderTimeout otherwise).
func WithPreviewTimeout(d time.Duration) Option {
	return func(o *options) { o.previewTimeout = d }
}

// credentialNames maps each named credential's secret to its name.
func credentialNames(s config.Server) map[string]string {
	names := map[string]string{}
	for _, c := range append(append([]config.Credential(nil), s.APIKeys...), s.BearerTokens...) {
		if c.Name != "" {
			names[c.Key] = c.Name
		}
	}
	return names
}

// auditNames keys the credentials' names by the operator actor ID each
// one makes (its fingerprint), for the audit trail.
func auditNames(s config.Server) map[string]string {
	names := map[string]string{}
	for secret, name := range credentialNames(s) {
		names[transport.CredentialID(secret)] = name
	}
	return names
}

// SecurityOptions maps the configuration onto the Guard's options.
func SecurityOptions(cfg config.Config, secret []byte) transport.SecurityOptions {
	return transport.SecurityOptions{
		APIKeys:      config.Keys(cfg.Server.APIKeys),
		BearerTokens: config.Keys(cfg.Server.BearerTokens),
		CORSOrigins:  cfg.Server.CORSOrigins,
		RateLimit: transport.RateLimitOptions{
			Enabled:           cfg.Server.RateLimit.Enabled,
			RequestsPerSecond: cfg.Server.RateLimit.RequestsPerSecond,
			Burst:             cfg.Server.RateLimit.Burst,
		},
		CookieSecret: secret,
		// Attachment uploads need 25 MiB plus multipart framing; every JSON
		// route keeps its own 1 MiB cap (transport decodeJSON).
		MaxBodyBytes: MaxRequestBytes,
	}
}

// clearLeftovers removes what a stopped process of this data dir left half
// written or unused: checkpoints being written, and the scratch folder
// (bundles on their way, hooks' scratch folders). The blob store's staging
// files go when the store opens (assemble). It also ends the host hooks a
// stopped daemon process left running (hooks.SweepHost); what such a
// process left running in a sandbox ends once the sandbox is back
// (commands, Environments.Reconstruct).
func (d *Daemon) clearLeftovers() error {
	if err := projections.RemoveCheckpointTemps(d.checkpointPath()); err != nil {
		return fmt.Errorf("checkpoint leftovers: %w", err)
	}
	if err := os.RemoveAll(d.scratchDir()); err != nil {
		return fmt.Errorf("scratch: %w", err)
	}
	if err := os.Mkdir(d.scratchDir(), 0o700); err != nil {
		return fmt.Errorf("scratch: %w", err)
	}
	if n := hooks.SweepHost(); n > 0 {
		d.log.Info("ended the host hooks a stopped daemon left", "hooks", n)
	}
	return nil
}

// scratchDir holds the daemon's scratch files (commands.Options.ScratchDir).
func (d *Daemon) scratchDir() string { return filepath.Join(d.dataDir, "scratch") }

func (d *Daemon) checkpointPath() string { return filepath.Join(d.dataDir, "projections.checkpoint") }

// CheckpointLoop saves the projections whenever they changed, so that a
// restart after a crash replays only the journal's tail.
func (d *Daemon) CheckpointLoop(ctx context.Context) {
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	var saved uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if d.store.Seq() == saved {
				continue
			}
			seq, err := d.store.WriteCheckpoint(d.checkpointPath())
			if err != nil {
				d.log.Error("checkpoint", "err", err)
				continue
			}
			saved = seq
		}
	}
}

// Blob collection: how often, and how old an unreferenced blob must be
// (commands.BlobCollector.Collect).
const (
	blobGCEvery = 10 * time.Minute
	blobGCGrace = 10 * time.Minute
)

// BlobGCLoop collects the blobs no live record references, in the
// background, every blobGCEvery (the first time one period after start,
// so that a restart's catching up is not slowed by it).
func (d *Daemon) BlobGCLoop(ctx context.Context) {
	t := time.NewTicker(blobGCEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := d.cmds.Blobs.Collect(ctx, blobGCGrace)
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Error("blob collection", "err", err)
		case n > 0:
			d.log.Info("blob collection", "removed", n)
		}
	}
}

// Close stops everything Start started, in reverse order: the start-up
// reconstruction, the turns (unless Shutdown ended them), then the journal
// commits what is queued and feeds it to the projections and NATS, the
// projections are checkpointed and NATS drains.
func (d *Daemon) Close() {
	if d.cancelReconcile != nil {
		d.cancelReconcile()
		<-d.reconciled
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTurnGrace)
	if err := d.endTurns(ctx); err != nil {
		d.log.Error("stop turns", "err", err)
	}
	cancel()
	if d.cmds != nil {
		d.cmds.Outside.Close() // the outside agents' processes, their turns ended
	}
	if d.journal != nil {
		if err := d.journal.Close(); err != nil {
			d.log.Error("close journal", "err", err)
		}
	}
	if d.store != nil {
		if _, err := d.store.WriteCheckpoint(d.checkpointPath()); err != nil {
			d.log.Error("checkpoint", "err", err)
		}
	}
	if d.bus != nil {
		d.bus.Close()
	}
	if d.runtime != nil {
		d.runtime.close()
	}
	if d.mcp != nil {
		d.mcp.Close()
	}
	d.obs.close()
}

// mcpConfig maps a configured MCP server onto the registry's.
func mcpConfig(m config.MCPServer) mcp.Config {
	return mcp.Config{Name: m.Name, Transport: m.Transport, Command: m.Command, Args: m.Args, Env: m.Env, URL: m.URL,
		Approval: m.Approval, Agents: m.Agents}
}

// runtimeConn connects to the sandbox provider on first use and again after
// a failure, so that a containerd started after the daemon is picked up.
type runtimeConn struct {
	cfg   config.Sandbox
	owner string
	// helper is the sandbox helper staged in the data dir, or helperErr
	// says why there is none (then no sandbox is prepared).
	helper    *helper.Binary
	helperErr error
	mu        sync.Mutex
	driver    interface {
		sandbox.Driver
		Close() error
	}
}

func (r *runtimeConn) connect(ctx context.Context) (sandbox.Driver, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.driver != nil {
		return r.driver, nil
	}
	if r.helperErr != nil {
		return nil, r.helperErr
	}
	if r.cfg.Provider == config.SandboxRemote {
		rm := r.cfg.Remote
		drv, err := docker.New(ctx, docker.Options{Host: rm.Host, Template: r.cfg.Template(), Owner: r.owner, Timeout: 5 * time.Second,
			Helper: r.helperPath(),
			TLS:    docker.TLS{CAFile: rm.TLS.CAFile, CertFile: rm.TLS.CertFile, KeyFile: rm.TLS.KeyFile}})
		if err != nil {
			return nil, err
		}
		r.driver = drv
		return drv, nil
	}
	drv, err := containerd.New(ctx, containerd.Options{
		Address:      r.cfg.Containerd.Address,
		Namespace:    r.cfg.Containerd.Namespace,
		DefaultImage: r.cfg.DefaultImage,
		Owner:        r.owner,
		Timeout:      2 * time.Second,
		HelperDir:    r.helperDir(),
	})
	if err != nil {
		return nil, err
	}
	r.driver = drv
	return drv, nil
}

// helperPath is the staged helper, and helperDir its directory; "" for
// none (a daemon assembled without one).
func (r *runtimeConn) helperPath() string {
	if r.helper == nil {
		return ""
	}
	return r.helper.Path
}

func (r *runtimeConn) helperDir() string {
	if r.helper == nil {
		return ""
	}
	return filepath.Dir(r.helper.Path)
}

// close disconnects; the sandboxes keep running for the next start to
// reattach.
func (r *runtimeConn) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.driver != nil {
		_ = r.driver.Close()
		r.driver = nil
	}
}

// stageHelper puts the sandbox helper (path, or else this very binary)
// in dir, where the drivers take it from: a hard link, so that a rebuild
// of the binary meanwhile changes nothing under a running daemon, and a
// copy across file systems.
func stageHelper(path, dir string) (*helper.Binary, error) {
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", helper.ErrBinary, err)
		}
		path = exe
	}
	b, err := helper.Open(path)
	if err != nil {
		return nil, err
	}
	return helper.Stage(b, dir)
}

// daemonID is this data dir's stable identity, created on first start. The
// sandboxes a daemon creates carry it, so that daemons on other data dirs
// sharing the container namespace leave them alone.
func daemonID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("daemon id: %w", err)
	}
	id := ulid.Make().String()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("daemon id: %w", err)
	}
	return id, nil
}

// cookieSecret loads the key that signs browser session cookies, creating it
// on first start. It never enters the journal or a log.
func cookieSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= transport.MinCookieSecret {
		return b, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cookie secret: %w", err)
	}
	b = make([]byte, 32)
	_, _ = rand.Read(b)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("cookie secret: %w", err)
	}
	return b, nil
}

// Handler is the daemon's whole HTTP surface.
func (d *Daemon) Handler() http.Handler { return d.server.Handler() }

// Shutdown ends the running turns with their terminal records (and
// frames), then drains the /ws clients and terminals, within ctx (give it
// ShutdownGrace). The caller shuts the http.Server down alongside, then
// calls Close.
func (d *Daemon) Shutdown(ctx context.Context) error {
	return errors.Join(d.endTurns(ctx), d.server.Shutdown(ctx))
}

// endTurns ends the running turns with their terminal records (and frames),
// bounded by ctx: the first call does, later ones return at once.
func (d *Daemon) endTurns(ctx context.Context) error {
	var err error
	d.stopTurns.Do(func() {
		if d.cmds != nil {
			d.cmds.Automations.StopRuns()
			err = errors.Join(d.cmds.Turns.StopTurns(ctx), d.cmds.Ways.Drain(ctx))
		}
	})
	return err
}

// livePublisher publishes turn deltas on their NATS live subjects: a
// Session's (LiveSubject) or a Chat's (ChatLiveSubject).
type livePublisher struct{ bus *bus.Bus }

func (p livePublisher) PublishLive(d events.LiveDelta) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	subject := events.LiveSubject(d.Session)
	if d.ChatDelta() {
		subject = events.ChatLiveSubject(d.Chat)
	}
	return p.bus.PublishSubject(subject, data)
}

// Store is the daemon's projection store.
func (d *Daemon) Store() *projections.Store { return d.store }

// Journal is the daemon's journal.
func (d *Daemon) Journal() *journal.Journal { return d.journal }

// NATSURL is the TCP URL of the embedded NATS server when nats.listen
// exposes it, else "".
func (d *Daemon) NATSURL() string { return d.bus.ClientURL() }

// publishTyped publishes the typed events of committed changes on
// lathe.lattice.<type>, with their `event` frame's JSON as payload.
func publishTyped(b *bus.Bus, changes []projections.Change, log *slog.Logger) {
	for _, c := range changes {
		for _, te := range c.Typed {
			data, err := json.Marshal(te)
			if err == nil {
				subject := events.TypedSubject(te.Type)
				if te.Automation != "" {
					subject = events.AutomationSubject(te.Automation, te.Type)
				}
				err = b.PublishSubject(subject, data)
			}
			if err != nil {
				log.Error("publish typed event", "type", te.Type, "err", err)
			}
		}
	}
}

// remoteTemplate is the project probe's template: the one image of the
// remote provider, none under the local one.
func remoteTemplate(sb config.Sandbox) *string {
	if sb.Provider != config.SandboxRemote {
		return nil
	}
	t := sb.Template()
	return &t
}
