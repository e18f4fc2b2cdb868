package hooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path"

	"lathe/runtime/agent/tools"
)

// SandboxTranscripts is where a sandbox hook finds its transcript: one
// file per turn, written again before each of its hooks' runs.
const SandboxTranscripts = "/tmp/lathe-hooks"

// transcriptFile writes the turn's transcript where h runs, and returns
// its path and what removes it: a host hook's is a file of its own in
// TranscriptDir, removed after the run (the daemon empties that folder at
// start); a sandbox hook's is the turn's file under SandboxTranscripts.
// A transcript that cannot be written leaves the path empty: the hook
// still runs, as a Claude Code hook does with a transcript it cannot read.
func (at Place) transcriptFile(ctx context.Context, h Hook, key string) (string, func()) {
	none := func() {}
	data := at.Transcript()
	if h.Host {
		if at.TranscriptDir == "" {
			return "", none
		}
		f, err := os.CreateTemp(at.TranscriptDir, "lathe-transcript-*.jsonl")
		if err != nil {
			return "", none
		}
		_, werr := f.Write(data)
		if cerr := f.Close(); werr != nil || cerr != nil {
			os.Remove(f.Name())
			return "", none
		}
		return f.Name(), func() { os.Remove(f.Name()) }
	}
	if at.Sandbox == nil {
		return "", none
	}
	sum := sha256.Sum256([]byte(key))
	name := "transcript-" + hex.EncodeToString(sum[:8]) + ".jsonl"
	dir, base := path.Split(SandboxTranscripts)
	args, err := json.Marshal(map[string]string{"path": base + "/" + name, "content": string(data)})
	if err != nil {
		return "", none
	}
	if res := tools.New(at.Sandbox, path.Clean(dir)).Call(ctx, "write_file", args); res.IsError {
		return "", none
	}
	return SandboxTranscripts + "/" + name, none
}
