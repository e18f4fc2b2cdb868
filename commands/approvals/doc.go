// Package approvals parks a call that needs the operator's approval until
// an approval-resolved allow is durable, and keeps the saved scopes.
package approvals
