package automations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
)

// runCanceller cancels the runs of a deleted Automation (AutomationEngine).
type runCanceller interface {
	CancelRuns(ctx context.Context, id string) error
}

// rescheduler hears that a record changed, so schedules are read again
// (AutomationTriggers).
type rescheduler interface{ Rescheduled() }

// AutomationRecords saves, moves and deletes Automation records and their
// folders.
type AutomationRecords struct {
	*core.Core
	Read core.AutomationReader
	// Runs cancels a deleted Automation's runs; sched wakes the schedules
	// after a record changed.
	Runs  runCanceller
	Sched rescheduler
	// saves serialises the saves: each checks its subgraphs against the
	// records the others committed, so two saves cannot close a subgraph
	// cycle between them (A→B and B→A, each checked against the other's
	// old record).
	saves sync.Mutex
	// folders serialises the folder commands, which span the folders
	// aggregate and the Automations they move or delete.
	folders sync.Mutex
}

// lookup answers the saved Automations, with rec standing in for its own
// ID (the record being saved).
func (s *AutomationRecords) lookup(rec *events.Automation) automationLookup {
	return func(id string) (events.Automation, bool) {
		if rec != nil && id == rec.ID {
			return *rec, true
		}
		r, ok := s.Read.Automation(id)
		return r.Automation, ok
	}
}

// CreateAutomation saves a new Automation; an existing ID is ErrConflict.
func (s *AutomationRecords) CreateAutomation(ctx context.Context, a events.Automation) (projections.AutomationRecord, error) {
	return s.save(ctx, a, false)
}

// PutAutomation replaces (or creates) Automation id whole; the body's ID
// must be id.
func (s *AutomationRecords) PutAutomation(ctx context.Context, id string, a events.Automation) (projections.AutomationRecord, error) {
	if a.ID != id {
		return projections.AutomationRecord{}, badRecord("the body's id %q is not the path's %q", a.ID, id)
	}
	return s.save(ctx, a, true)
}

func (s *AutomationRecords) save(ctx context.Context, a events.Automation, upsert bool) (projections.AutomationRecord, error) {
	if a.Nodes == nil {
		a.Nodes = []events.Node{}
	}
	if a.Edges == nil {
		a.Edges = []events.Edge{}
	}
	s.saves.Lock()
	defer s.saves.Unlock()
	if err := s.CheckAutomation(&a, s.lookup(&a)); err != nil {
		return projections.AutomationRecord{}, err
	}
	err := s.Retry(ctx, func() error {
		old, exists := s.Read.Automation(a.ID)
		if exists && !upsert {
			return fmt.Errorf("%w: Automation %q exists (PUT replaces it)", core.ErrConflict, a.ID)
		}
		return s.AppendExpecting(ctx, a.ID, old.Version, events.AutomationSaved{Automation: a})
	})
	if err != nil {
		return projections.AutomationRecord{}, err
	}
	s.Sched.Rescheduled()
	r, _ := s.Read.Automation(a.ID)
	return r, nil
}

// DeleteAutomation cancels the Automation's active runs, then deletes it.
func (s *AutomationRecords) DeleteAutomation(ctx context.Context, id string) error {
	if _, ok := s.Read.Automation(id); !ok {
		return fmt.Errorf("%w: Automation %q", core.ErrNotFound, id)
	}
	if err := s.Runs.CancelRuns(ctx, id); err != nil {
		return err
	}
	err := s.Retry(ctx, func() error {
		r, ok := s.Read.Automation(id)
		if !ok {
			return fmt.Errorf("%w: Automation %q", core.ErrNotFound, id)
		}
		return s.AppendExpecting(ctx, id, r.Version, events.AutomationDeleted{})
	})
	s.Sched.Rescheduled()
	return err
}

// MoveAutomation puts the Automation in folder (nil: the root).
func (s *AutomationRecords) MoveAutomation(ctx context.Context, id string, folder *string) (projections.AutomationRecord, error) {
	if folder != nil {
		if err := validFolder(*folder); err != nil {
			return projections.AutomationRecord{}, err
		}
	}
	err := s.Retry(ctx, func() error {
		r, ok := s.Read.Automation(id)
		if !ok {
			return fmt.Errorf("%w: Automation %q", core.ErrNotFound, id)
		}
		return s.AppendExpecting(ctx, id, r.Version, events.AutomationMoved{Folder: folder})
	})
	if err != nil {
		return projections.AutomationRecord{}, err
	}
	r, _ := s.Read.Automation(id)
	return r, nil
}

func (s *AutomationRecords) foldersVersion() uint64 {
	v, _ := s.Journal.Version(events.AutomationFoldersID)
	return v
}

// CreateFolder makes a durable folder; an existing one is ErrConflict.
func (s *AutomationRecords) CreateFolder(ctx context.Context, path, name string) (projections.AutomationFolder, error) {
	if err := validFolder(path); err != nil {
		return projections.AutomationFolder{}, err
	}
	if name != "" {
		var err error
		if name, err = core.CleanName("name", name); err != nil {
			return projections.AutomationFolder{}, err
		}
	}
	s.folders.Lock()
	defer s.folders.Unlock()
	for _, f := range s.Read.AutomationFolders() {
		if f.Path == path && f.Durable {
			return projections.AutomationFolder{}, fmt.Errorf("%w: folder %q exists", core.ErrConflict, path)
		}
	}
	if err := s.AppendExpecting(ctx, events.AutomationFoldersID, s.foldersVersion(), events.AutomationFolderCreated{Path: path, Name: name}); err != nil {
		return projections.AutomationFolder{}, err
	}
	for _, f := range s.Read.AutomationFolders() {
		if f.Path == path {
			return f, nil
		}
	}
	return projections.AutomationFolder{}, fmt.Errorf("folder %q vanished", path)
}

// RenameFolder moves the folder at oldPath, its subfolders and their
// Automations to newPath (and renames it).
func (s *AutomationRecords) RenameFolder(ctx context.Context, oldPath, newPath, newName string) error {
	for _, p := range []string{oldPath, newPath} {
		if err := validFolder(p); err != nil {
			return err
		}
	}
	if newName != "" {
		var err error
		if newName, err = core.CleanName("new_name", newName); err != nil {
			return err
		}
	}
	if newPath == oldPath && newName == "" {
		return nil
	}
	if strings.HasPrefix(newPath, oldPath+"/") {
		return fmt.Errorf("%w: folder %q cannot move into itself", core.ErrInvalid, oldPath)
	}
	s.folders.Lock()
	defer s.folders.Unlock()
	if !s.Read.AutomationFolderExists(oldPath) {
		return fmt.Errorf("%w: folder %q", core.ErrNotFound, oldPath)
	}
	if newPath != oldPath && s.Read.AutomationFolderExists(newPath) {
		return fmt.Errorf("%w: folder %q exists", core.ErrConflict, newPath)
	}
	return s.AppendExpecting(ctx, events.AutomationFoldersID, s.foldersVersion(), events.AutomationFolderRenamed{OldPath: oldPath, NewPath: newPath, NewName: newName})
}

// DeleteFolder deletes the folder at path. With keepContents its
// subfolders and Automations move up to its parent; otherwise its
// Automations (their runs cancelled first) and subfolders are deleted.
func (s *AutomationRecords) DeleteFolder(ctx context.Context, path string, keepContents bool) error {
	if err := validFolder(path); err != nil {
		return err
	}
	s.folders.Lock()
	defer s.folders.Unlock()
	if !s.Read.AutomationFolderExists(path) {
		return fmt.Errorf("%w: folder %q", core.ErrNotFound, path)
	}
	if !keepContents {
		for _, r := range s.Read.Automations() {
			if r.Folder != nil && (*r.Folder == path || strings.HasPrefix(*r.Folder, path+"/")) {
				if err := s.DeleteAutomation(ctx, r.ID); err != nil && !errors.Is(err, core.ErrNotFound) {
					return err
				}
			}
		}
	}
	return s.AppendExpecting(ctx, events.AutomationFoldersID, s.foldersVersion(), events.AutomationFolderDeleted{Path: path, KeepContents: keepContents})
}

// ToolIDs lists what a tool node may call: the built-in tools and the MCP
// tools (mcp__<server>__<tool>), sorted.
func (s *AutomationRecords) ToolIDs() []string {
	out := make([]string, 0, len(BuiltinTools))
	for id := range BuiltinTools {
		out = append(out, id)
	}
	if s.Opts.MCP != nil {
		for _, t := range s.Opts.MCP.Tools() {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}
