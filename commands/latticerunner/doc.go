// Package latticerunner is the process manager of Lattice turns: the
// coordinator's plan, the auction, and the Workers it runs on the same
// Agent loop.
package latticerunner
