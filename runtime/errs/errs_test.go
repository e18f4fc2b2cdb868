package errs_test

import (
	"errors"
	"fmt"
	"testing"

	"lathe/runtime/errs"
)

func TestNewKeepsItsMessageAndClass(t *testing.T) {
	unknown := errs.New(errs.NotFound, "unknown agent")
	err := fmt.Errorf("%w: %q", unknown, "coder")
	if got := err.Error(); got != `unknown agent: "coder"` {
		t.Errorf("message %q", got)
	}
	if !errors.Is(err, unknown) || !errors.Is(err, errs.NotFound) {
		t.Errorf("%v is not of its sentinel and class", err)
	}
	for _, c := range errs.Classes {
		if c != errs.NotFound && errors.Is(err, c) {
			t.Errorf("%v is also of class %v", err, c)
		}
	}
}
