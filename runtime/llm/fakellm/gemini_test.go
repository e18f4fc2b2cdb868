package fakellm_test

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"lathe/runtime/llm/fakellm"
)

const gmStreamPath = "/v1beta/models/m1:streamGenerateContent?alt=sse"

func TestGeminiStreamGolden(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
	defer s.Close()
	resp := post(t, testContext(t), s.URL()+gmStreamPath, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "gemini_stream.golden", body)
	if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Model != "m1" || !reqs[0].Stream {
		t.Fatalf("recorded %+v", reqs)
	}
}

// gmAnswer is what a Gemini client makes of a reply: the joined text and
// thoughts, the calls, the last finish reason and usage.
type gmAnswer struct {
	text, thought, finish string
	calls                 []string
	usage                 [4]int // prompt, candidates, thoughts, total
}

type gmChunk struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string `json:"text"`
				Thought      bool   `json:"thought"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int `json:"thoughtsTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
}

func (a *gmAnswer) add(t *testing.T, c gmChunk) {
	t.Helper()
	if len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" {
		t.Fatalf("chunk %+v", c)
	}
	for _, p := range c.Candidates[0].Content.Parts {
		switch {
		case p.FunctionCall != nil:
			a.calls = append(a.calls, p.FunctionCall.ID+" "+p.FunctionCall.Name+" "+string(p.FunctionCall.Args))
		case p.Thought:
			a.thought += p.Text
		default:
			a.text += p.Text
		}
	}
	if f := c.Candidates[0].FinishReason; f != "" {
		a.finish = f
	}
	if u := c.UsageMetadata; u != nil {
		a.usage = [4]int{u.PromptTokenCount, u.CandidatesTokenCount, u.ThoughtsTokenCount, u.TotalTokenCount}
	}
}

// TestGeminiAnswer decodes the stream and the generateContent answer as a
// Gemini client does.
func TestGeminiAnswer(t *testing.T) {
	want := gmAnswer{text: "Reading two files.", thought: "Let me think.", finish: "STOP",
		calls: []string{`call_a read {"path":"a.go"}`, `call_b read {"path":"b.go"}`}, usage: [4]int{120, 38, 7, 165}}
	for _, tc := range []struct {
		name, path string
		stream     bool
	}{
		{"stream", gmStreamPath, true},
		{"complete", "/v1beta/models/m1:generateContent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
			defer s.Close()
			resp := post(t, testContext(t), s.URL()+tc.path, `{"contents":[]}`)
			var got gmAnswer
			if tc.stream {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					data, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "data: ")
					if !ok {
						continue
					}
					var c gmChunk
					if err := json.Unmarshal([]byte(data), &c); err != nil {
						t.Fatalf("%v: %s", err, data)
					}
					got.add(t, c)
				}
			} else {
				var c gmChunk
				if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
					t.Fatal(err)
				}
				got.add(t, c)
			}
			if strings.Join(got.calls, "|") != strings.Join(want.calls, "|") || got.text != want.text || got.thought != want.thought ||
				got.finish != want.finish || got.usage != want.usage {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
			if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Model != "m1" || reqs[0].Stream != tc.stream {
				t.Fatalf("recorded %+v", reqs)
			}
		})
	}
}

// TestGeminiErrors: a scripted failure and an unknown method answer in
// Google's error shape.
func TestGeminiErrors(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.RateLimited("3")}}}})
	defer s.Close()
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{gmStreamPath, 429, "RESOURCE_EXHAUSTED"},
		{"/v1beta/models/m1:countTokens", 404, "NOT_FOUND"},
	} {
		resp := post(t, testContext(t), s.URL()+tc.path, `{}`)
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.status || e.Error.Code != tc.status || e.Error.Status != tc.code || e.Error.Message == "" {
			t.Errorf("%s: status %d body %+v", tc.path, resp.StatusCode, e)
		}
	}
}

// TestGeminiFaults: Malformed sends a chunk no client decodes; Drop ends
// the stream before its finish reason.
func TestGeminiFaults(t *testing.T) {
	for _, step := range []fakellm.Step{fakellm.Malformed(), fakellm.Drop()} {
		t.Run(string(step.Kind), func(t *testing.T) {
			s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("a"), step}}}})
			defer s.Close()
			resp := post(t, testContext(t), s.URL()+gmStreamPath, `{}`)
			body, _ := io.ReadAll(resp.Body)
			broken := false
			for _, l := range strings.Split(string(body), "\r\n\r\n") {
				if data, ok := strings.CutPrefix(l, "data: "); ok && !json.Valid([]byte(data)) {
					broken = true
				}
			}
			if finished := strings.Contains(string(body), `"finishReason"`); broken != (step.Kind == fakellm.KindMalformed) || finished == (step.Kind == fakellm.KindDrop) {
				t.Fatalf("broken %v, finished %v: %s", broken, finished, body)
			}
		})
	}
}
