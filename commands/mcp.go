package commands

import (
	"context"
	"fmt"

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
	*core
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
	// Recorded, then acted: a stop during the install leaves its intent,
	// which the next start settles (the registry is runtime state, so the
	// install did not survive).
	fx, err := s.intend(ctx, events.EffectMCPInstall, name, slug, "")
	if err != nil {
		return mcp.ServerView{}, err
	}
	v, err := s.registry.Add(ctx, cfg)
	if err != nil {
		if serr := fx.settle(ctx, err); serr != nil {
			s.log.Error("settle a failed MCP install", "server", name, "err", serr)
		}
		return mcp.ServerView{}, err
	}
	if err := fx.settle(ctx, nil, events.New(name, events.MCPServerInstalled{Slug: slug, Values: public})); err != nil {
		return v, fmt.Errorf("record the change of MCP server %q: %w", name, err)
	}
	return v, nil
}

// Reconnect reconnects a server's cached transport.
func (s *MCP) Reconnect(ctx context.Context, name string) (mcp.ServerView, error) {
	v, err := s.registry.Reconnect(ctx, name)
	if err != nil {
		return v, err
	}
	return v, s.record(ctx, name, events.MCPServerReconnected{})
}

// Remove takes a server out of the live registry.
func (s *MCP) Remove(ctx context.Context, name string) error {
	if err := s.registry.Remove(name); err != nil {
		return err
	}
	return s.record(ctx, name, events.MCPServerRemoved{})
}

func (s *MCP) record(ctx context.Context, name string, p events.Payload) error {
	if err := s.append(context.WithoutCancel(ctx), []journal.Event{events.New(name, p)}); err != nil {
		return fmt.Errorf("record the change of MCP server %q: %w", name, err)
	}
	return nil
}
