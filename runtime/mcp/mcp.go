// Package mcp is Lathe's live registry of MCP servers: it connects each one
// with the official go-sdk client (stdio: a command on the daemon host;
// http: streamable HTTP), lists its tools under the names models see
// (mcp__<server>__<tool>), and calls them with a per-call timeout. It writes
// no MCP protocol code of its own.
//
// The registry is runtime state, like a sandbox: which servers it holds is
// decided by the configuration and by the operator's commands, which
// journal what they did. A server that fails to start, or dies, stays
// listed with its status and error, its tools unavailable until a
// reconnect; it never takes the daemon down. A stdio server's stderr goes
// to the daemon's log, bounded per connection. Secret values (env of
// catalog installs marked secret) never reach a log or a view.
package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"lathe/runtime/errs"
	"lathe/runtime/jsonlimit"
)

// The registry's errors.
var (
	// ErrUnknownServer: no server of that name is in the registry.
	ErrUnknownServer = errs.New(errs.NotFound, "unknown MCP server")
	// ErrDuplicate: a server of that name is already in the registry.
	ErrDuplicate = errs.New(errs.Conflict, "duplicate MCP server")
	// ErrInvalid: a server's configuration or a call's arguments are malformed.
	ErrInvalid = errs.New(errs.Invalid, "invalid MCP request")
	// ErrUnknownTool: no connected server offers a tool of that name.
	ErrUnknownTool = errs.New(errs.NotFound, "unknown MCP tool")
	// ErrUnavailable: the server is not connected.
	ErrUnavailable = errs.New(errs.Unavailable, "MCP server unavailable")
)

// Transports.
const (
	Stdio = "stdio"
	HTTP  = "http"
)

// Server statuses.
const (
	StatusConnecting   = "connecting"
	StatusConnected    = "connected"
	StatusDisconnected = "disconnected" // it was connected and went away
	StatusFailed       = "failed"       // it could not be started or reached
)

// Approval modes.
const (
	ApprovalAlways = "always"
	ApprovalNever  = "never"
)

// ToolPrefix starts the name of every MCP tool as models see it.
const ToolPrefix = "mcp__"

// Config is one server, from the configuration or a catalog install.
type Config struct {
	Name      string
	Transport string
	Command   string
	Args      []string
	// Env is extra environment for a stdio server.
	Env map[string]string
	URL string
	// Approval is ApprovalAlways (the default) or ApprovalNever.
	Approval string
	// Agents get its tools; empty means every Agent.
	Agents []string
	// Secrets are values that must never be shown (catalog values marked
	// secret); the registry masks them in errors.
	Secrets []string
}

// Validate checks a server configuration; it fills in the default approval.
func (c *Config) Validate() error {
	switch {
	case !validName(c.Name):
		return fmt.Errorf("%w: server name %q must be 1-64 letters, digits, '-' or '_' (no \"__\")", ErrInvalid, c.Name)
	case c.Transport == Stdio && c.Command == "":
		return fmt.Errorf("%w: stdio server %q needs a command", ErrInvalid, c.Name)
	case c.Transport == HTTP && !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://"):
		return fmt.Errorf("%w: http server %q needs an http(s) url", ErrInvalid, c.Name)
	case c.Transport != Stdio && c.Transport != HTTP:
		return fmt.Errorf("%w: server %q: transport must be %q or %q, not %q", ErrInvalid, c.Name, Stdio, HTTP, c.Transport)
	}
	switch c.Approval {
	case "":
		c.Approval = ApprovalAlways
	case ApprovalAlways, ApprovalNever:
	default:
		return fmt.Errorf("%w: server %q: approval must be %q or %q", ErrInvalid, c.Name, ApprovalAlways, ApprovalNever)
	}
	return nil
}

// validName keeps server names unambiguous inside mcp__<server>__<tool>.
func validName(n string) bool {
	if n == "" || len(n) > 64 || strings.Contains(n, "__") {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// ServerView is one server as the routes show it.
type ServerView struct {
	Name      string   `json:"name"`
	Transport string   `json:"transport"`
	ToolCount int      `json:"tool_count"`
	Status    string   `json:"status"`
	Error     string   `json:"error,omitempty"`
	Approval  string   `json:"approval"`
	Agents    []string `json:"agents"`
}

// Tool is one tool of a connected server.
type Tool struct {
	// Name is what models see: mcp__<server>__<tool>.
	Name        string          `json:"name"`
	Server      string          `json:"server"`
	Tool        string          `json:"tool"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Result is a tool call's answer: its text content, and whether the server
// marked it an error.
type Result struct {
	Text    string
	IsError bool
}

// Options tune a Registry.
type Options struct {
	// CallTimeout bounds one tool call (default 60 s).
	CallTimeout time.Duration
	// ConnectTimeout bounds starting and initialising a server (default 20 s).
	ConnectTimeout time.Duration
	// StderrBytes bounds how much of one stdio connection's stderr is
	// logged (default 64 KiB).
	StderrBytes int
	Logger      *slog.Logger
	// FilesDir is where a catalog server's files (the memory graph) may be
	// (Entry.Config); the daemon's default is <data dir>/mcp.
	FilesDir string
}

// Registry is the live set of servers. It is safe for concurrent use.
type Registry struct {
	opts   Options
	log    *slog.Logger
	client *sdk.Client

	// ctx ends when the registry closes, ending connects in flight; wg
	// counts the background ones.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	servers map[string]*server
	order   []string // insertion order
}

type server struct {
	cfg     Config
	mu      sync.Mutex
	status  string
	err     string
	session *sdk.ClientSession
	tools   []Tool
	gen     int // bumps on every (re)connect, so a stale watcher keeps quiet
}

// New returns an empty registry.
func New(opts Options) *Registry {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 20 * time.Second
	}
	if opts.StderrBytes <= 0 {
		opts.StderrBytes = 64 << 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{
		opts:    opts,
		log:     opts.Logger,
		client:  sdk.NewClient(&sdk.Implementation{Name: "lathe", Version: "1"}, nil),
		ctx:     ctx,
		cancel:  cancel,
		servers: map[string]*server{},
	}
}

// FilesDir is Options.FilesDir.
func (r *Registry) FilesDir() string { return r.opts.FilesDir }

// Add puts a server in the registry and connects it. A server that cannot
// be started or reached is still added, failed with its error; the error
// returned is only for a refused Add (invalid, duplicate).
func (r *Registry) Add(ctx context.Context, cfg Config) (ServerView, error) {
	s, err := r.register(cfg)
	if err != nil {
		return ServerView{}, err
	}
	r.connect(ctx, s)
	return s.view(), nil
}

// Start puts a server in the registry, listed as connecting, and connects
// it in the background: the daemon's start does not wait for a server that
// is slow to start (an npx download, say).
func (r *Registry) Start(cfg Config) error {
	s, err := r.register(cfg)
	if err != nil {
		return err
	}
	r.wg.Go(func() { r.connect(r.ctx, s) })
	return nil
}

func (r *Registry) register(cfg Config) (*server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, status: StatusConnecting}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.servers[cfg.Name]; dup {
		return nil, fmt.Errorf("%w: %q is already in the registry", ErrDuplicate, cfg.Name)
	}
	r.servers[cfg.Name] = s
	r.order = append(r.order, cfg.Name)
	return s, nil
}

// Reconnect closes a server's connection, if any, and connects it again.
func (r *Registry) Reconnect(ctx context.Context, name string) (ServerView, error) {
	s, err := r.server(name)
	if err != nil {
		return ServerView{}, err
	}
	s.close()
	r.connect(ctx, s)
	return s.view(), nil
}

// Remove closes a server and takes it out of the registry.
func (r *Registry) Remove(name string) error {
	r.mu.Lock()
	s, ok := r.servers[name]
	if ok {
		delete(r.servers, name)
		r.order = slices.DeleteFunc(r.order, func(n string) bool { return n == name })
	}
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownServer, name)
	}
	s.close()
	return nil
}

// Close ends the connects in flight and closes every server.
func (r *Registry) Close() {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	all := make([]*server, 0, len(r.servers))
	for _, s := range r.servers {
		all = append(all, s)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(s.close)
	}
	wg.Wait()
}

// Servers lists the servers in the order they were added.
func (r *Registry) Servers() []ServerView {
	out := []ServerView{}
	for _, s := range r.all() {
		out = append(out, s.view())
	}
	return out
}

// Server returns one server's view.
func (r *Registry) Server(name string) (ServerView, error) {
	s, err := r.server(name)
	if err != nil {
		return ServerView{}, err
	}
	return s.view(), nil
}

// Tools lists the tools of every connected server.
func (r *Registry) Tools() []Tool { return r.ToolsFor("") }

// ToolsFor lists the tools an Agent may use: those of connected servers open
// to it ("" lists every server's).
func (r *Registry) ToolsFor(agentID string) []Tool {
	out := []Tool{}
	for _, s := range r.all() {
		s.mu.Lock()
		if s.status == StatusConnected && (agentID == "" || len(s.cfg.Agents) == 0 || slices.Contains(s.cfg.Agents, agentID)) {
			out = append(out, s.tools...)
		}
		s.mu.Unlock()
	}
	return out
}

// Lookup resolves a model-facing tool name to its server's configuration
// and the server's own tool name.
func (r *Registry) Lookup(name string) (Config, string, error) {
	srv, tool, ok := SplitName(name)
	if !ok {
		return Config{}, "", fmt.Errorf("%w: %q is not an mcp__<server>__<tool> name", ErrUnknownTool, name)
	}
	s, err := r.server(srv)
	if err != nil {
		return Config{}, "", fmt.Errorf("%w: %q: %w", ErrUnknownTool, name, err)
	}
	return s.cfg, tool, nil
}

// SplitName splits mcp__<server>__<tool>.
func SplitName(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, ToolPrefix)
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	return server, tool, ok && server != "" && tool != ""
}

// ToolName is the model-facing name of a server's tool.
func ToolName(server, tool string) string { return ToolPrefix + server + "__" + tool }

// Call calls a tool by its model-facing name with JSON object arguments,
// bounded by the call timeout. A tool that answers an error is a Result
// with IsError, not an error; an error means the call did not complete.
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	srv, tool, ok := SplitName(name)
	if !ok {
		return Result{}, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	s, err := r.server(srv)
	if err != nil {
		return Result{}, err
	}
	var in map[string]any
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &in); err != nil {
			return Result{}, fmt.Errorf("%w: the arguments of %s must be a JSON object: %v", ErrInvalid, name, err)
		}
	}
	s.mu.Lock()
	cs, status := s.session, s.status
	known := slices.ContainsFunc(s.tools, func(t Tool) bool { return t.Tool == tool })
	s.mu.Unlock()
	if status != StatusConnected || cs == nil {
		return Result{}, fmt.Errorf("%w: %q is %s", ErrUnavailable, srv, status)
	}
	if !known {
		return Result{}, fmt.Errorf("%w: server %q has no tool %q", ErrUnknownTool, srv, tool)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: in})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, fmt.Errorf("%w: %s did not answer within %v", ErrUnavailable, name, r.opts.CallTimeout)
		}
		return Result{}, fmt.Errorf("%w: %s: %s", ErrUnavailable, name, s.mask(err.Error()))
	}
	text, err := resultText(res)
	if err != nil {
		return Result{Text: fmt.Sprintf("the result of %s was refused: %v", name, err), IsError: true}, nil
	}
	return Result{Text: text, IsError: res.IsError}, nil
}

// resultText renders a result's content for a model: text parts as they
// are, other parts as their JSON, structured content when there is no text.
// A result past jsonlimit.Default (a JSON part nested too deeply, or the
// whole too large) is an error: it reaches neither the model nor an event.
func resultText(res *sdk.CallToolResult) (string, error) {
	var parts []string
	size := 0
	add := func(s string) error {
		if size += len(s); size > jsonlimit.Default.Bytes {
			return fmt.Errorf("%w: over the %d-byte limit", jsonlimit.ErrTooLarge, jsonlimit.Default.Bytes)
		}
		parts = append(parts, s)
		return nil
	}
	addJSON := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return nil // a part that does not encode is left out
		}
		if err := jsonlimit.Check(b, jsonlimit.Default); err != nil {
			return err
		}
		return add(string(b))
	}
	for _, c := range res.Content {
		var err error
		if t, ok := c.(*sdk.TextContent); ok {
			err = add(t.Text)
		} else {
			err = addJSON(c)
		}
		if err != nil {
			return "", err
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if err := addJSON(res.StructuredContent); err != nil {
			return "", err
		}
	}
	return strings.Join(parts, "\n"), nil
}

// passEnv names the daemon's environment variables a stdio server
// inherits: what a program needs to run, find its home and temp files and
// speak the locale, and nothing that may hold a credential (the provider
// API keys, say). Everything else a server needs is in its own entry's Env.
var passEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TMPDIR", "TERM"}

// serverEnv is a stdio server's environment: passEnv from getenv, then the
// server's own variables.
func serverEnv(getenv func(string) string, own map[string]string) []string {
	var env []string
	for _, k := range passEnv {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(own)) {
		env = append(env, k+"="+own[k])
	}
	return env
}

func (r *Registry) server(name string) (*server, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownServer, name)
	}
	return s, nil
}

func (r *Registry) all() []*server {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*server, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.servers[n])
	}
	return out
}

// connect starts the server's transport, initialises the session, lists its
// tools and watches for its end.
func (r *Registry) connect(ctx context.Context, s *server) {
	s.mu.Lock()
	s.gen++
	gen := s.gen
	s.status, s.err, s.tools = StatusConnecting, "", nil
	s.mu.Unlock()
	// A connect outlives its request (the client may go), not the registry.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.ConnectTimeout)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	var t sdk.Transport
	switch s.cfg.Transport {
	case Stdio:
		// The command outlives this call: it is bound to the session, not
		// to ctx.
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env = serverEnv(os.Getenv, s.cfg.Env)
		cmd.Stderr = newStderrLog(r.log, s.cfg.Name, r.opts.StderrBytes, s.mask)
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	case HTTP:
		t = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, MaxRetries: -1, DisableStandaloneSSE: true}
	}
	cs, err := r.client.Connect(ctx, t, nil)
	var tools []Tool
	if err == nil {
		tools, err = listTools(ctx, cs, s.cfg.Name)
		if err != nil {
			_ = cs.Close()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen { // closed or reconnected meanwhile
		if err == nil {
			_ = cs.Close()
		}
		return
	}
	if err != nil {
		s.status, s.err = StatusFailed, s.mask(err.Error())
		r.log.Warn("mcp server failed to connect", "server", s.cfg.Name, "err", s.err)
		return
	}
	s.status, s.session, s.tools = StatusConnected, cs, tools
	go r.watch(s, cs, gen)
}

// watch marks a server disconnected when its session ends behind the
// registry's back.
func (r *Registry) watch(s *server, cs *sdk.ClientSession, gen int) {
	err := cs.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	s.status, s.session, s.tools = StatusDisconnected, nil, nil
	s.err = "the server went away"
	if err != nil {
		s.err += ": " + s.mask(err.Error())
	}
	r.log.Warn("mcp server disconnected", "server", s.cfg.Name, "err", s.err)
}

func listTools(ctx context.Context, cs *sdk.ClientSession, srv string) ([]Tool, error) {
	var out []Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		schema, _ := json.Marshal(t.InputSchema)
		out = append(out, Tool{Name: ToolName(srv, t.Name), Server: srv, Tool: t.Name, Description: t.Description, InputSchema: schema})
	}
	slices.SortFunc(out, func(a, b Tool) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *server) close() {
	s.mu.Lock()
	s.gen++
	cs := s.session
	s.session, s.tools = nil, nil
	if s.status == StatusConnected {
		s.status, s.err = StatusDisconnected, "closed"
	}
	s.mu.Unlock()
	if cs != nil {
		_ = cs.Close()
	}
}

func (s *server) view() ServerView {
	s.mu.Lock()
	defer s.mu.Unlock()
	agents := slices.Clone(s.cfg.Agents)
	if agents == nil {
		agents = []string{}
	}
	return ServerView{Name: s.cfg.Name, Transport: s.cfg.Transport, ToolCount: len(s.tools), Status: s.status, Error: s.err,
		Approval: s.cfg.Approval, Agents: agents}
}

// mask replaces the server's secret values in a message.
func (s *server) mask(msg string) string {
	for _, v := range s.cfg.Secrets {
		if v != "" {
			msg = strings.ReplaceAll(msg, v, "[secret]")
		}
	}
	return msg
}
