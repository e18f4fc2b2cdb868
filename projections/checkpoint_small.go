package projections

import (
	"maps"
	"math"
	"slices"

	"lathe/journal/events"
	"lathe/runtime/usage"
)

// The Agent overlays, the recent log and the Chats go in the checkpoint by
// hand, as the Attempt sets do (checkpoint_ways.go): each holds a pointer
// to a value that may be zero (an overlay's prompt patched to "", a Chat's
// system override set to "", a typed event's tokens: 0), which gob turns
// into nil, so a restart would answer null or nothing where the fold
// answers "" or 0; and an overlay's dependencies patched to none would
// read as not patched.

func (w *cpWriter) agentOverlays(agents map[string]*AgentOverlay) {
	w.uint(uint64(len(agents)))
	for _, id := range slices.Sorted(maps.Keys(agents)) {
		o := agents[id]
		w.str(id)
		w.optStr(o.Name)
		w.optStr(o.Model)
		w.optStr(o.Prompt)
		w.strs(o.Dependencies)
		optW(w, o.Budget, func(b events.AgentBudget) {
			w.int(int64(b.MaxOutputTokens))
			w.uint(math.Float64bits(b.MaxUSD))
		})
		w.int(int64(o.Restarts))
		w.int(int64(o.Patches))
	}
}

func (r *cpReader) agentOverlays(into map[string]*AgentOverlay) {
	for range r.count() {
		id := r.str()
		o := &AgentOverlay{Name: r.optStr(), Model: r.optStr(), Prompt: r.optStr(), Dependencies: r.strs()}
		o.Budget = opt(r, func() events.AgentBudget {
			return events.AgentBudget{MaxOutputTokens: int(r.int()), MaxUSD: math.Float64frombits(r.uint())}
		})
		o.Restarts, o.Patches = int(r.int()), int(r.int())
		into[id] = o
	}
}

func (w *cpWriter) notices(v []Notice) {
	w.uint(uint64(len(v)))
	for i := range v {
		n := &v[i]
		w.str(n.Kind)
		w.str(n.Type)
		w.str(n.Name)
		w.str(n.Agent)
		w.str(n.Task)
		w.str(n.Output)
		w.optInt(n.Tokens)
		w.str(n.Workflow)
		w.str(n.TurnID)
		w.str(n.Skill)
		w.str(n.Automation)
		w.uint(n.Seq)
		w.time(n.At)
		w.str(n.Aggregate)
		w.str(n.AggregateID)
	}
}

func (r *cpReader) notices() []Notice {
	v := make([]Notice, r.count())
	for i := range v {
		v[i] = Notice{TypedEvent: TypedEvent{Kind: r.str(), Type: r.str(), Name: r.str(), Agent: r.str(), Task: r.str(), Output: r.str(),
			Tokens: r.optInt(), Workflow: r.str(), TurnID: r.str(), Skill: r.str(), Automation: r.str(), Seq: r.uint(), At: r.time()},
			Aggregate: r.str(), AggregateID: r.str()}
	}
	return v
}

func (w *cpWriter) chats(chats map[string]*Chat) {
	w.uint(uint64(len(chats)))
	for _, id := range slices.Sorted(maps.Keys(chats)) {
		c := chats[id]
		w.str(c.ID)
		w.str(c.AgentID)
		w.str(c.Name)
		w.bool(c.Starred)
		w.optStr(c.SystemOverride)
		w.optStr(c.ModelOverride)
		optW(w, c.ForkOf, func(f events.ChatFork) {
			w.str(f.ChatID)
			w.int(int64(f.TruncateAt))
		})
		w.str(c.ActiveTurn)
		w.int(int64(c.MessageCount))
		w.time(c.CreatedAt)
		w.time(c.UpdatedAt)
		w.uint(c.Version)
		n(w, c.Messages)
		for i := range c.Messages {
			m := &c.Messages[i]
			w.str(m.ID)
			w.str(m.Role)
			w.text(m.Content)
			w.time(m.CreatedAt)
			w.str(m.TurnID)
			w.str(m.Outcome)
			w.str(m.Error)
			optW(w, m.Usage, func(u usage.View) { w.tokens(u.Tokens) })
			w.text(m.Reasoning)
			w.chatToolCalls(m.ToolCalls)
		}
		n(w, c.Attachments)
		for _, a := range c.Attachments {
			w.str(a.FileID)
			w.bool(a.Pinned)
			w.bool(a.Consumed)
			w.time(a.AttachedAt)
		}
		w.chatToolCalls(c.Calls)
	}
}

func (w *cpWriter) chatToolCalls(v []ChatToolCall) {
	n(w, v)
	for i := range v {
		c := &v[i]
		w.str(c.CallID)
		w.str(c.Name)
		w.json(c.Arguments)
		w.text(c.Result)
		w.bool(c.IsError)
	}
}

// chats reads the Chats into a map and rebuilds each one's search index.
func (r *cpReader) chats(into map[string]*Chat) {
	for range r.count() {
		c := &Chat{ChatInfo: ChatInfo{ID: r.str(), AgentID: r.str(), Name: r.str(), Starred: r.bool(), SystemOverride: r.optStr(), ModelOverride: r.optStr()}}
		c.ForkOf = opt(r, func() events.ChatFork { return events.ChatFork{ChatID: r.str(), TruncateAt: int(r.int())} })
		c.ActiveTurn, c.MessageCount, c.CreatedAt, c.UpdatedAt, c.Version = r.str(), int(r.int()), r.time(), r.time(), r.uint()
		if l := r.len(); l >= 0 {
			c.Messages = make([]ChatMessage, l)
			for i := range c.Messages {
				m := ChatMessage{ID: r.str(), Role: r.str(), Content: r.text(), CreatedAt: r.time(), TurnID: r.str(), Outcome: r.str(), Error: r.str()}
				m.Usage = opt(r, func() usage.View { return r.tokens().View() })
				m.Reasoning, m.ToolCalls = r.text(), r.chatToolCalls()
				c.Messages[i] = m
			}
		}
		if l := r.len(); l >= 0 {
			c.Attachments = make([]ChatAttachment, l)
			for i := range c.Attachments {
				c.Attachments[i] = ChatAttachment{FileID: r.str(), Pinned: r.bool(), Consumed: r.bool(), AttachedAt: r.time()}
			}
		}
		c.Calls = r.chatToolCalls()
		messages := c.MessageCount
		c.reindex()
		if messages != c.MessageCount {
			r.fail()
		}
		into[c.ID] = c
	}
}

func (r *cpReader) chatToolCalls() []ChatToolCall {
	l := r.len()
	if l < 0 {
		return nil
	}
	v := make([]ChatToolCall, l)
	for i := range v {
		v[i] = ChatToolCall{CallID: r.str(), Name: r.str(), Arguments: r.json(), Result: r.text(), IsError: r.bool()}
	}
	return v
}
