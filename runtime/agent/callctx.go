package agent

import "context"

type callKey struct{}

// withCall is the context a tool call runs under: a Toolbox learns from it
// which call of the turn it serves (CallOf).
func withCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallOf returns the turn's call a Toolbox.Call runs for, when RunTurn made it.
func CallOf(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}
