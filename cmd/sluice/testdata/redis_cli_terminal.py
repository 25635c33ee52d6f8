# Drives redis-cli in a real terminal (a pty), as a person types at it.
# usage: tty.py REDIS_CLI HOST PORT LINE... ; prints what the terminal showed.
import fcntl, os, pty, select, struct, sys, termios, time

cli, host, port, lines = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(cli, [cli, "-h", host, "-p", port])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))

shown = b""

def pump(until, start=0, seconds=10):
    """Reads the terminal until `until` shows up after start, answering
    cursor-position queries."""
    global shown
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return False
        if b"\x1b[6n" in chunk:  # linenoise asks where the cursor is
            os.write(fd, b"\x1b[1;120R")
        shown += chunk
        if until in shown[start:]:
            return True
    return False

prompt = ("%s:%s> " % (host, port)).encode()
ok = pump(prompt)
for line in lines:
    mark = len(shown)
    os.write(fd, line.encode() + b"\r")
    ok = pump(b"\n" + prompt, mark) and ok  # a fresh prompt, after the reply
os.write(fd, b"quit\r")
pump(b"\x00", len(shown), 1)
try:
    os.kill(pid, 9)
except ProcessLookupError:
    pass
os.waitpid(pid, 0)
sys.stdout.write(shown.decode(errors="replace"))
sys.exit(0 if ok else 1)
