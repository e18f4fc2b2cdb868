package chats

import (
	"context"
	"errors"
	"testing"

	"lathe/commands/core"
)

// TestChatTurnIDIsULID: the turn ID transport made must be a ULID (it
// names the turn's route and its record); anything else is refused as
// invalid before anything is read or written.
func TestChatTurnIDIsULID(t *testing.T) {
	for _, id := range []string{"", "T", "01HZZZZZZZZZZZZZZZZZZZZZZ", "01HZZZZZZZZZZZZZZZZZZZZZZZZ", "01hzzzzzzzzzzzzzzzzzzzzzzI", "../../x"} {
		err := (&Chats{}).ChatTurn(context.Background(), "C", id, "hi")
		if !errors.Is(err, core.ErrInvalid) {
			t.Errorf("turn id %q: %v, want ErrInvalid", id, err)
		}
	}
}
