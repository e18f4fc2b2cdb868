package project

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

const (
	// maxDevcontainerSize bounds a devcontainer.json; a larger file is an
	// error.
	maxDevcontainerSize = 1 << 20
	// maxNesting bounds how deeply arrays and objects may nest. hujson parses
	// recursively without a limit, and a fatal stack overflow cannot be
	// recovered, so deeper input is refused before it reaches hujson.
	maxNesting = 100
)

// Devcontainer is the part of a devcontainer.json that Lathe uses: an OCI
// image and a setup command. Lathe supports image-based devcontainers only.
type Devcontainer struct {
	Path              string `json:"path"` // set by Probe, empty from ParseDevcontainer
	Image             string `json:"image,omitempty"`
	PostCreateCommand string `json:"post_create_command,omitempty"`
	// Warnings explain what in the file was ignored, in a fixed order.
	Warnings []string `json:"warnings,omitempty"`
}

// ignoredCommands are devcontainer lifecycle commands Lathe does not run.
var ignoredCommands = []string{"initializeCommand", "onCreateCommand", "updateContentCommand", "postStartCommand", "postAttachCommand"}

// ParseDevcontainer parses a devcontainer.json, which may hold comments and
// trailing commas. Keys are matched exactly, as in the devcontainer
// specification.
//
// postCreateCommand may be a string (used as is), an array of arguments
// (joined with shell quoting so that a shell runs exactly that argv) or an
// object of named commands, each a string or an array. The object's
// commands are joined with " && " in sorted key order, so they run one after
// another rather than in parallel as the specification allows.
//
// Input that is not JSONC, or not an object, is an ErrInvalid error. Fields
// Lathe cannot use, such as a build-based setup without "image" or a
// postCreateCommand of another shape, only add a warning.
func ParseDevcontainer(data []byte) (Devcontainer, error) {
	var dc Devcontainer
	if len(data) > maxDevcontainerSize {
		return dc, fmt.Errorf("devcontainer.json is larger than %d bytes: %w", maxDevcontainerSize, ErrInvalid)
	}
	if nesting(data) > maxNesting {
		return dc, fmt.Errorf("parse devcontainer.json: nested deeper than %d: %w", maxNesting, ErrInvalid)
	}
	std, err := hujson.Standardize(data)
	if err != nil {
		return dc, fmt.Errorf("parse devcontainer.json: %v: %w", err, ErrInvalid)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(std, &fields); err != nil || fields == nil {
		return dc, fmt.Errorf("parse devcontainer.json: not a JSON object: %w", ErrInvalid)
	}

	if raw := fields["image"]; !isAbsent(raw) && json.Unmarshal(raw, &dc.Image) != nil {
		dc.Warnings = append(dc.Warnings, `"image" is not a string; ignored`)
	}
	if dc.Image == "" {
		var build []string
		for _, k := range []string{"build", "dockerFile", "dockerComposeFile"} {
			if !isAbsent(fields[k]) {
				build = append(build, fmt.Sprintf("%q", k))
			}
		}
		if len(build) > 0 {
			dc.Warnings = append(dc.Warnings, "only image-based devcontainers are supported; "+strings.Join(build, ", ")+" ignored")
		} else {
			dc.Warnings = append(dc.Warnings, `no "image" set`)
		}
	}

	if raw := fields["postCreateCommand"]; !isAbsent(raw) {
		cmd, ok := postCreateCommand(raw)
		if ok {
			dc.PostCreateCommand = cmd
		} else {
			dc.Warnings = append(dc.Warnings, `"postCreateCommand" is not a string, an array of strings or an object of those; ignored`)
		}
	}
	for _, k := range ignoredCommands {
		if !isAbsent(fields[k]) {
			dc.Warnings = append(dc.Warnings, fmt.Sprintf("%q is not supported; only \"postCreateCommand\" runs as setup", k))
		}
	}
	return dc, nil
}

// nesting returns how deeply the arrays and objects in JSONC data nest,
// without recursing. It skips strings and comments, so for valid input it
// counts exactly; for invalid input it may count too many, never too few of
// the levels hujson would descend before failing.
func nesting(data []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '/':
			rest := data[i:]
			switch {
			case bytes.HasPrefix(rest, []byte("//")):
				end := bytes.IndexByte(rest, '\n')
				if end < 0 {
					end = len(rest)
				}
				i += end
			case bytes.HasPrefix(rest, []byte("/*")):
				end := bytes.Index(rest[2:], []byte("*/"))
				if end < 0 {
					end = len(rest)
				}
				i += 2 + end + 1
			}
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// postCreateCommand turns the three shapes of postCreateCommand into one
// shell command. It reports false for any other shape; the command is then
// dropped whole rather than run in part.
func postCreateCommand(raw json.RawMessage) (string, bool) {
	if cmd, ok := singleCommand(raw); ok {
		return cmd, true
	}
	var named map[string]json.RawMessage
	if json.Unmarshal(raw, &named) != nil || named == nil {
		return "", false
	}
	var cmds []string
	for _, k := range slices.Sorted(maps.Keys(named)) {
		cmd, ok := singleCommand(named[k])
		if !ok {
			return "", false
		}
		if cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	return strings.Join(cmds, " && "), true
}

// singleCommand accepts a command string or an argv array.
func singleCommand(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil && argv != nil {
		return shellJoin(argv), true
	}
	return "", false
}

// shellJoin quotes each argument for a POSIX shell and joins them with
// spaces.
func shellJoin(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote returns s unchanged when a shell would read it as one literal
// word, and single-quoted otherwise.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_@%+=:,./-", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isAbsent reports whether a field is missing or null.
func isAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
