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


def collect(path, n):
    if os.path.exists(path):
        os.unlink(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(path)
    ls.listen(1)
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


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "features":
        features(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] in ("collect", "send"):
        {"collect": collect, "send": send}[sys.argv[1]](sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        sys.exit(f"{' '.join(sys.argv[1:])}: {e}")
