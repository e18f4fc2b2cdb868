// Package agents patches, restarts and executes Agents outside a Session,
// and fires their Skills.
package agents
