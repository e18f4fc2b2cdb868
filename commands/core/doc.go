// Package core is what every command shares: the append with an expected
// version and its retry, the wait for its own seq to be delivered, the
// per-Session lifecycle lock, the effect bracket (intent, then settlement),
// the run registry, the error classes and the Options the daemon assembles.
package core
