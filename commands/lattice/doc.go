// Package lattice holds the Lattice's rules over a Session's team: which
// Agents coordinate and work, and which modes a Session may take.
package lattice
