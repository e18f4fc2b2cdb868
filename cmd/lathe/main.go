// Command lathe is the Lathe daemon and its audit tools.
//
//	lathe serve [--config FILE] [--data DIR] [--listen ADDR]
//	lathe version
//	lathe url [--config FILE]
//	lathe journal verify [--config FILE] [--data DIR]
//	lathe journal dump [--config FILE] [--data DIR] [--aggregate ID] [--after SEQ]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"lathe/runtime/acp/relay"
	"lathe/runtime/agent/tools"
	"lathe/runtime/git"
	"lathe/runtime/remotefs"
	"lathe/runtime/sandbox/helper"
)

// sandboxHelper is what `lathe sandbox-helper` serves in a sandbox, each
// the in-sandbox half of a protocol whose host half is beside it.
var sandboxHelper = helper.Handlers{
	Commands: map[string]helper.Command{
		tools.FilesCommand: tools.Files,
		tools.KillCommand:  tools.Kill,
		git.UnlinkCommand:  git.Unlink,
		relay.Command:      relay.Listen,
	},
	Streams: map[helper.Kind]helper.Stream{helper.KindFiles: remotefs.Serve},
}

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  lathe serve [--config FILE] [--data DIR] [--listen ADDR]
  lathe version
  lathe url [--config FILE]
  lathe journal verify [--config FILE] [--data DIR]
  lathe journal dump [--config FILE] [--data DIR] [--aggregate ID] [--after SEQ]
`

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(args[1:], stderr)
	case "version":
		fmt.Fprintln(stdout, "lathe", buildVersion())
	case "url":
		err = printURL(args[1:], stdout)
	case "journal":
		err = journalCmd(args[1:], stdout)
	case helper.Subcommand: // Lathe's own process inside its sandboxes (not in the usage)
		return helper.Main(args[1:], sandboxHelper)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "lathe: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "lathe:", err)
		return 1
	}
	return 0
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
