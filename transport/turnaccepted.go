package transport

import "lathe/journal/events"

// acceptedFrame is session-accepted as the live stream sends it: with the
// turn's display input, so that every open client shows the user's message
// while the turn runs, not only the tab that sent it (which knows it) or a
// reload (which reads the turn's record). A replay's session-accepted
// (turnEventFrame) stays the bare sessionFrame.
type acceptedFrame struct {
	sessionFrame
	// DisplayInput is the turn's display input, else its input; content the
	// event only references is its preview, as for every frame.
	DisplayInput string `json:"display_input"`
}

// newAcceptedFrame is the live session-accepted frame of e, a turn of session.
func newAcceptedFrame(session string, e events.TurnAccepted) acceptedFrame {
	return acceptedFrame{
		sessionFrame: sessionFrame{Kind: "session-accepted", Session: session, TurnID: e.TurnID},
		DisplayInput: displayText(e.Input, e.DisplayInput),
	}
}

// displayText is what a turn shows as the user's message: its display
// input when it has one, else its input.
func displayText(input events.Text, display *events.Text) string {
	if display != nil {
		return display.String()
	}
	return input.String()
}
