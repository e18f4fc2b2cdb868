# Lathe's file helper: one long-lived process per sandbox, serving the
# Session's file routes on the clone. Frames both ways: a 4-byte big-endian
# length and a JSON header, then a 4-byte length and the raw body.
# Every path is resolved inside the root given as argv[1], one component at
# a time from directory descriptors: ".." above the root and absolute
# symlinks are refused as escapes, symlinks inside are followed (at most 40),
# and each directory is opened with O_NOFOLLOW, so a swapped-in link fails.
# A name that is not UTF-8 travels as its exact bytes too: "path_b", "to_b",
# "name_b" and "link_b" (base64) beside the lossy JSON string.
import base64, errno, hashlib, json, os, select, shutil, stat, struct, sys, time

MAX_BODY = 64 << 20
ROOT = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
IN, OUT = sys.stdin.buffer, sys.stdout.buffer


class Escape(Exception):
    pass


def readn(n):
    b = IN.read(n)
    if b is None or len(b) != n:
        sys.exit(0)
    return b


def frame():
    (n,) = struct.unpack(">I", readn(4))
    hdr = json.loads(readn(n))
    (m,) = struct.unpack(">I", readn(4))
    if m > MAX_BODY:
        sys.exit(1)
    return hdr, readn(m)


def send(hdr, body=b""):
    h = json.dumps(hdr).encode()
    OUT.write(struct.pack(">I", len(h)) + h + struct.pack(">I", len(body)) + body)
    OUT.flush()


def arg(h, key):
    """A path the daemon sent, from its exact bytes when they are not UTF-8."""
    b = h.get(key + "_b")
    return os.fsdecode(base64.b64decode(b)) if b is not None else h[key]


def named(d, key, s):
    """d with d[key] = s, and key_b its exact bytes when they are not UTF-8."""
    d[key] = s
    b = os.fsencode(s)
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        d[key + "_b"] = base64.b64encode(b).decode()
    return d


def walk(rel, follow):
    """Returns (dirfd, name): name's parent as a descriptor inside the root."""
    stack = [os.dup(ROOT)]
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    hops = 0
    try:
        while parts:
            c = parts.pop(0)
            if c == "..":
                if len(stack) == 1:
                    raise Escape()
                os.close(stack.pop())
                continue
            last = not parts
            st = None
            try:
                st = os.stat(c, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                if last:
                    return stack.pop(), c
                raise
            if stat.S_ISLNK(st.st_mode) and (follow or not last):
                hops += 1
                if hops > 40:
                    raise OSError(errno.ELOOP, "too many links")
                link = os.readlink(c, dir_fd=stack[-1])
                if link == "" or link.startswith("/"):
                    raise Escape()
                parts = [p for p in link.split("/") if p not in ("", ".")] + parts
                continue
            if last:
                return stack.pop(), c
            stack.append(os.open(c, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=stack[-1]))
        return stack.pop(), "."
    finally:
        for fd in stack:
            os.close(fd)


def info(name, st):
    return named({"size": st.st_size, "mode": st.st_mode, "mtime_ns": st.st_mtime_ns,
            "dev": st.st_dev, "ino": st.st_ino, "uid": st.st_uid, "gid": st.st_gid}, "name", name)


def lstat(d, n):
    return os.stat(n, dir_fd=d, follow_symlinks=False)


def op_lstat(h, body):
    d, n = walk(arg(h, "path"), False)
    try:
        return {"info": info(os.path.basename(arg(h, "path")) or ".", lstat(d, n))}, b""
    finally:
        os.close(d)


def op_readlink(h, body):
    d, n = walk(arg(h, "path"), False)
    try:
        return named({}, "link", os.readlink(n, dir_fd=d)), b""
    finally:
        os.close(d)


def open_final(rel, flags):
    """Opens rel, following symlinks inside the root, never the last hop."""
    d, n = walk(rel, True)
    try:
        return os.open(n, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | flags, dir_fd=d), n
    finally:
        os.close(d)


def op_read(h, body):
    fd, n = open_final(arg(h, "path"), os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return {"info": info(n, st)}, b""
        limit, chunks, got = min(h.get("limit", 0), MAX_BODY - 1) + 1, [], 0
        while got < limit:
            b = os.read(fd, limit - got)
            if not b:
                break
            chunks.append(b)
            got += len(b)
        return {"info": info(n, st)}, b"".join(chunks)
    finally:
        os.close(fd)


def op_readdir(h, body):
    fd, _ = open_final(arg(h, "path"), os.O_DIRECTORY)
    out = []
    try:
        with os.scandir(fd) as it:
            for e in it:
                if len(out) > h.get("max", 0):
                    break
                try:
                    out.append(info(e.name, e.stat(follow_symlinks=False)))
                except OSError:
                    pass
    finally:
        os.close(fd)
    return {"entries": out}, b""


def op_replace(h, body):
    d, n = walk(arg(h, "path"), False)
    tmp = "." + n + ".lathe-" + os.urandom(8).hex() + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=d)
        try:
            os.write(fd, body) if body else None
            try:
                os.fchown(fd, h.get("uid", 0), h.get("gid", 0))
            except OSError:
                pass
            os.fchmod(fd, h.get("perm", 0))
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        try:
            os.rename(tmp, n, src_dir_fd=d, dst_dir_fd=d)
        except OSError:
            os.unlink(tmp, dir_fd=d)
            raise
        os.fsync(d)
        return {"info": info(n, st)}, b""
    finally:
        os.close(d)


def op_mkdir(h, body):
    d, n = walk(arg(h, "path"), False)
    try:
        os.mkdir(n, h.get("perm", 0), dir_fd=d)
        return {}, b""
    finally:
        os.close(d)


def op_create(h, body):
    d, n = walk(arg(h, "path"), False)
    try:
        os.close(os.open(n, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, h.get("perm", 0), dir_fd=d))
        return {}, b""
    finally:
        os.close(d)


def op_rename(h, body):
    d, n = walk(arg(h, "path"), False)
    try:
        d2, n2 = walk(arg(h, "to"), False)
        try:
            if _exists(d2, n2):
                raise OSError(errno.EEXIST, "exists")
            os.rename(n, n2, src_dir_fd=d, dst_dir_fd=d2)
        finally:
            os.close(d2)
        return {}, b""
    finally:
        os.close(d)


def _exists(d, n):
    try:
        lstat(d, n)
        return True
    except FileNotFoundError:
        return False


def op_remove(h, body):
    d, n = walk(arg(h, "path"), False)
    try:
        if n == ".":
            raise OSError(errno.EBUSY, "the root")
        st = lstat(d, n)
        if stat.S_ISDIR(st.st_mode):
            if h.get("all"):
                shutil.rmtree(n, dir_fd=d)
            else:
                os.rmdir(n, dir_fd=d)
        else:
            os.unlink(n, dir_fd=d)
        return {}, b""
    finally:
        os.close(d)


def op_fingerprint(h, body):
    """A hash of the tree's names, sizes, modes and times (a directory's
    name and mode only), .git's insides aside except its top entries
    (index, HEAD), lock files aside: what the watcher compares."""
    sha, count = hashlib.sha256(), 0
    for top, dirs, files, dfd in os.fwalk(".", dir_fd=ROOT, follow_symlinks=False):
        inside_git = top == "./.git"
        if top.startswith("./.git/"):
            dirs[:] = []
            continue
        if inside_git:
            dirs[:] = []
        dirs.sort()
        for name in sorted(dirs + files):
            if inside_git and name.endswith(".lock"):
                continue
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                # A directory's size and time move with its entries, which
                # are here themselves, and with git's lock files in .git,
                # which are not: every git status takes index.lock.
                sha.update(("%s/%s\0%d\n" % (top, name, st.st_mode)).encode("utf-8", "surrogateescape"))
            else:
                sha.update(("%s/%s\0%d\0%d\0%d\n" % (top, name, st.st_size, st.st_mode, st.st_mtime_ns)).encode("utf-8", "surrogateescape"))
            count += 1
            if count > h.get("max", 200000):
                return {"fingerprint": sha.hexdigest(), "truncated": True}, b""
    return {"fingerprint": sha.hexdigest()}, b""


# The watcher's events: inotify (through libc, as the image has no
# module for it) on the root and every directory below it, .git itself but
# not its insides, git's lock files in .git aside, as runtime/watch does on
# the host. New directories are watched as they appear; at most max_dirs.
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x8, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR, IN_DONT_FOLLOW, IN_ISDIR = 0x4000, 0x8000, 0x1000000, 0x2000000, 0x40000000
WATCH_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
              | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
WATCH = None


class Inotify:
    def __init__(self, top, max_dirs):
        import ctypes, ctypes.util
        self.ctypes, self.max_dirs, self.wds = ctypes, max_dirs, {}
        self.libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        try:
            self.tree(top)
        except BaseException:
            os.close(self.fd)  # and its watches with it
            raise

    def add(self, path):
        if len(self.wds) >= self.max_dirs:
            raise OSError(errno.ENOSPC, "more than %d directories to watch" % self.max_dirs)
        wd = self.libc.inotify_add_watch(self.fd, path, WATCH_MASK)
        if wd < 0:
            e = self.ctypes.get_errno()
            if e in (errno.ENOENT, errno.ENOTDIR):
                return  # gone already: its parent's event says so
            raise OSError(e, "inotify_add_watch")
        self.wds[wd] = path

    def tree(self, top):
        self.add(top)
        if os.path.basename(top) == b".git":
            return
        for parent, dirs, _ in os.walk(top):
            for d in dirs:
                self.add(os.path.join(parent, d))
            dirs[:] = [d for d in dirs if d != b".git"]

    def changed(self, buf):
        """Whether the events in buf say something in the tree changed."""
        seen, off = False, 0
        while off + 16 <= len(buf):
            wd, mask, _, n = struct.unpack_from("iIII", buf, off)
            name = buf[off + 16:off + 16 + n].rstrip(b"\0")
            off += 16 + n
            if mask & IN_Q_OVERFLOW:
                seen = True
                continue
            parent = self.wds.get(wd)
            if mask & IN_IGNORED:
                self.wds.pop(wd, None)
                continue
            if parent is None:
                continue
            in_git = os.path.basename(parent) == b".git"
            if in_git and name.endswith(b".lock"):
                continue
            if mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO) and not in_git:
                self.tree(os.path.join(parent, name))
            seen = True
        return seen


def op_wait(h, body):
    """Blocks until something in the tree changed, or timeout_ms passed."""
    global WATCH
    if WATCH is None:
        WATCH = Inotify(os.fsencode(sys.argv[1]), h.get("max", 10000))
    deadline = time.monotonic() + h.get("timeout_ms", 1000) / 1000
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([WATCH.fd], [], [], left)[0]:
            return {"changed": False}, b""
        seen = False
        while True:
            try:
                buf = os.read(WATCH.fd, 1 << 16)
            except BlockingIOError:
                break
            seen = WATCH.changed(buf) or seen
        if seen:
            return {"changed": True}, b""


OPS = {k[3:]: v for k, v in globals().items() if k.startswith("op_")}

while True:
    hdr, body = frame()
    try:
        out, data = OPS[hdr["op"]](hdr, body)
    except Escape:
        out, data = {"escape": True}, b""
    except OSError as e:
        out, data = {"errno": e.errno or errno.EIO, "error": str(e)}, b""
    except Exception as e:  # a bad request: say so, keep serving
        out, data = {"errno": errno.EINVAL, "error": repr(e)}, b""
    send(out, data)
