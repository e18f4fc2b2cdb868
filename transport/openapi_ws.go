package transport

import (
	"fmt"
	"maps"
	"slices"

	"github.com/swaggest/jsonschema-go"
	"github.com/swaggest/openapi-go/openapi31"

	"lathe/journal/events"
	"lathe/projections"
)

// The /ws commands and frames in the OpenAPI document: one schema per
// command (ws.command.<cmd>) and per frame kind as the wire names it
// (ws.frame.<kind>), each with its cmd or kind as a const, and their
// discriminated unions ws.command and ws.frame, which the /ws operation
// names (x-lathe-ws).

const (
	wsCommandUnion = "ws.command"
	wsFrameUnion   = "ws.frame"
)

// wsFrames are the /ws frames: each wire kind with the Go type it is sent
// as; a kind sent in two shapes is listed twice.
var wsFrames = []struct {
	kind  string
	frame any
}{
	{"ready", hubFrame{}},
	{"pong", hubFrame{}},
	{"error", errorFrame{}},
	{"snapshot", projections.Snapshot{}},
	{"event", EventFrame{}},
	{"event", projections.TypedEvent{}},
	{events.EnvironmentChanging{}.EventType(), envFrame{}},
	{events.EnvironmentSettled{}.EventType(), envFrame{}},
	{"session-accepted", acceptedFrame{}}, // live
	{"session-accepted", sessionFrame{}},  // a replay's, and a reattach's
	{"session-start", startFrame{}},
	{events.DeltaToken, deltaFrame{}},
	{events.DeltaReasoning, deltaFrame{}},
	{"tool-call", toolCallFrame{}},
	{"turn-plan", turnPlanFrame{}},
	{"coordinator-plan", planFrame{}},
	{"session-done", terminalFrame{}},
	{"session-cancelled", terminalFrame{}},
	{"session-error", terminalFrame{}},
	{"session-stop-rejected", stopRejectedFrame{}},
	{"checkout-changed", checkoutFrame{}},
	{"mcp-approval-required", approvalRequiredFrame{}},
	{"mcp-approval-resolved", approvalResolvedFrame{}},
	{"mcp-approval-unknown", approvalUnknownFrame{}},
	{"workspace-attempt-changing", ownershipFrame{}},
	{"workspace-attempt-settled", ownershipFrame{}},
	{"lane-started", laneStartedFrame{}},
	{"lane-verified", laneVerifiedFrame{}},
	{events.DeltaChatStart, chatStartFrame{}},
	{events.DeltaChatToken, chatDeltaFrame{}},
	{events.DeltaChatReasoning, chatDeltaFrame{}},
	{events.DeltaChatToolStart, chatToolFrame{}},
	{events.DeltaChatToolResult, chatToolFrame{}},
	{"chat-" + events.ChatDone, chatEndFrame{}},
	{"chat-" + events.ChatStopped, chatEndFrame{}},
	{"chat-" + events.ChatError, chatEndFrame{}},
	{"workflow-done", workflowDoneFrame{}},
	{"workflow-error", workflowErrorFrame{}},
}

// hubFrame is the hub's own ready and pong frames.
type hubFrame struct {
	Kind string `json:"kind"`
}

// errorFrame is the /ws error frame (ErrorFrame).
type errorFrame struct {
	Kind    string `json:"kind"` // "error"
	Message string `json:"message"`
}

// pingCommand is the hub's own ping, answered with pong.
type pingCommand struct{}

// addWSSchemas puts the /ws commands' and frames' schemas in components.
func addWSSchemas(r *openapi31.Reflector) error {
	reflect := func(v any) (map[string]any, error) {
		s, err := r.Reflect(v,
			jsonschema.DefinitionsPrefix("#/components/schemas/"),
			jsonschema.CollectDefinitions(func(n string, s jsonschema.Schema) {
				if _, ok := r.SpecEns().ComponentsEns().Schemas[n]; ok {
					return
				}
				if sm, err := s.ToSchemaOrBool().ToSimpleMap(); err == nil {
					r.SpecEns().ComponentsEns().WithSchemasItem(n, sm)
				}
			}))
		if err != nil {
			return nil, err
		}
		return s.ToSchemaOrBool().ToSimpleMap()
	}
	// tagged is sm with member name fixed to value, and required.
	tagged := func(sm map[string]any, name, value string) map[string]any {
		out := maps.Clone(sm)
		props, _ := out["properties"].(map[string]any)
		props = maps.Clone(props)
		if props == nil {
			props = map[string]any{}
		}
		props[name] = map[string]any{"type": "string", "const": value}
		out["properties"] = props
		out["type"] = "object"
		req := []any{name}
		if prev, ok := out["required"].([]any); ok {
			req = append(req, slices.DeleteFunc(slices.Clone(prev), func(v any) bool { return v == name })...)
		}
		out["required"] = req
		return out
	}
	components := r.SpecEns().ComponentsEns()
	union := func(name, property string, members map[string][]map[string]any) {
		mapping := map[string]string{}
		var oneOf []map[string]any
		for _, key := range slices.Sorted(maps.Keys(members)) {
			ref := "#/components/schemas/" + name + "." + key
			mapping[key] = ref
			oneOf = append(oneOf, map[string]any{"$ref": ref})
			sch := members[key][0]
			if len(members[key]) > 1 {
				sch = map[string]any{"oneOf": members[key]}
			}
			components.WithSchemasItem(name+"."+key, sch)
		}
		components.WithSchemasItem(name, map[string]any{"oneOf": oneOf,
			"discriminator": map[string]any{"propertyName": property, "mapping": mapping}})
	}

	commands := map[string][]map[string]any{}
	for _, c := range append((&handlers{}).wsCommands(), WSCommand{Name: "ping", Request: pingCommand{}}) {
		sm, err := reflect(c.Request)
		if err != nil {
			return fmt.Errorf("openapi: ws command %s: %w", c.Name, err)
		}
		// A command's other members are its handler's to ignore: only
		// cmd is read by the hub, and decodeCommand takes unknown ones.
		delete(sm, "additionalProperties")
		commands[c.Name] = append(commands[c.Name], tagged(sm, "cmd", c.Name))
	}
	union(wsCommandUnion, "cmd", commands)

	frames := map[string][]map[string]any{}
	for _, f := range wsFrames {
		sm, err := reflect(f.frame)
		if err != nil {
			return fmt.Errorf("openapi: ws frame %s: %w", f.kind, err)
		}
		frames[f.kind] = append(frames[f.kind], tagged(sm, "kind", f.kind))
	}
	union(wsFrameUnion, "kind", frames)
	return nil
}
