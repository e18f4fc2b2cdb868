package remotefs

// SetMaxWatchDirsForTest bounds the directories a Watcher's helper
// watches, and returns the bound to put back.
func SetMaxWatchDirsForTest(n int) int {
	old := maxWatchDirs
	maxWatchDirs = n
	return old
}
