// Package agents edits Agent records and their Skills and executes an Agent
// outside a Session.
package agents
