package sandboxtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"lathe/runtime/sandbox"
)

// The privilege cases: whatever runs in a sandbox, root inside it included,
// cannot leave on the host a file that grants privileges, and files it
// writes to the working dir belong to the working dir's owner.

// nobody is the unprivileged owner the cases give a working dir.
const nobody = 65534

// OwnedSpec is NewSpec with a working dir owned by uid and gid. It needs
// root on the host to chown; without it the test is skipped.
func OwnedSpec(t testing.TB, uid, gid int) sandbox.Spec {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chowning a working dir needs root")
	}
	spec := NewSpec(t)
	spec.WorkingDir = filepath.Join(spec.WorkingDir, "ws")
	if err := os.Mkdir(spec.WorkingDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(spec.WorkingDir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return spec
}

// escapeScript tries every way it knows to plant a set-id file or a device
// node in the working dir, and prints a line for each attempt that worked.
const escapeScript = `cp /bin/sh rootsh
chmod 4755 rootsh && echo "chmod 4755"
chmod u+s rootsh && echo "chmod u+s"
chmod g+s rootsh && echo "chmod g+s"
mknod vda b 254 0 && echo "mknod b"
mknod null c 1 3 && echo "mknod c"
python3 - <<'EOF'
import ctypes, os, stat
def attempt(name, f):
    try:
        f()
        print(name)
    except OSError:
        pass
attempt("fchmod", lambda: os.fchmod(os.open("rootsh", os.O_RDONLY), 0o6755))
attempt("open O_CREAT 4755", lambda: os.close(os.open("created", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("mknod S_IFREG|S_ISUID", lambda: os.mknod("made", stat.S_IFREG | 0o4755))
attempt("mknod S_IFCHR", lambda: os.mknod("chr", stat.S_IFCHR | 0o666, os.makedev(1, 3)))
libc = ctypes.CDLL(None, use_errno=True)
# fchmodat2 (452 on x86-64), which older seccomp libraries do not know.
if os.uname().machine == "x86_64" and libc.syscall(452, -100, b"rootsh", 0o4755, 0) == 0:
    print("fchmodat2")
EOF
mkfifo fifo || echo "mkfifo refused"
touch owned; mkdir dir
id -u
`

// testNoSetIDOrDevices runs escapeScript in a working dir owned by root and
// in one owned by nobody, then checks the host's view of what it left.
func testNoSetIDOrDevices(t *testing.T, d sandbox.Driver) {
	for _, owner := range []int{0, nobody} {
		spec := OwnedSpec(t, owner, owner)
		sb := Prepare(t, d, spec)
		out, errOut, _ := Output(t, sb, sh(escapeScript))
		if out != "0\n" {
			t.Errorf("owner %d: the attempts that worked, then id -u: %q (stderr %q)", owner, out, errOut)
		}
		CheckWorkspace(t, spec.WorkingDir, owner, owner)
	}
}

// CheckWorkspace fails the test for each set-id file or device node under
// dir, and for each file there not owned by uid and gid.
func CheckWorkspace(t testing.TB, dir string, uid, gid int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if m := fi.Mode(); m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			t.Errorf("on the host: %s is %v", path, m)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(uid) || st.Gid != uint32(gid) {
			t.Errorf("on the host: %s is owned by %d:%d, want %d:%d", path, st.Uid, st.Gid, uid, gid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testWorkspaceOwner: what root inside writes to the working dir belongs to
// the dir's owner on the host, and what the owner made is root's inside.
func testWorkspaceOwner(t *testing.T, d sandbox.Driver) {
	const uid, gid = nobody, nobody - 1
	spec := OwnedSpec(t, uid, gid)
	if err := os.WriteFile(filepath.Join(spec.WorkingDir, "from-host"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(spec.WorkingDir, "from-host"), uid, gid); err != nil {
		t.Fatal(err)
	}
	sb := Prepare(t, d, spec)
	out, errOut, code := Output(t, sb, sh(`mkdir -p sub/deeper && echo x > sub/deeper/file && touch file && ln -s file link && stat -c '%u:%g' from-host && cat from-host && echo ok`))
	if code != 0 || out != "0:0\nok\n" {
		t.Fatalf("inside: %q %q, exit %d", out, errOut, code)
	}
	for _, name := range []string{"sub", "sub/deeper", "sub/deeper/file", "file", "link"} {
		fi, err := os.Lstat(filepath.Join(spec.WorkingDir, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("on the host: %s is owned by %d:%d, want %d:%d", name, st.Uid, st.Gid, uid, gid)
		}
	}
}

// rootScript does what package installs do as root: write and chown under
// /etc and /usr, build and install a package with dpkg, add a user, drop to
// other users, and run a server on a privileged port.
const rootScript = `set -e
echo conf > /etc/lathe-test.conf
chown 42:65534 /etc/lathe-test.conf
test "$(stat -c %u:%g /etc/lathe-test.conf)" = 42:65534
chmod 640 /etc/lathe-test.conf
mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/local/bin
printf 'Package: lathe-test\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' > /tmp/pkg/DEBIAN/control
printf '#!/bin/sh\necho installed\n' > /tmp/pkg/usr/local/bin/lathe-test
chmod 755 /tmp/pkg/usr/local/bin/lathe-test
dpkg-deb --build --root-owner-group /tmp/pkg /tmp/lathe-test.deb >/dev/null
dpkg -i /tmp/lathe-test.deb >/dev/null
lathe-test
useradd -m builder
su builder -c 'id -un; echo mine > ~/f; cat ~/f'
setpriv --reuid=_apt --regid=nogroup --clear-groups id -u
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 80)); print("bound 80")'
`

// testRootInside: root inside the sandbox can still do what package
// managers and build tools need.
func testRootInside(t *testing.T, d sandbox.Driver) {
	// A working dir of the sandbox's own has no host owner to set (and
	// the test needs no root then: rootless Podman's test runs as a user).
	spec := NewSpec(t)
	if sandbox.CapabilitiesOf(d).HostWorkingDir {
		spec = OwnedSpec(t, nobody, nobody)
	}
	sb := Prepare(t, d, spec)
	out, errOut, code := Output(t, sb, sh(rootScript))
	want := "installed\nbuilder\nmine\n42\nbound 80\n"
	if code != 0 || out != want {
		t.Errorf("root inside: %q, exit %d, stderr:\n%s", out, code, strings.TrimSpace(errOut))
	}
}
