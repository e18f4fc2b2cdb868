package remotefs

import (
	"io/fs"
	"syscall"
	"time"
)

// FileInfo is the fs.FileInfo of what the helper reported; Sys is a
// *syscall.Stat_t with the device, inode, owner and mode, as on the host.
func (i Info) FileInfo() fs.FileInfo { return fileInfo{i} }

type fileInfo struct{ i Info }

func (f fileInfo) Name() string       { return f.i.Name }
func (f fileInfo) Size() int64        { return f.i.Size }
func (f fileInfo) Mode() fs.FileMode  { return FileMode(f.i.Mode) }
func (f fileInfo) ModTime() time.Time { return time.Unix(0, f.i.MtimeNS) }
func (f fileInfo) IsDir() bool        { return f.Mode().IsDir() }
func (f fileInfo) Sys() any {
	i := f.i
	return &syscall.Stat_t{Dev: i.Dev, Ino: i.Ino, Uid: i.UID, Gid: i.GID, Mode: i.Mode, Size: i.Size}
}

// FileMode converts a Unix st_mode to Go's file mode, as os.Lstat does.
func FileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
