package projections

// TurnTrees is one turn's change record in a Git Workspace: the worktree
// snapshots before and after it and the prefix of the refs that keep them
// (commands/turns/turncode.go).
type TurnTrees struct {
	TurnID string
	Before string
	After  string
	Ref    string
}

// TurnTrees lists the change records of every turn of a Session, rewound
// ones included, in accept order.
func (m *TurnModel) TurnTrees(session string) []TurnTrees {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	var out []TurnTrees
	if st := m.turnsRead(session); st != nil {
		for _, t := range st.Turns {
			if t.ChangesKnown && t.ChangesBefore != "" {
				out = append(out, TurnTrees{TurnID: t.TurnID, Before: t.ChangesBefore, After: t.ChangesAfter, Ref: t.ChangesRef})
			}
		}
	}
	return out
}
