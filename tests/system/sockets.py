"""The system test's socket clients, run in the booted root (python3-minimal):

  features PATH [CMD...]  connect to the vhost-user socket PATH (retrying for
                          up to 5 s while it is not there), send GET_FEATURES
                          and check the reply's header; prints the features;
                          then runs CMD, if given, while still connected, and
                          exits with its status
  collect PATH N          listen on the unix stream socket PATH, accept one
                          connection, read N bytes; prints their SHA-256
  send PATH N             send N bytes to the unix datagram socket PATH in
                          1 KiB datagrams (no empty one at the end: the relay
                          stays up); prints their SHA-256
  echo PATH               listen on the unix stream socket PATH and send back
                          what each connection sends, until it ends; runs
                          until killed
  stream PATH READY STOP  one connection to PATH that streams the pattern and
                          checks every byte that comes back; creates the file
                          READY once 256 KiB came back, goes on until the
                          file STOP is there, then ends its side and reads
                          the rest up to EOF; prints the bytes checked
  churn PATH READY STOP   new connections to PATH one after another, each
                          sending 4 KiB and checking them back, until the
                          file STOP is there (one at least); creates READY
                          after the first; prints how many

The bytes of send are the same every time, so collect's hash can be
compared with it. Exit 1 with a line on stderr saying what went wrong.
"""
import hashlib
import os
import socket
import struct
import subprocess
import sys
import time

TIMEOUT = 10


def pattern(n):
    return bytes((i * 7 + (i >> 10)) & 0xFF for i in range(n))


def features(path, cmd):
    deadline = time.monotonic() + 5
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            break
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    s.settimeout(TIMEOUT)
    s.sendall(struct.pack("<III", 1, 1, 0))  # GET_FEATURES, version 1
    reply = b""
    while len(reply) < 20:
        chunk = s.recv(20 - len(reply))
        if not chunk:
            sys.exit(f"{path}: connection closed before the GET_FEATURES reply")
        reply += chunk
    req, flags, size, bits = struct.unpack("<IIIQ", reply)
    if req != 1 or flags != 5 or size != 8:
        sys.exit(f"{path}: reply {req} {flags:#x} {size}, expected 1 0x5 8")
    print(f"features={bits:#x}", flush=True)
    if cmd:
        sys.exit(subprocess.run(cmd, timeout=TIMEOUT).returncode)


def listen_at(path, backlog):
    """A unix stream listener at path, a stale file there replaced."""
    if os.path.exists(path):
        os.unlink(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(path)
    ls.listen(backlog)
    return ls


def collect(path, n):
    ls = listen_at(path, 1)
    ls.settimeout(TIMEOUT)
    c, _ = ls.accept()
    c.settimeout(TIMEOUT)
    got = b""
    while len(got) < n:
        chunk = c.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    print(f"bytes={len(got)} sha256={hashlib.sha256(got).hexdigest()}")
    if len(got) != n:
        sys.exit(f"{path}: {len(got)} of {n} bytes before the end")


def send(path, n):
    data = pattern(n)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.settimeout(TIMEOUT)
    for off in range(0, n, 1024):
        s.sendto(data[off:off + 1024], path)
    print(f"bytes={n} sha256={hashlib.sha256(data).hexdigest()}")


PERIOD = 256 << 10  # pattern(n) repeats every 256 KiB
CYCLE = pattern(PERIOD) * 2


def at(off, n):
    """pattern's bytes off to off + n (n at most PERIOD)."""
    o = off % PERIOD
    return CYCLE[o:o + n]


def echo(path):
    import threading

    def serve(c):
        with c:
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                c.sendall(chunk)
            c.shutdown(socket.SHUT_WR)

    ls = listen_at(path, 64)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def recv_check(s, off, n, what):
    """Reads n bytes and checks them against the pattern at off."""
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            sys.exit(f"{what}: EOF after {off + len(got)} bytes, {n - len(got)} short")
        got += chunk
    if got != at(off, n):
        bad = next(i for i in range(n) if got[i] != at(off, n)[i])
        sys.exit(f"{what}: byte {off + bad} differs")


def touch(path):
    open(path, "w").close()


def stream(path, ready, stop):
    chunk = 16 << 10
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(TIMEOUT)
    s.connect(path)
    off = 0
    # Lock-step (a chunk out, the same back) keeps the echo's buffers
    # small; the short pause keeps the stream from taking a whole core of
    # a machine that hands over meanwhile.
    while not os.path.exists(stop):
        s.sendall(at(off, chunk))
        recv_check(s, off, chunk, path)
        off += chunk
        if off == PERIOD:
            touch(ready)
        time.sleep(0.001)
    s.sendall(at(off, chunk))
    s.shutdown(socket.SHUT_WR)
    recv_check(s, off, chunk, path)
    off += chunk
    if s.recv(1):
        sys.exit(f"{path}: more than the {off} bytes sent came back")
    print(f"bytes={off} checked, then EOF")


def churn(path, ready, stop):
    n = 0
    while True:
        last = os.path.exists(stop)
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(TIMEOUT)
        try:
            s.connect(path)
        except OSError as e:
            sys.exit(f"{path}: connection {n + 1}: {e}")
        data_off = n * 4096
        s.sendall(at(data_off, 4096))
        s.shutdown(socket.SHUT_WR)
        recv_check(s, data_off, 4096, f"{path}: connection {n + 1}")
        s.close()
        n += 1
        if n == 1:
            touch(ready)
        if last:
            break
        time.sleep(0.005)  # as in stream: a core left to the hand-over
    print(f"connections={n}, each checked")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "features":
        features(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] in ("collect", "send"):
        {"collect": collect, "send": send}[sys.argv[1]](sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "echo":
        echo(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] in ("stream", "churn"):
        {"stream": stream, "churn": churn}[sys.argv[1]](*sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        sys.exit(f"{' '.join(sys.argv[1:])}: {e}")
