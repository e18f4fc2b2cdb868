package llm_test

import (
	"errors"
	"fmt"
	"testing"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

func TestErrorForStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   error
	}{
		{200, nil}, {400, llm.ErrRequest}, {401, llm.ErrAuth}, {403, llm.ErrAuth}, {404, llm.ErrRequest},
		{429, llm.ErrRateLimited}, {500, llm.ErrUnavailable}, {503, llm.ErrUnavailable}, {529, llm.ErrUnavailable},
	} {
		if got := llm.ErrorForStatus(tc.status); got != tc.want {
			t.Errorf("%d: %v, want %v", tc.status, got, tc.want)
		}
	}
}

func TestUsageOf(t *testing.T) {
	err := fmt.Errorf("turn: %w", &llm.StreamError{Err: fmt.Errorf("x: %w", llm.ErrUnavailable), Usage: usage.Tokens{InputTokens: 3}})
	if u, ok := llm.UsageOf(err); !ok || u != (usage.Tokens{InputTokens: 3}) || !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("%+v %v", u, ok)
	}
	if _, ok := llm.UsageOf(errors.New("plain")); ok {
		t.Fatal("plain error has usage")
	}
}
