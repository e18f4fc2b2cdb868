// Package audit exports the journal's history: who did what, with the
// actors' credential names.
package audit
