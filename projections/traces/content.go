package traces

import (
	"encoding/json"
	"regexp"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"lathe/journal/events"
)

// Content on spans is opt-in (Options.Content, telemetry.capture_content):
// the turn's input on its invoke_agent span (gen_ai.input.messages), each
// inference's text and tool calls on its chat span
// (gen_ai.output.messages), a tool call's arguments and result on its
// execute_tool span (gen_ai.tool.call.arguments, .result). Secrets never
// leave: every value goes through the redactor first, which replaces the
// daemon's own secrets (Options.Secrets) and strings shaped like common
// credentials with [REDACTED]; and each value is clipped to MaxContent.

// MaxContent bounds one content attribute, in bytes.
const MaxContent = 4 << 10

// Redacted replaces a secret in span content.
const Redacted = "[REDACTED]"

// Attribute keys of the tool call's content (the GenAI conventions' names).
const (
	ToolArgumentsKey = attribute.Key("gen_ai.tool.call.arguments")
	ToolResultKey    = attribute.Key("gen_ai.tool.call.result")
)

// secretShapes are credentials recognisable by their form, whoever owns
// them: provider and forge tokens, cloud keys, private keys, bearer and
// basic credentials.
var secretShapes = regexp.MustCompile(strings.Join([]string{
	`sk-[A-Za-z0-9_-]{16,}`,                // OpenAI, Anthropic (sk-ant-…)
	`gh[pousr]_[A-Za-z0-9]{20,}`,           // GitHub tokens
	`github_pat_[A-Za-z0-9_]{20,}`,         // GitHub fine-grained tokens
	`glpat-[A-Za-z0-9_-]{20,}`,             // GitLab tokens
	`xox[abprs]-[A-Za-z0-9-]{10,}`,         // Slack tokens
	`AKIA[0-9A-Z]{16}`,                     // AWS access key IDs
	`AIza[0-9A-Za-z_-]{35}`,                // Google API keys
	`(?i)bearer\s+[A-Za-z0-9._~+/=-]{12,}`, // Authorization: Bearer …
	`(?i)basic\s+[A-Za-z0-9+/=]{12,}`,      // Authorization: Basic …
	`://[^/\s:@]+:[^/\s@]+@`,               // URL userinfo with a password
	`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`,
}, "|"))

// redactor scrubs content before it goes on a span.
type redactor struct{ known *strings.Replacer }

// newRedactor knows secrets; values shorter than 8 bytes are not matched
// alone (they would scrub ordinary words).
func newRedactor(secrets []string) *redactor {
	var pairs []string
	for _, s := range secrets {
		if len(s) >= 8 {
			pairs = append(pairs, s, Redacted)
		}
	}
	return &redactor{known: strings.NewReplacer(pairs...)}
}

// clean replaces the secrets in s.
func (r *redactor) clean(s string) string {
	return secretShapes.ReplaceAllString(r.known.Replace(s), Redacted)
}

// scrub is s cleaned and clipped, for one attribute.
func (r *redactor) scrub(s string) string { return clip(r.clean(s)) }

func clip(s string) string {
	if len(s) > MaxContent {
		s = strings.ToValidUTF8(s[:MaxContent], "") + "…"
	}
	return s
}

// text is a Text field as span content: a large one lives only in the
// blob store, and the span says so.
func text(t events.Text) string {
	if t.Blob != nil {
		return "[large content: in the journal's blob store]"
	}
	return t.Inline
}

func jsonText(j events.JSON) string {
	if j.Blob != nil {
		return "[large content: in the journal's blob store]"
	}
	return string(j.Inline)
}

// part is one part of a GenAI message.
type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// messages encodes ms; their parts were cleaned.
func messages(ms ...message) string {
	b, _ := json.Marshal(ms)
	return clip(string(b))
}

// input is a turn's input as gen_ai.input.messages.
func (r *redactor) input(in events.Text) attribute.KeyValue {
	return semconv.GenAIInputMessagesKey.String(messages(message{Role: "user", Parts: []part{{Type: "text", Content: r.clean(text(in))}}}))
}

// output is an inference's message as gen_ai.output.messages.
func (r *redactor) output(e events.TurnOutput, reason string) attribute.KeyValue {
	m := message{Role: "assistant", FinishReason: reason, Parts: []part{}}
	if s := text(e.Text); s != "" {
		m.Parts = append(m.Parts, part{Type: "text", Content: r.clean(s)})
	}
	for _, c := range e.ToolCalls {
		args := json.RawMessage(r.clean(jsonText(c.Arguments)))
		if !json.Valid(args) {
			args, _ = json.Marshal(string(args))
		}
		m.Parts = append(m.Parts, part{Type: "tool_call", ID: c.CallID, Name: c.Name, Arguments: args})
	}
	return semconv.GenAIOutputMessagesKey.String(messages(m))
}
