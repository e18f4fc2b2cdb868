// Command lathe-mcptest is a small MCP server on the official go-sdk, for
// Lathe's tests: over stdio by default, or streamable HTTP with -http ADDR
// (it prints "listening on http://ADDR/mcp" once it serves).
//
// Its tools: echo {text} answers text; add {a, b} answers the sum; fail
// answers a tool error; sleep {ms} answers after ms milliseconds (a hung
// server for timeouts); crash exits the process mid-call. Every call is
// appended, one JSON line {tool, arguments}, to $LATHE_MCPTEST_LOG when
// set, so a test can prove a call never reached the server. -print-env
// names variables it prints on stderr at start (what its environment holds).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to answer"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type sleepIn struct {
	MS int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}

type none struct{}

var logMu sync.Mutex

// record appends one call to $LATHE_MCPTEST_LOG.
func record(tool string, args any) {
	path := os.Getenv("LATHE_MCPTEST_LOG")
	if path == "" {
		return
	}
	logMu.Lock()
	defer logMu.Unlock()
	b, _ := json.Marshal(map[string]any{"tool": tool, "arguments": args})
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		log.Printf("call log: %v", err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(b, '\n'))
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "lathe-mcptest", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Answers the text it is given."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			record("echo", in)
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			record("add", in)
			return text(fmt.Sprint(in.A + in.B)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always answers a tool error."},
		func(_ context.Context, _ *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			record("fail", in)
			r := text("the tool failed on purpose")
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Answers after a while."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			record("sleep", in)
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			case <-ctx.Done():
			}
			return text("slept"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server mid-call."},
		func(_ context.Context, _ *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			record("crash", in)
			os.Exit(3)
			return nil, nil, nil
		})
	return s
}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	printEnv := flag.String("print-env", "", "comma-separated variables to print on stderr at start, as env NAME=\"value\"")
	flag.Parse()
	fmt.Fprintln(os.Stderr, "lathe-mcptest: starting") // a line for the daemon's bounded stderr log
	for name := range strings.SplitSeq(*printEnv, ",") {
		if name != "" {
			fmt.Fprintf(os.Stderr, "env %s=%q\n", name, os.Getenv(name))
		}
	}
	if *addr == "" {
		if err := server().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	s := server()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
