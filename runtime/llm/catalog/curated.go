package catalog

import (
	"os"
	"slices"
)

// The curated model lists for hosted kinds. They are hand-maintained, kept
// short, and only a suggestion: an Agent may name any model its provider
// accepts, and its current model is always listed. The openai list is only
// for OpenAI's own API: any other OpenAI-compatible server (vLLM, LM
// Studio, OpenRouter…) lists what it serves (openai_models.go).
var curated = map[string][]string{
	KindOpenAI: {
		"gpt-5",
		"gpt-5-mini",
		"gpt-4.1",
		"gpt-4.1-mini",
		"gpt-4o",
		"gpt-4o-mini",
		"o4-mini",
		"o3",
	},
	KindAnthropic: {
		"claude-opus-4-1",
		"claude-sonnet-4-5",
		"claude-sonnet-4-0",
		"claude-haiku-4-5",
		"claude-3-5-haiku-latest",
	},
}

// Curated returns a copy of the curated model list of a hosted kind; nil for
// ollama and unknown kinds.
func Curated(kind string) []string { return slices.Clone(curated[kind]) }

func lookupEnv(name string) (string, bool) { return os.LookupEnv(name) }
