package turns

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// A Session's conversation is derived from its visible turns, never stored
// twice: Transcript is the view GET /api/sessions/{id}/messages answers and
// the legacy rewind {keep} counts in; History is the same walk as provider
// messages, the conversation the model is sent before a new turn. Both
// leave out live turns, partial (unfinished) inferences and the turns whose
// prompt a hook refused: a refused prompt never reaches a model, in its
// turn or any later one (the turn record and the audit trail keep it).

// Message is one entry of a Session's transcript.
type Message struct {
	// Role is "user", "assistant" or "tool".
	Role string `json:"role"`
	// Content is the user's text as typed (display_input when set), the
	// assistant text, or the tool result.
	Content string `json:"content"`
	TurnID  string `json:"turn_id"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []events.StepCall `json:"tool_calls,omitempty"`
	// CallID, Occurrence and IsError are set on tool results.
	CallID     string `json:"call_id,omitempty"`
	Occurrence *int   `json:"occurrence,omitempty"`
	IsError    *bool  `json:"is_error,omitempty"`

	Input string `json:"-"` // the effective input of a user message (History)
}

// NotRunResult is the tool result the model is shown for a call its step
// asked for that never finished (the turn was stopped or the daemon died).
const NotRunResult = "not run: the turn ended before this call finished"

// Transcript is the conversation of turns (a Session's visible turns, in
// accept order) as the model sees it: per ended turn the user message, then
// each finished inference's assistant message and its tool results.
func Transcript(turns []projections.Turn) []Message {
	out := []Message{}
	for _, t := range turns {
		out = append(out, turnMessages(t)...)
	}
	return out
}

// History is Transcript as provider messages: the user messages carry the
// effective input, and every tool call a kept inference asked for has
// exactly one result.
func History(turns []projections.Turn) []llm.Message {
	msgs := Transcript(turns)
	out := make([]llm.Message, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case string(llm.RoleUser):
			out = append(out, llm.Message{Role: llm.RoleUser, Text: m.Input})
		case string(llm.RoleAssistant):
			msg := llm.Message{Role: llm.RoleAssistant, Text: m.Content}
			for _, c := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.CallID, Name: c.Name, Arguments: c.Arguments.Value()})
			}
			out = append(out, msg)
		case string(llm.RoleTool):
			out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: m.CallID, Text: m.Content, IsError: *m.IsError})
		}
	}
	return out
}

// turnMessages is one turn's part of the transcript; a live turn and a
// refused one have none.
func turnMessages(t projections.Turn) []Message {
	if t.Live() || t.Refused {
		return nil
	}
	out := []Message{{Role: string(llm.RoleUser), Content: userText(t), TurnID: t.TurnID, Input: t.Input.String()}}
	last := ""
	if t.Lattice != nil {
		// A lattice turn is its team's work; the conversation keeps the
		// request and the coordinator's answer (the turn record keeps
		// the rest).
		if output := t.Output.String(); t.Status == projections.TurnDone && output != "" {
			out = append(out, Message{Role: string(llm.RoleAssistant), Content: output, TurnID: t.TurnID})
		}
		return out
	}
	for _, st := range t.Steps {
		if st.Partial || (st.Text.IsZero() && len(st.ToolCalls) == 0) {
			continue
		}
		out = append(out, Message{Role: string(llm.RoleAssistant), Content: st.Text.String(), TurnID: t.TurnID, ToolCalls: st.ToolCalls})
		last = st.Text.String()
		for _, c := range st.ToolCalls {
			res, isErr := NotRunResult, true
			if tc := findCall(t.ToolCalls, "", c.CallID, c.Occurrence); tc != nil && tc.Finished {
				res, isErr = tc.Result.String(), tc.IsError
			}
			out = append(out, Message{Role: string(llm.RoleTool), Content: res, TurnID: t.TurnID,
				CallID: c.CallID, Occurrence: &c.Occurrence, IsError: &isErr})
		}
	}
	// A done turn's answer is its last inference's text; a turn that
	// recorded its output otherwise still shows it once.
	if output := t.Output.String(); t.Status == projections.TurnDone && output != "" && output != last {
		out = append(out, Message{Role: string(llm.RoleAssistant), Content: output, TurnID: t.TurnID})
	}
	return out
}

// userText is the user's text of a turn as typed: display_input when set.
func userText(t projections.Turn) string {
	if t.DisplayInput != nil {
		return t.DisplayInput.String()
	}
	return t.Input.String()
}

// callAgent is the Agent a step's calls are told apart by: in a lattice
// turn each Agent numbers its calls on its own; "" means any.
func callAgent(t projections.Turn, st projections.Step) string {
	if t.Lattice == nil {
		return ""
	}
	return st.Agent
}

// findCall finds a call by Agent ("" for any), call ID and occurrence.
func findCall(calls []projections.ToolCall, agent, id string, occurrence int) *projections.ToolCall {
	for i := range calls {
		if (agent == "" || calls[i].Agent == agent) && calls[i].CallID == id && calls[i].Occurrence == occurrence {
			return &calls[i]
		}
	}
	return nil
}

// Rewind moves a Session's conversation head back: keepThrough names the
// last visible turn to keep, or (legacy) keep is a raw count of transcript
// messages, of which the turns wholly inside are kept. Exactly one is given.
// The later visible turns are hidden from the listing and the model; files
// and other effects are untouched. A rewind that hides nothing appends
// nothing. It is refused during a live turn and outside a single-Agent
// Session.
func (s *Turns) Rewind(ctx context.Context, sessionID string, keepThrough *string, keep *int) (hidden []string, err error) {
	switch {
	case (keepThrough == nil) == (keep == nil):
		return nil, fmt.Errorf("%w: give exactly one of keep_through_turn_id or keep", core.ErrInvalid)
	case keepThrough != nil && *keepThrough == "":
		return nil, fmt.Errorf("%w: keep_through_turn_id must name a turn", core.ErrInvalid)
	case keep != nil && *keep < 0:
		return nil, fmt.Errorf("%w: keep must be a message count of 0 or more, not %d", core.ErrInvalid, *keep)
	}
	_, err = s.UpdateSession(ctx, sessionID, func(ss projections.Session) (events.Payload, error) {
		hidden = nil
		if ss.Mode.Kind != events.ModeSingleAgent {
			return nil, fmt.Errorf("%w: rewind needs an autonomous single-Agent Session; session %q is %s", core.ErrConflict, sessionID, ss.Mode.Kind)
		}
		if err := s.RefuseLiveTurn(sessionID); err != nil {
			return nil, err
		}
		// refuseLiveTurn also refuses while an unresolved Ways set owns
		// the Session's Workspace (commands/ways/ways.go).
		turns := s.Store.Turns(sessionID)
		kept, err := s.keptTurns(sessionID, turns, keepThrough, keep)
		if err != nil {
			return nil, err
		}
		for _, t := range turns[kept:] {
			hidden = append(hidden, t.TurnID)
		}
		if len(hidden) == 0 {
			return nil, nil
		}
		ev := events.SessionRewound{Keep: keep, Hidden: hidden}
		if keepThrough != nil {
			ev.KeepThroughTurnID = *keepThrough
		}
		return ev, nil
	})
	if err != nil {
		return nil, err
	}
	if hidden == nil {
		hidden = []string{}
	}
	return hidden, nil
}

// keptTurns is how many of the visible turns (none live) a rewind keeps.
func (s *Turns) keptTurns(sessionID string, turns []projections.Turn, keepThrough *string, keep *int) (int, error) {
	if keepThrough != nil {
		for i, t := range turns {
			if t.TurnID == *keepThrough {
				return i + 1, nil
			}
		}
		if _, ok := s.Store.Turn(sessionID, *keepThrough); ok {
			return 0, fmt.Errorf("%w: turn %q was already rewound; name a visible turn", core.ErrInvalid, *keepThrough)
		}
		return 0, fmt.Errorf("%w: session %q has no turn %q", core.ErrNotFound, sessionID, *keepThrough)
	}
	n := 0
	for i, t := range turns {
		n += len(turnMessages(t))
		if n > *keep {
			return i, nil
		}
	}
	return len(turns), nil
}

// Export is a Session's history for download: its visible turns with their
// steps, tool calls and usage, and the Session's totals over them.
type Export struct {
	Session projections.Session `json:"session"`
	Turns   []projections.Turn  `json:"turns"`
	Totals  ExportTotals        `json:"totals"`
	// WorkspacePath heads the Markdown form.
	WorkspacePath string `json:"-"`
}

// ExportTotals sums the exported turns' usage.
type ExportTotals struct {
	Turns int `json:"turns"`
	projections.Usage
}

// NewExport builds the export of a Session's visible turns.
func NewExport(ss projections.Session, workspacePath string, turns []projections.Turn) Export {
	tot := ExportTotals{Turns: len(turns), Usage: projections.Usage{View: usage.Tokens{TokenUsageKnown: true}.View(), CostKnown: true}}
	for _, t := range turns {
		tot.View = tot.Tokens.Add(t.Usage.Tokens).View()
		tot.CostUSD += t.Usage.CostUSD
		tot.CostKnown = tot.CostKnown && t.Usage.CostKnown
	}
	return Export{Session: ss, Turns: turns, Totals: tot, WorkspacePath: workspacePath}
}

// Markdown renders the export as a readable transcript: per turn the user's
// text, each inference's reasoning (collapsed), text and tool calls with
// their results, the status and the usage; then the Session's total.
func (e Export) Markdown() []byte {
	var b bytes.Buffer
	ss := e.Session
	fmt.Fprintf(&b, "# %s\n\n", oneLine(ss.Name))
	fmt.Fprintf(&b, "- Session: %s\n", ss.ID)
	fmt.Fprintf(&b, "- Workspace: %s\n", CodeSpan(e.WorkspacePath))
	if ss.Mode.Kind == events.ModeSingleAgent {
		fmt.Fprintf(&b, "- Agent: %s\n", CodeSpan(ss.Mode.AgentID))
	} else {
		fmt.Fprintf(&b, "- Mode: %s\n", ss.Mode.Kind)
	}
	fmt.Fprintf(&b, "- Turns: %d\n", len(e.Turns))
	for i, t := range e.Turns {
		writeTurn(&b, i+1, t)
	}
	fmt.Fprintf(&b, "\n---\n\n**Session total** (%d turns): %s\n", e.Totals.Turns, usageLine(e.Totals.Usage))
	return b.Bytes()
}

func writeTurn(b *bytes.Buffer, n int, t projections.Turn) {
	fmt.Fprintf(b, "\n## Turn %d\n\n", n)
	meta := []string{"turn " + CodeSpan(t.TurnID), t.AcceptedAt.UTC().Format(time.RFC3339)}
	if t.Model != "" {
		meta = append(meta, "model "+CodeSpan(t.Model))
	}
	fmt.Fprintf(b, "_%s_\n\n", strings.Join(meta, " · "))
	fmt.Fprintf(b, "### User\n\n%s\n", block(userText(t)))
	writePlan(b, t.Lattice)
	last, output := "", t.Output.String()
	agent := t.AgentID
	for i, st := range t.Steps {
		if t.Lattice != nil && st.Agent != agent {
			agent = st.Agent
			fmt.Fprintf(b, "\n### Agent %s\n", CodeSpan(agent))
		}
		if reasoning := st.Reasoning.String(); reasoning != "" {
			fmt.Fprintf(b, "\n<details>\n<summary>Reasoning (step %d)</summary>\n\n%s\n</details>\n", st.Step, Fence(reasoning, "text"))
		}
		text := st.Text.String()
		if text != "" {
			title := "Assistant"
			switch {
			case st.Partial:
				title += " (partial: this inference did not finish)"
			case t.Status == projections.TurnDone && i == len(t.Steps)-1 && text == output:
				title = "Answer"
			}
			fmt.Fprintf(b, "\n### %s\n\n%s\n", title, block(text))
		}
		if !st.Partial {
			last = text
		}
		for _, c := range st.ToolCalls {
			writeCall(b, c.Name, c.CallID, c.Arguments.Value(), findCall(t.ToolCalls, callAgent(t, st), c.CallID, c.Occurrence))
		}
	}
	if t.Status == projections.TurnDone && output != "" && output != last {
		fmt.Fprintf(b, "\n### Answer\n\n%s\n", block(output))
	}
	fmt.Fprintf(b, "\n%s\n\n%s\n", statusLine(t), "Usage: "+usageLine(t.Usage))
}

// writePlan renders a lattice turn's plan: each subtask, its Worker, what it
// waited for, and how it went.
func writePlan(b *bytes.Buffer, l *projections.Lattice) {
	if l == nil {
		return
	}
	fmt.Fprintf(b, "\n### Plan (coordinator %s)\n\n**Goal:** %s\n\n", CodeSpan(l.Coordinator), oneLine(l.Goal))
	for _, st := range l.Subtasks {
		fmt.Fprintf(b, "- %s **%s** → Worker %s: %s", CodeSpan(st.ID), oneLine(st.Title), CodeSpan(st.Worker), st.Status)
		if len(st.DependsOn) > 0 {
			fmt.Fprintf(b, " (after %s)", strings.Join(st.DependsOn, ", "))
		}
		if st.Tokens != nil {
			fmt.Fprintf(b, ", %s tokens", Thousands(st.Tokens.Total()))
		}
		if st.Error != "" {
			fmt.Fprintf(b, ": %s", oneLine(st.Error))
		}
		b.WriteString("\n")
	}
	for _, st := range l.Subtasks {
		if out := st.Output.String(); out != "" {
			fmt.Fprintf(b, "\n#### Result of %s (%s)\n\n%s\n", CodeSpan(st.ID), CodeSpan(st.Worker), block(out))
		}
	}
}

func writeCall(b *bytes.Buffer, name, id string, args json.RawMessage, c *projections.ToolCall) {
	fmt.Fprintf(b, "\n#### Tool call %s (%s)\n\n%s\n", CodeSpan(name), CodeSpan(id), Fence(prettyJSON(args), "json"))
	switch {
	case c == nil || !c.Finished:
		fmt.Fprintf(b, "\nResult: _%s_\n", NotRunResult)
	case c.IsError:
		fmt.Fprintf(b, "\nResult (error):\n\n%s\n", Fence(c.Result.String(), "text"))
	default:
		fmt.Fprintf(b, "\nResult:\n\n%s\n", Fence(c.Result.String(), "text"))
	}
}

func statusLine(t projections.Turn) string {
	switch t.Status {
	case projections.TurnDone:
		return "**Status:** done"
	case projections.TurnCancelled:
		return "**Status:** cancelled (stopped)"
	case projections.TurnError:
		s := "**Status:** error"
		if t.Refused {
			s = "**Status:** refused (a hook blocked the prompt; no model saw it)"
		}
		if t.Interrupted {
			s += " (interrupted)"
		}
		if t.Budget != "" {
			s += " (" + t.Budget + " budget exceeded)"
		}
		return s + ": " + oneLine(t.Error)
	}
	return "**Status:** " + t.Status + " (in progress)"
}

// usageLine reads "at least" where counts or prices were unknown.
func usageLine(u projections.Usage) string {
	tokens := fmt.Sprintf("%s tokens (%s input, %s output, %s reasoning)",
		Thousands(u.TotalTokens), Thousands(u.InputTokens), Thousands(u.OutputTokens), Thousands(u.ReasoningTokens))
	if !u.TokenUsageKnown {
		tokens = "at least " + tokens
	}
	cost := fmt.Sprintf("$%.4f", u.CostUSD)
	switch {
	case !u.CostKnown && u.CostUSD == 0:
		cost = "cost unknown"
	case !u.CostKnown:
		cost = "at least " + cost
	}
	return tokens + ", " + cost
}

func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// block is free text as Markdown paragraphs; empty text reads as such.
func block(s string) string {
	if strings.TrimSpace(s) == "" {
		return "_(empty)_"
	}
	return strings.TrimRight(s, "\n")
}

// Fence wraps s in a code fence longer than any backtick run inside it.
func Fence(s, lang string) string {
	f := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return f + lang + "\n" + strings.TrimRight(s, "\n") + "\n" + f
}

// CodeSpan is s as inline code, delimited by more backticks than it holds.
func CodeSpan(s string) string {
	s = oneLine(s)
	d := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return d + " " + s + " " + d
	}
	return d + s + d
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// oneLine folds line breaks so a value stays inside its heading or item.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
