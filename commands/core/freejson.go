package core

import (
	"errors"
	"fmt"

	"lathe/runtime/jsonlimit"
)

// CheckFreeJSON bounds a free-form JSON value from outside (a context
// reference, an A2A message, an Automation's rendered tool input) by
// jsonlimit.Default, so that the event that stores it always replays. A
// value past it is ErrInvalid (400), or ErrTooLarge (413) for its size.
func CheckFreeJSON(what string, raw []byte) error {
	err := jsonlimit.Check(raw, jsonlimit.Default)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsonlimit.ErrTooLarge):
		return fmt.Errorf("%w: %s: %v", ErrTooLarge, what, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
}
