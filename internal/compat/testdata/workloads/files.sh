# proves: file operations editors and build tools rely on work across
# directories of the workspace, of /tmp and of the home directory: rename, hard
# and symbolic links, atomic replace (a temporary file written in one directory,
# os.replace'd into another), flock and fcntl (POSIX) locks seen by another
# process, and inotify watches that see creations, writes, renames and deletions.
set -eux
mkdir -p a/deep b
printf 'x\n' > a/deep/f
mv a/deep/f b/f                      # rename across directories
ln b/f a/hard                        # hard link across directories
test "$(stat -c %h b/f)" = 2
ln -s ../b/f a/sym                   # symbolic link
test "$(cat a/sym)" = x
mv a b/a-moved                       # a directory moved into another
test -L b/a-moved/sym
mkdir "$HOME/proj" && printf 'y\n' > "$HOME/proj/g"
ln "$HOME/proj/g" "$HOME/g-link"
mv "$HOME/proj/g" "$HOME/g"
printf 'z\n' > /tmp/t && mv /tmp/t /tmp/u
exec python3 - <<'PY'
import ctypes, errno, fcntl, os, struct, subprocess, sys, tempfile

# Atomic replace: written in one directory, replaced into another.
os.makedirs("out", exist_ok=True)
with open("out/config.json", "w") as f:
    f.write("{}")
fd, tmp = tempfile.mkstemp(dir="b")
os.write(fd, b'{"v": 2}')
os.fsync(fd)
os.close(fd)
os.replace(tmp, "out/config.json")
assert open("out/config.json").read() == '{"v": 2}'
# ... also from /tmp's own file system into /tmp, and within the home.
fd, tmp = tempfile.mkstemp()
os.close(fd)
os.replace(tmp, "/tmp/replaced")
fd, tmp = tempfile.mkstemp(dir=os.environ["HOME"])
os.close(fd)
os.replace(tmp, os.path.join(os.environ["HOME"], "proj", "replaced"))

# flock: another process cannot take the lock while this one holds it.
other = r'''
import fcntl, sys
f = open(sys.argv[1], "a")
try:
    if sys.argv[2] == "flock":
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    sys.exit(3)
'''
for kind in ("flock", "fcntl"):
    path = f"lock-{kind}"
    with open(path, "w") as f:
        if kind == "flock":
            fcntl.flock(f, fcntl.LOCK_EX)
        else:
            fcntl.lockf(f, fcntl.LOCK_EX)
        r = subprocess.run([sys.executable, "-c", other, path, kind])
        assert r.returncode == 3, f"{kind}: a second process took a held lock ({r.returncode})"
    r = subprocess.run([sys.executable, "-c", other, path, kind])
    assert r.returncode == 0, f"{kind}: the lock was not free once released ({r.returncode})"

# inotify through libc, as watchers (editors, dev servers, test runners) use it.
libc = ctypes.CDLL(None, use_errno=True)
ifd = libc.inotify_init1(os.O_NONBLOCK)
assert ifd >= 0, os.strerror(ctypes.get_errno())
os.makedirs("watched", exist_ok=True)
IN_MODIFY, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x2, 0x40, 0x80, 0x100, 0x200
wd = libc.inotify_add_watch(ifd, b"watched", IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE)
assert wd >= 0, os.strerror(ctypes.get_errno())
with open("watched/new", "w") as f:
    f.write("1")
os.rename("watched/new", "watched/renamed")
os.rename("watched/renamed", "b/out-of-watch")
os.rename("out/config.json", "watched/config.json")
os.unlink("watched/config.json")
seen = []
buf = os.read(ifd, 65536)
while buf:
    _, mask, _, n = struct.unpack_from("iIII", buf)
    name = buf[16:16 + n].rstrip(b"\0").decode()
    seen.append((mask & 0xfff, name))
    buf = buf[16 + n:]
want = [(IN_CREATE, "new"), (IN_MODIFY, "new"), (IN_MOVED_FROM, "new"), (IN_MOVED_TO, "renamed"),
        (IN_MOVED_FROM, "renamed"), (IN_MOVED_TO, "config.json"), (IN_DELETE, "config.json")]
assert seen == want, f"inotify saw {seen}, want {want}"
print("files: ok")
PY
