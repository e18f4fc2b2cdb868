// Package watch follows a directory tree for changes, debounced: the
// Session checkout's views re-read when anything writes there, the
// workbench's editor, a terminal, a task, an Agent turn or a process outside
// Lathe. It uses fsnotify (inotify on Linux) on the host side of the
// Workspace's bind mount, which sees every writer.
//
// Directories are watched one by one (inotify is not recursive), new ones as
// they appear, at most MaxDirs per tree; inside .git only the directory
// itself is watched (index and HEAD changes), not its objects.
package watch

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// MaxDirs bounds the directories one tree's watch follows: inotify watches
// are a per-user kernel resource. Past it, deeper new directories are not
// followed; their writes still show once anything watched changes.
const MaxDirs = 4096

// Watcher follows one tree until Close.
type Watcher struct {
	w    *fsnotify.Watcher
	done chan struct{}
	once sync.Once
	dirs int
}

// Start watches the tree at root and calls notify, from one goroutine, once
// the tree has been quiet for debounce after a change.
func Start(root string, debounce time.Duration, notify func()) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &Watcher{w: fw, done: make(chan struct{})}
	w.addTree(root)
	go w.loop(debounce, notify)
	return w, nil
}

// addTree watches dir and the directories below it, .git's insides aside.
func (w *Watcher) addTree(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if w.dirs >= MaxDirs {
			return filepath.SkipAll
		}
		if w.w.Add(p) == nil {
			w.dirs++
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		return nil
	})
}

func (w *Watcher) loop(debounce time.Duration, notify func()) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-w.done:
			timer.Stop()
			return
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			if ignored(ev.Name) {
				continue
			}
			if ev.Has(fsnotify.Create) && filepath.Base(filepath.Dir(ev.Name)) != ".git" {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					w.addTree(ev.Name)
				}
			}
			timer.Reset(debounce)
		case <-w.w.Errors:
			// An overflow or a lost watch: a change may have been missed,
			// so say something changed.
			timer.Reset(debounce)
		case <-timer.C:
			notify()
		}
	}
}

// ignored tells whether a change to name says nothing about the checkout:
// git's own lock files in .git. Every `git status` takes index.lock and
// drops it when nothing changed, so a view that re-reads the status on a
// notice would otherwise notify itself forever. The index itself, written
// by a rename from its lock, still notifies; a worktree file named *.lock
// (yarn.lock, Cargo.lock) is the checkout's and notifies too.
func ignored(name string) bool {
	return filepath.Ext(name) == ".lock" && filepath.Base(filepath.Dir(name)) == ".git"
}

// Close stops the watch; notify is not called after it returns.
func (w *Watcher) Close() {
	w.once.Do(func() {
		close(w.done)
		_ = w.w.Close()
	})
}
