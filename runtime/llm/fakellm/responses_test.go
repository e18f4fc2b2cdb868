package fakellm_test

import (
	"io"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"lathe/runtime/llm/fakellm"
)

const rsStreamBody = `{"model":"m1","stream":true,"input":"hi"}`

func TestResponsesStreamGolden(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
	defer s.Close()
	resp := post(t, testContext(t), s.URL()+"/v1/responses", rsStreamBody)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "responses_stream.golden", body)
}

func rsClient(s *fakellm.Server) oa.Client {
	return oa.NewClient(option.WithBaseURL(s.URL()+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
}

// TestResponsesSDK decodes the stream and the non-streaming answer with the
// official client.
func TestResponsesSDK(t *testing.T) {
	type call struct{ id, name, args string }
	wantCalls := []call{{"call_a", "read", `{"path":"a.go"}`}, {"call_b", "read", `{"path":"b.go"}`}}
	check := func(t *testing.T, r responses.Response) {
		t.Helper()
		var calls []call
		var reasoning string
		for _, it := range r.Output {
			switch it.Type {
			case "function_call":
				calls = append(calls, call{it.CallID, it.Name, it.Arguments.OfString})
			case "reasoning":
				for _, s := range it.Summary {
					reasoning += s.Text
				}
			}
		}
		if r.OutputText() != "Reading two files." || reasoning != "Let me think." || len(calls) != 2 || calls[0] != wantCalls[0] || calls[1] != wantCalls[1] {
			t.Fatalf("text %q reasoning %q calls %+v", r.OutputText(), reasoning, calls)
		}
		if r.Usage.InputTokens != 120 || r.Usage.OutputTokens != 45 || r.Usage.OutputTokensDetails.ReasoningTokens != 7 {
			t.Fatalf("usage %+v", r.Usage)
		}
	}
	params := responses.ResponseNewParams{Model: "m1", Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("hi")}}

	t.Run("stream", func(t *testing.T) {
		s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
		defer s.Close()
		c := rsClient(s)
		st := c.Responses.NewStreaming(testContext(t), params)
		defer st.Close()
		var text, args strings.Builder
		var done responses.Response
		for st.Next() {
			ev := st.Current()
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.function_call_arguments.delta":
				args.WriteString(ev.Delta)
			case "response.completed":
				done = ev.Response
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != "Reading two files." || args.String() != `{"path":"a.go"}{"path":"b.go"}` {
			t.Fatalf("deltas %q %q", text.String(), args.String())
		}
		check(t, done)
	})
	t.Run("complete", func(t *testing.T) {
		s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
		defer s.Close()
		c := rsClient(s)
		r, err := c.Responses.New(testContext(t), params)
		if err != nil {
			t.Fatal(err)
		}
		check(t, *r)
		if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Path != "/v1/responses" || reqs[0].Stream {
			t.Fatalf("recorded %+v", reqs)
		}
	})
}

func TestResponsesFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		step fakellm.Step
	}{
		{"malformed", fakellm.Malformed()},
		{"drop", fakellm.Drop()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			turn := fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("a"), tc.step}}
			s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{turn, turn}})
			defer s.Close()
			c := rsClient(s)
			st := c.Responses.NewStreaming(testContext(t), responses.ResponseNewParams{Model: "m"})
			completed := false
			for st.Next() {
				completed = completed || st.Current().Type == "response.completed"
			}
			if st.Err() == nil || completed {
				t.Fatalf("stream err %v, completed %v", st.Err(), completed)
			}
			if _, err := c.Responses.New(testContext(t), responses.ResponseNewParams{Model: "m"}); err == nil {
				t.Fatal("non-streaming answer decoded")
			}
		})
	}
}
