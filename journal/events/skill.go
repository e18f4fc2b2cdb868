package events

func init() {
	register[SkillFired]()
}

// Skill is one configured Skill, by its ID.
const Skill = "skill"

// SkillFired: an operator fired a Skill, which publishes every event type
// it emits as a typed event (projections.TypedEventsOf).
type SkillFired struct {
	Name  string   `json:"name"`
	Emits []string `json:"emits"`
}

func (SkillFired) EventType() string { return "skill-fired" }
func (SkillFired) Aggregate() string { return Skill }

// TypedSubject is the NATS subject of a typed runtime event (CONTRACT.md).
func TypedSubject(typ string) string { return "lathe.lattice." + typ }
