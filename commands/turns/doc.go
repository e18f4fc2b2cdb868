// Package turns accepts, stops, restores and replays a Session's turns: the
// Turn aggregate's commands, its code (before and after trees), and its
// transcript for the next turn's history.
package turns
