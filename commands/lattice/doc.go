// Package lattice holds the Lattice's rules over the configured team: which
// Agents a lattice Session's Workers are, which mode a Session may take,
// and which Agent a turn runs.
package lattice
