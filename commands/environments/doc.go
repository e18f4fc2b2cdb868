// Package environments owns a Session's sandbox: its plan and generation,
// the lifecycle owner that prepares, changes and stops it (changing, then
// ready or failed, then settled), the live sandbox the other capabilities
// work in, the remote provider's clone, seed and sync, the Session's mounts
// and file system, and the Preview's dial into it.
package environments
