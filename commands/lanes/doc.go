// Package lanes is the process manager of Ways lanes: each Attempt's copy
// of the checkout, its overlay mount and sandbox, and its run to one end.
package lanes
