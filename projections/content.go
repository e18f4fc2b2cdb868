package projections

import (
	"slices"

	"lathe/journal/events"
)

// Large turn content (model output, reasoning, tool call arguments and
// results, inputs) is not in the journal's events but in the blob store,
// and events name it (events.Text, events.JSON). The read model folds the
// events as they are, so it holds the references and their previews, never
// megabytes per turn, and folding stays pure. The reads that hand turns
// out (Turns, Turn, TurnByKey, ActiveTurn, LiveTurns, SearchTurns and the
// Snapshot's runs) resolve the references through the BlobReader given to
// ResolveWith, outside the store's lock. A reference that cannot be read
// stays a reference: it encodes as {"$blob": {sha256, size, preview}}, so
// a client sees what is missing instead of a silently cut text.

// ResolveWith sets the reader of referenced content. Without one, reads
// hand out the references. Call it before the store is read.
func (s *Store) ResolveWith(r events.BlobReader) {
	s.sh.mu.Lock()
	s.sh.blobs = r
	s.sh.mu.Unlock()
}

func resolveText(r events.BlobReader, t events.Text) events.Text {
	if out, err := t.Resolve(r); err == nil {
		return out
	}
	return t
}

func resolveJSON(r events.BlobReader, j events.JSON) events.JSON {
	if out, err := j.Resolve(r); err == nil {
		return out
	}
	return j
}

// resolveCalls resolves a copy of calls' arguments and results.
func resolveCalls(r events.BlobReader, calls []ToolCall) []ToolCall {
	out := slices.Clone(calls)
	for i := range out {
		out[i].Arguments = resolveJSON(r, out[i].Arguments)
		out[i].Result = resolveText(r, out[i].Result)
	}
	return out
}

// resolve replaces the content references of t, a clone, with their
// content. Its slices are copied before they change: the store's own turn
// shares their elements.
func (t *Turn) resolve(r events.BlobReader) {
	if !t.hasRefs() {
		return
	}
	t.Input, t.Output = resolveText(r, t.Input), resolveText(r, t.Output)
	if t.DisplayInput != nil {
		d := resolveText(r, *t.DisplayInput)
		t.DisplayInput = &d
	}
	t.ContextReferences = slices.Clone(t.ContextReferences)
	for i := range t.ContextReferences {
		t.ContextReferences[i] = resolveJSON(r, t.ContextReferences[i])
	}
	t.Steps = slices.Clone(t.Steps)
	for i := range t.Steps {
		st := &t.Steps[i]
		st.Text, st.Reasoning = resolveText(r, st.Text), resolveText(r, st.Reasoning)
		st.ToolCalls = slices.Clone(st.ToolCalls)
		for j := range st.ToolCalls {
			st.ToolCalls[j].Arguments = resolveJSON(r, st.ToolCalls[j].Arguments)
		}
	}
	t.ToolCalls = resolveCalls(r, t.ToolCalls)
	if t.Lattice != nil {
		t.Lattice = t.Lattice.clone()
		t.Lattice.Subtasks = resolveSubtasks(r, t.Lattice.Subtasks)
	}
}

// resolveSubtasks resolves a copy of a lattice plan's subtask outputs.
func resolveSubtasks(r events.BlobReader, subtasks []LatticeSubtask) []LatticeSubtask {
	out := slices.Clone(subtasks)
	for i := range out {
		out[i].Output = resolveText(r, out[i].Output)
	}
	return out
}

// hasRefs reports whether any content of t is a reference.
func (t *Turn) hasRefs() bool {
	if t.Input.Stored() || t.Output.Stored() || t.DisplayInput != nil && t.DisplayInput.Stored() {
		return true
	}
	for _, c := range t.ContextReferences {
		if c.Stored() {
			return true
		}
	}
	for _, st := range t.Steps {
		if st.Text.Stored() || st.Reasoning.Stored() {
			return true
		}
		for _, c := range st.ToolCalls {
			if c.Arguments.Stored() {
				return true
			}
		}
	}
	for _, c := range t.ToolCalls {
		if c.Arguments.Stored() || c.Result.Stored() {
			return true
		}
	}
	if t.Lattice != nil {
		for _, st := range t.Lattice.Subtasks {
			if st.Output.Stored() {
				return true
			}
		}
	}
	return false
}

// resolved resolves turns (clones) in place and returns them.
func resolved(r events.BlobReader, turns []Turn) []Turn {
	for i := range turns {
		turns[i].resolve(r)
	}
	return turns
}
