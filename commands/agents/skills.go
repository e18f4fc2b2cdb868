package agents

import (
	"context"
	"fmt"
	"slices"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
)

// Skills fires the configured Skills: skill-fired is journaled, and every
// event type the Skill emits becomes a typed event (an `event` frame, a
// lathe.lattice.<type> message and an entry of the recent log), derived
// from it by the projections.
type Skills struct{ *core.Core }

// SkillFiring is the answer of POST /api/skills/{id}/fire.
type SkillFiring struct {
	Skill string   `json:"skill"`
	Types []string `json:"events"`
}

// Fire fires Skill id.
func (s *Skills) Fire(ctx context.Context, id string) (SkillFiring, error) {
	i := slices.IndexFunc(s.Opts.Skills, func(sk core.SkillSpec) bool { return sk.ID == id })
	if i < 0 {
		return SkillFiring{}, fmt.Errorf("%w: skill %q", core.ErrNotFound, id)
	}
	sk := s.Opts.Skills[i]
	if err := s.Append(ctx, []journal.Event{events.New(id, events.SkillFired{Name: sk.Name, Emits: sk.Emits})}); err != nil {
		return SkillFiring{}, err
	}
	return SkillFiring{Skill: id, Types: slices.Clone(sk.Emits)}, nil
}
