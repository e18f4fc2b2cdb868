package mcpservers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"lathe/commands/core"
	"lathe/commands/lattice"

	"lathe/runtime/agent/tools"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/mcp"
)

// MCP changes the live MCP registry: catalog installs, reconnects and
// removals. Each is journaled (mcp-server-*) once the registry made it, as
// the audit trail of what the operator connected; secret values never
// enter an event. The registry is runtime state: the next start connects
// the configured servers only.
type MCP struct {
	*core.Core
	registry *mcp.Registry
}

// Install connects the catalog entry slug as server name (the slug when
// name is "") with values. A server that fails to start is installed and
// listed with its error.
func (s *MCP) Install(ctx context.Context, slug, name string, values map[string]string) (mcp.ServerView, error) {
	e, err := mcp.CatalogEntry(slug)
	if err != nil {
		return mcp.ServerView{}, err
	}
	if name == "" {
		name = slug
	}
	cfg, public, err := e.Config(name, values, s.registry.FilesDir())
	if err != nil {
		return mcp.ServerView{}, err
	}
	if err := cfg.Validate(); err != nil {
		return mcp.ServerView{}, err
	}
	if _, err := s.registry.Server(name); err == nil {
		return mcp.ServerView{}, fmt.Errorf("%w: %q is already in the registry", mcp.ErrDuplicate, name)
	}
	// A stop during the install leaves its intent, which the next start
	// settles (the registry is runtime state, so the install did not
	// survive).
	var v mcp.ServerView
	err = s.recorded(ctx, events.EffectMCPInstall, name, slug, func() (outcome []journal.Event, err error) {
		if v, err = s.registry.Add(ctx, cfg); err != nil {
			return nil, err
		}
		return []journal.Event{events.New(name, events.MCPServerInstalled{Slug: slug, Values: public})}, nil
	})
	return v, err
}

// Reconnect reconnects a server's cached transport.
func (s *MCP) Reconnect(ctx context.Context, name string) (v mcp.ServerView, err error) {
	if _, err := s.registry.Server(name); err != nil {
		return v, err
	}
	err = s.recorded(ctx, events.EffectMCPReconnect, name, name, func() (outcome []journal.Event, err error) {
		if v, err = s.registry.Reconnect(ctx, name); err != nil {
			return nil, err
		}
		return []journal.Event{events.New(name, events.MCPServerReconnected{})}, nil
	})
	return v, err
}

// Remove takes a server out of the live registry.
func (s *MCP) Remove(ctx context.Context, name string) error {
	if _, err := s.registry.Server(name); err != nil {
		return err
	}
	return s.recorded(ctx, events.EffectMCPRemove, name, name, func() ([]journal.Event, error) {
		if err := s.registry.Remove(name); err != nil {
			return nil, err
		}
		return []journal.Event{events.New(name, events.MCPServerRemoved{})}, nil
	})
}

// recorded makes one change of the live registry under record, then act
// (commands/startup/effects.go): its intent, the change, then its outcome with the
// settlement. A change that fails records the failure and returns it.
func (s *MCP) recorded(ctx context.Context, kind, name, detail string, change func() ([]journal.Event, error)) error {
	fx, err := s.Intend(ctx, kind, name, detail, "")
	if err != nil {
		return err
	}
	outcome, err := change()
	if serr := fx.Settle(ctx, err, outcome...); serr != nil {
		return errors.Join(err, fmt.Errorf("record the change of MCP server %q: %w", name, serr))
	}
	return err
}

// NewMCP returns the MCP registry's commands over registry.
func NewMCP(c *core.Core, registry *mcp.Registry) *MCP { return &MCP{Core: c, registry: registry} }

// AdvertisedTool reports whether models are offered a tool of this name
// now: a sandbox tool, the lattice coordinator's submit_plan, or a tool of
// a connected MCP server. A model may call any name at all; /metrics
// labels only these (projections/metrics).
func (s *MCP) AdvertisedTool(name string) bool {
	if name == lattice.PlanTool || tools.Has(name) {
		return true
	}
	if !strings.HasPrefix(name, mcp.ToolPrefix) || s.registry == nil {
		return false
	}
	for _, t := range s.registry.Tools() {
		if t.Name == name {
			return true
		}
	}
	return false
}
