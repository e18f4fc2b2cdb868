package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// maxLinks bounds the symlinks one resolution follows, as the kernel does.
const maxLinks = 40

// resolve is `realpath -m` of p: the absolute path it names once every
// symlink on the way is followed, ".." taken after the link before it,
// and components that do not exist kept as they are. It runs inside the
// sandbox, where the tools' paths are checked against the Session root.
func resolve(p string) (string, error) {
	if !path.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		p = wd + "/" + p
	}
	done := "/"                   // resolved so far, always real
	rest := strings.Split(p, "/") // what is left to walk
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, c)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				done = next // missing: the rest is taken as it reads
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			done = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return done, nil
}

// under resolves rel in root (both with realpath -m) and refuses a target
// outside the root, as the tools' guard always has.
func under(root, rel string) (absRoot, target string, err error) {
	if absRoot, err = resolve(root); err != nil {
		return "", "", err
	}
	if target, err = resolve(absRoot + "/" + rel); err != nil {
		return "", "", err
	}
	if target != absRoot && !strings.HasPrefix(target, strings.TrimSuffix(absRoot, "/")+"/") {
		return "", "", toolError(fmt.Sprintf("path %q resolves to %s, outside the session root", rel, target))
	}
	return absRoot, target, nil
}
