package core

import (
	"context"

	"lathe/journal"
)

// AsOperator returns ctx for commands an operator gives through the
// credential whose audit name is id (transport's Guard: a fingerprint,
// "cookie:<fingerprint>", or "loopback"): every event they append records
// that actor.
func AsOperator(ctx context.Context, id string) context.Context {
	return journal.WithActor(ctx, journal.Actor{Kind: journal.ActorOperator, ID: journal.ActorName(id)})
}

// AsAgent returns ctx for what an Agent does in a turn or run: the events
// its runner appends record the Agent and the run.
func AsAgent(ctx context.Context, agentID, run string) context.Context {
	return journal.WithActor(ctx, journal.Actor{Kind: journal.ActorAgent, ID: journal.ActorName(agentID), Run: journal.ActorName(run)})
}
