package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"lathe/runtime/acp"
	"lathe/runtime/acp/install"
)

// minSecretLen is the shortest accepted API key or bearer token.
const minSecretLen = 16

// idPattern is the shape of Agent ids and provider names: safe in URL paths,
// NATS subject tokens and "provider/model" price keys.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// envPattern is the shape of an environment variable name.
var envPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// shortNamePattern is a name that becomes part of others: an MCP server's
// (of its tools' names), a NATS user's (of its inboxes' subjects).
var shortNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate reports every invalid value, each prefixed by its dotted key, joined
// with errors.Join. Messages name keys and never print secrets or URLs.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}

	// server
	s := c.Server
	host, err := splitListen(s.Listen)
	if err != nil {
		bad("server.listen", "%v", err)
	} else if !c.AuthEnabled() && !isLoopback(host) {
		bad("server.listen", "%q is not a loopback address and no server.api_keys or server.bearer_tokens "+
			"are configured; Lathe refuses to serve unauthenticated beyond this machine: configure "+
			"server.api_keys or server.bearer_tokens, or listen on 127.0.0.1, ::1 or localhost", s.Listen)
	}
	for i, o := range s.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			bad(fmt.Sprintf("server.cors_origins[%d]", i), "%v", err)
		}
	}
	for _, list := range []struct {
		key     string
		secrets []string
	}{{"server.api_keys", Keys(s.APIKeys)}, {"server.bearer_tokens", Keys(s.BearerTokens)}} {
		for i, secret := range list.secrets {
			key := fmt.Sprintf("%s[%d]", list.key, i)
			switch {
			case secret == "":
				bad(key, "empty value")
			case strings.TrimSpace(secret) != secret:
				bad(key, "starts or ends with whitespace")
			case len(secret) < minSecretLen:
				bad(key, "weak secret: shorter than %d characters", minSecretLen)
			}
		}
	}
	if rl := s.RateLimit; rl.Enabled {
		if !positive(rl.RequestsPerSecond) {
			bad("server.rate_limit.requests_per_second", "must be greater than 0 when rate limiting is enabled")
		}
		if rl.Burst < 1 {
			bad("server.rate_limit.burst", "must be at least 1 when rate limiting is enabled")
		}
	}

	// nats
	users := c.NATS.OutsideUsers()
	if n := c.NATS; n.Listen != "" {
		host, err := splitListen(n.Listen)
		switch {
		case err != nil:
			bad("nats.listen", "%v", err)
		case len(users) == 0 && c.AuthEnabled():
			bad("nats.listen", "server credentials are configured, so the NATS listener needs nats.user and nats.password "+
				"(without them anyone who reaches it reads the whole journal)")
		case len(users) == 0 && !isLoopback(host):
			bad("nats.listen", "%q is not a loopback address; a NATS listener beyond this machine needs nats.user and nats.password", n.Listen)
		}
	}
	named := map[string]bool{}
	keys := make([]string, len(users)) // where each user was given
	for i := range keys {
		keys[i] = fmt.Sprintf("nats.users[%d]", i-(len(users)-len(c.NATS.Users)))
	}
	if len(users) > len(c.NATS.Users) {
		keys[0] = "nats"
	}
	for i, u := range users {
		key := keys[i]
		switch {
		case (u.User == "") != (u.Password == ""):
			bad(key+".user", "%s.user and %s.password go together", key, key)
		case u.Password != "" && len(u.Password) < minSecretLen:
			bad(key+".password", "weak secret: shorter than %d characters", minSecretLen)
		case c.NATS.Listen == "":
			bad(key+".user", "credentials without nats.listen have nothing to protect")
		case !shortNamePattern.MatchString(u.User) || u.User == "lathe-daemon" || u.User == "lathe-outside":
			bad(key+".user", "%q must be 1 to 64 letters, digits, _ and - (it names the user's NATS inboxes), other than lathe-daemon and lathe-outside", u.User)
		case named[u.User]:
			bad(key+".user", "%q names another NATS user too", u.User)
		}
		named[u.User] = true
	}

	// providers
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		p, key := c.Providers[name], join("providers", name)
		if !idPattern.MatchString(name) {
			bad(key, "provider names may use only letters, digits, _ and -")
		}
		switch p.Kind {
		case KindOllama, KindOpenAI, KindAnthropic:
		default:
			bad(key+".kind", "%q is not one of ollama, openai, anthropic", p.Kind)
		}
		if p.BaseURL != "" || p.Kind != KindAnthropic {
			if !isHTTPURL(p.BaseURL) {
				bad(key+".base_url", "must be an absolute http:// or https:// URL")
			}
		}
		if p.APIKeyEnv != "" && !envPattern.MatchString(p.APIKeyEnv) {
			bad(key+".api_key_env", "must be the name of an environment variable (letters, digits, _), not the key itself")
		}
	}

	// agents
	seen := make(map[string]int)
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d]", i)
		switch j, dup := seen[a.ID]; {
		case a.ID == "":
			bad(key+".id", "required")
		case !idPattern.MatchString(a.ID):
			bad(key+".id", "%q may use only letters, digits, _ and -", a.ID)
		case dup:
			bad(key+".id", "duplicate id %q (also agents[%d])", a.ID, j)
		default:
			seen[a.ID] = i
		}
		if _, ok := c.Providers[a.Provider]; !ok {
			bad(key+".provider", "%q is not a configured provider", a.Provider)
		}
		if a.Model == "" {
			bad(key+".model", "required")
		}
		for j, dep := range a.Dependencies {
			if dep == "" {
				bad(fmt.Sprintf("%s.dependencies[%d]", key, j), "empty value")
			}
		}
		if a.Budget.MaxOutputTokens < 0 {
			bad(key+".budget.max_output_tokens", "must be 0 (unlimited) or more")
		}
		if !nonNegative(a.Budget.MaxUSD) {
			bad(key+".budget.max_usd", "must be 0 (unlimited) or more")
		}
		validateHooks(key+".hooks", a.Hooks, bad)
		validateACP(key, a, c.Providers, bad)
	}
	validateHooks("hooks", c.Hooks, bad)
	validateTelemetry(c.Telemetry, bad)

	// mcp
	names := map[string]int{}
	if d := c.MCP.FilesDir; d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d) {
		bad("mcp.files_dir", "%q must be an absolute, clean path", d)
	}
	for i, m := range c.MCP.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		if j, dup := names[m.Name]; dup {
			bad(key+".name", "duplicate name %q (also mcp.servers[%d])", m.Name, j)
		}
		names[m.Name] = i
		if !shortNamePattern.MatchString(m.Name) || strings.Contains(m.Name, "__") {
			bad(key+".name", "%q must be 1-64 letters, digits, _ or - without \"__\" (tools are named mcp__<name>__<tool>)", m.Name)
		}
		switch m.Transport {
		case "stdio":
			if m.Command == "" {
				bad(key+".command", "required for a stdio server")
			}
		case "http":
			if !isHTTPURL(m.URL) {
				bad(key+".url", "must be an absolute http:// or https:// URL for an http server")
			}
		default:
			bad(key+".transport", "%q is not one of stdio, http", m.Transport)
		}
		switch m.Approval {
		case "", "always", "never":
		default:
			bad(key+".approval", "%q is not one of always, never", m.Approval)
		}
		for j, a := range m.Agents {
			if !slices.ContainsFunc(c.Agents, func(ag Agent) bool { return ag.ID == a }) {
				bad(fmt.Sprintf("%s.agents[%d]", key, j), "%q is not a configured Agent", a)
			}
		}
	}

	// skills
	skills := map[string]int{}
	for i, sk := range c.Skills {
		key := fmt.Sprintf("skills[%d]", i)
		switch j, dup := skills[sk.ID]; {
		case !idPattern.MatchString(sk.ID):
			bad(key+".id", "%q may use only letters, digits, _ and -", sk.ID)
		case dup:
			bad(key+".id", "duplicate id %q (also skills[%d])", sk.ID, j)
		}
		skills[sk.ID] = i
		if len(sk.Emits) == 0 {
			bad(key+".emits", "lists no event type; a Skill publishes the events it emits")
		}
		for j, e := range sk.Emits {
			if !idPattern.MatchString(e) {
				bad(fmt.Sprintf("%s.emits[%d]", key, j), "%q may use only letters, digits, _ and - (it names a NATS subject token)", e)
			}
		}
	}

	// lattice
	isAgent := func(id string) bool { return slices.ContainsFunc(c.Agents, func(a Agent) bool { return a.ID == id }) }
	if co := c.Lattice.Coordinator; co != "" && !isAgent(co) {
		bad("lattice.coordinator", "%q is not a configured Agent", co)
	}
	for i, w := range c.Lattice.Workers {
		key := fmt.Sprintf("lattice.workers[%d]", i)
		switch {
		case !isAgent(w):
			bad(key, "%q is not a configured Agent", w)
		case w == c.Lattice.Coordinator:
			bad(key, "%q is the coordinator; a Worker must be another Agent", w)
		case slices.Index(c.Lattice.Workers, w) < i:
			bad(key, "%q is listed twice", w)
		}
	}

	// a2a
	receivers := map[string]int{}
	for i, r := range c.A2A.Receivers {
		key := fmt.Sprintf("a2a.receivers[%d]", i)
		switch j, dup := receivers[r.ID]; {
		case !idPattern.MatchString(r.ID):
			bad(key+".id", "%q may use only letters, digits, _ and -", r.ID)
		case dup:
			bad(key+".id", "duplicate id %q (also a2a.receivers[%d])", r.ID, j)
		}
		receivers[r.ID] = i
		if _, ok := seen[r.AgentID]; !ok {
			bad(key+".agent_id", "%q is not a configured agent", r.AgentID)
		}
	}

	// prices
	for _, pm := range slices.Sorted(maps.Keys(c.Prices)) {
		p, key := c.Prices[pm], join("prices", pm)
		if provider, model, ok := strings.Cut(pm, "/"); !ok || provider == "" || model == "" {
			bad(key, "key must have the form provider/model")
		}
		if !nonNegative(p.Input) {
			bad(key+".input", "must be 0 or more")
		}
		if !nonNegative(p.Output) {
			bad(key+".output", "must be 0 or more")
		}
	}

	// sandbox
	sb := c.Sandbox
	switch sb.Provider {
	case SandboxContainerd:
		if sb.Containerd.Address == "" {
			bad("sandbox.containerd.address", "required with the containerd provider")
		}
	case SandboxRemote:
		validateRemote(sb.Remote, bad)
	default:
		bad("sandbox.provider", "%q is not one of containerd, remote", sb.Provider)
	}
	if sb.DefaultImage == "" {
		bad("sandbox.default_image", "required")
	}
	if sb.Containerd.Namespace == "" {
		bad("sandbox.containerd.namespace", "required")
	}
	switch sb.Network {
	case NetworkNone, NetworkHostEgress:
	default:
		bad("sandbox.network", "%q is not one of none, host-egress", sb.Network)
	}
	if sb.Limits.MemoryMB <= 0 {
		bad("sandbox.limits.memory_mb", "must be greater than 0")
	}
	if !positive(sb.Limits.CPUs) {
		bad("sandbox.limits.cpus", "must be greater than 0")
	}
	if sb.Limits.PIDs <= 0 {
		bad("sandbox.limits.pids", "must be greater than 0")
	}
	if c.Turns.MaxSteps <= 0 {
		bad("turns.max_steps", "must be greater than 0")
	}
	if c.Turns.StallTimeoutSeconds <= 0 {
		bad("turns.stall_timeout_seconds", "must be greater than 0")
	}
	if a := c.Git.Author; (a.Name == "") != (a.Email == "") {
		bad("git.author", "set both name and email, or neither")
	}
	for _, f := range [][2]string{{"git.author.name", c.Git.Author.Name}, {"git.author.email", c.Git.Author.Email}} {
		if strings.ContainsAny(f[1], "<>\n\x00") {
			bad(f[0], "must not contain <, >, a newline or NUL")
		}
	}

	return errors.Join(errs...)
}

// splitListen checks that addr is host:port with a numeric port 0–65535 and
// returns the host. An empty host means every interface.
func splitListen(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("%q: port must be a number from 0 to 65535", addr)
	}
	return host, nil
}

// validateRemote checks provider remote's engine, host and TLS files.
func validateRemote(r Remote, bad func(key, format string, args ...any)) {
	if r.Engine != EngineDocker {
		bad("sandbox.remote.engine", "%q is not one of docker", r.Engine)
	}
	tlsSet := r.TLS != (RemoteTLS{})
	u, err := url.Parse(r.Host)
	switch {
	case r.Host == "":
		bad("sandbox.remote.host", "required with the remote provider (unix:///PATH, tcp://HOST:PORT or ssh://[USER@]HOST)")
	case err != nil:
		bad("sandbox.remote.host", "%q is not a URL: %v", r.Host, err)
	case u.Scheme == "unix":
		if !filepath.IsAbs(u.Path) || u.Host != "" {
			bad("sandbox.remote.host", "%q must be unix:// and an absolute socket path", r.Host)
		}
	case u.Scheme == "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" || (u.Path != "" && u.Path != "/") {
			bad("sandbox.remote.host", "%q must be tcp://HOST:PORT", r.Host)
		} else if !tlsSet && !isLoopback(host) {
			bad("sandbox.remote.host", "%q is reachable beyond this machine without TLS, which gives anyone on the network root on the engine host; set sandbox.remote.tls", r.Host)
		}
	case u.Scheme == "ssh":
		if u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
			bad("sandbox.remote.host", "%q must be ssh://[USER@]HOST[:PORT]", r.Host)
		}
	default:
		bad("sandbox.remote.host", "%q: the scheme must be unix, tcp or ssh", r.Host)
	}
	if tlsSet && err == nil && u.Scheme != "tcp" {
		bad("sandbox.remote.tls", "is for tcp:// hosts only, and the host is %s://", u.Scheme)
	}
	if (r.TLS.CertFile == "") != (r.TLS.KeyFile == "") {
		bad("sandbox.remote.tls", "cert_file and key_file go together")
	}
	for _, kf := range [][2]string{{"ca_file", r.TLS.CAFile}, {"cert_file", r.TLS.CertFile}, {"key_file", r.TLS.KeyFile}} {
		key, f := kf[0], kf[1]
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			bad("sandbox.remote.tls."+key, "%q must be an absolute path", f)
		} else if _, err := os.Stat(f); err != nil {
			bad("sandbox.remote.tls."+key, "%v", err)
		}
	}
}

// isLoopback reports whether host is localhost, 127.0.0.0/8 or ::1.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkOrigin checks a browser origin: scheme://host[:port], nothing more.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		return errors.New("must be an http:// or https:// origin")
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#"):
		return errors.New("must be an origin only (scheme://host[:port]), without user, path, query or trailing slash")
	}
	return nil
}

// isHTTPURL reports whether s is an absolute http(s) URL with a host.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func positive(f float64) bool    { return f > 0 && !math.IsInf(f, 1) }
func nonNegative(f float64) bool { return f >= 0 && !math.IsInf(f, 1) }

// Bounds of an outside agent's command line and environment.
const (
	maxACPArgs     = 64
	maxACPEnv      = 64
	maxACPValueLen = 4096
)

// validateACP checks an Agent's kind and acp block. The env may not name a
// provider's key variable or one Lathe sets for the agent (its gateway URL
// and token among them): the agent never holds a provider key.
func validateACP(key string, a Agent, providers map[string]Provider, bad func(key, format string, args ...any)) {
	switch a.Kind {
	case "", KindLathe:
		if a.ACP != nil {
			bad(key+".acp", "only for kind: acp")
		}
		return
	case KindACP:
	default:
		bad(key+".kind", "%q is not one of lathe, acp", a.Kind)
		return
	}
	if a.ACP == nil {
		bad(key+".acp", "required for kind: acp (a preset, or a command and a protocol)")
		return
	}
	key += ".acp"
	x := *a.ACP
	if x.Preset != "" {
		if _, ok := acp.Presets[x.Preset]; !ok {
			bad(key+".preset", "%q is not one of %s", x.Preset, strings.Join(acp.PresetNames(), ", "))
		}
		for _, f := range []struct{ name, value string }{{"package", x.Package}, {"command", x.Command}, {"protocol", x.Protocol}} {
			if f.value != "" {
				bad(key+"."+f.name, "set by the preset; give a preset or a %s, not both", f.name)
			}
		}
	} else {
		if x.Package != "" {
			if _, err := install.ParseSpec(x.Package); err != nil {
				bad(key+".package", "%v", err)
			}
		}
		switch {
		case x.Command == "":
			bad(key+".command", "required without a preset")
		case len(x.Command) > 255 || strings.ContainsAny(x.Command, "\x00\n"):
			bad(key+".command", "must be a program name or an absolute path")
		case x.Package != "" && strings.Contains(x.Command, "/") && (!filepath.IsLocal(x.Command) || filepath.Clean(x.Command) != x.Command):
			bad(key+".command", "%q must be one of the package's bin names or a clean path inside its node_modules", x.Command)
		case x.Package != "":
		case strings.Contains(x.Command, "/") && (!filepath.IsAbs(x.Command) || filepath.Clean(x.Command) != x.Command):
			bad(key+".command", "%q must be a program name on the image's PATH or an absolute, clean path", x.Command)
		}
		if !slices.Contains(acp.Protocols, x.Protocol) {
			bad(key+".protocol", "%q is not one of %s", x.Protocol, strings.Join(acp.Protocols, ", "))
		}
	}
	if len(x.Args) > maxACPArgs {
		bad(key+".args", "more than %d", maxACPArgs)
	}
	for i, arg := range x.Args {
		if len(arg) > maxACPValueLen || strings.ContainsRune(arg, 0) {
			bad(fmt.Sprintf("%s.args[%d]", key, i), "longer than %d bytes or holds a NUL", maxACPValueLen)
		}
	}
	if len(x.Env) > maxACPEnv {
		bad(key+".env", "more than %d variables", maxACPEnv)
	}
	keyVars := map[string]bool{}
	for _, p := range providers {
		keyVars[p.APIKeyEnv] = true
	}
	for _, name := range slices.Sorted(maps.Keys(x.Env)) {
		k := key + ".env." + name
		switch v := x.Env[name]; {
		case !envPattern.MatchString(name):
			bad(k, "%q is not an environment variable name", name)
		case keyVars[name] || acp.Reserved(name):
			bad(k, "%s is a provider key's variable or one Lathe sets for the agent (it reaches its model through Lathe's gateway)", name)
		case len(v) > maxACPValueLen || strings.ContainsRune(v, 0):
			bad(k, "longer than %d bytes or holds a NUL", maxACPValueLen)
		}
	}
}
