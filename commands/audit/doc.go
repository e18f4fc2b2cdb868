// Package audit reads a Session's history from the journal on demand: its
// audit trail, with each actor named (an operator's credential by its
// configured name), and the Session as it was at any seq.
package audit
