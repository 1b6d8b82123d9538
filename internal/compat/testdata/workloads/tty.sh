# proves: programs that need a terminal get one: stdin and stdout are a
# terminal that is the controlling one (/dev/tty opens), its size and modes
# can be read and set (stty raw -echo, then sane), a line typed at it is
# read, curses starts and ends full screen, an interactive shell runs a job
# in the background with job control, and a program can open a terminal of
# its own (a pseudo-terminal pair, as script, expect or a test runner do).
set -eux
tty
test -t 0 && test -t 1
exec 3<> /dev/tty
exec 3>&-
stty size
old=$(stty -g)
stty raw -echo
stty "$old"
IFS= read -r line
test "$line" = 'typed at the terminal'
python3 - <<'PY'
import curses, os, pty
w = curses.initscr()
h, c = w.getmaxyx()
curses.endwin()
assert h > 0 and c > 0, (h, c)
pid, fd = pty.fork()
if pid == 0:
    os.execvp("sh", ["sh", "-c", "tty; stty size"])
out = b""
while True:
    try:
        b = os.read(fd, 1024)
    except OSError:
        break
    if not b:
        break
    out += b
_, st = os.waitpid(pid, 0)
assert st == 0 and b"/dev/pts/" in out, (st, out)
PY
bash -i -c 'sleep 0.1 & jobs; wait %1; echo job done' 2>&1 | grep -q 'job done'
script -qec 'test -t 0 && echo inner terminal' /dev/null | grep -q 'inner terminal'
