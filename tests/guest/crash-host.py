#!/usr/bin/env python3
"""The host's end of guest_crash (tests/guest/crash_test.sh): the echo
service the guest's stream connects to (<uds>_G2H), the host's idle
connections into the guest (CONNECT IDLE through <uds>), and the kills.

usage: crash-host.py --uds PATH --g2h PORT --idle PORT --stop PORT
                     --supervisor FILE --serial FILE --vmio BIN
                     --control PATH --kills N [--limit-ms MS] [--timeout S]

Started before the guest boots. Once the guest's stream is answered and
the first idle connection open, N times: until vmio's document (vmio stats
--json on --control) says both connections are open, the session is kept
in the store (fd_store.owed 0, writes > 0) and, after a kill, that it sent
the two RSTs its predecessor owed (rsts_after_crash 2); then SIGKILL to
the vmio the supervisor (fdstore-supervisor.py, its output in FILE) says
is ready, and from the supervisor's next start (its monotonic_ns, the
clock of this process): a new idle connection opened from here, its
bytes echoed (h2g), and the guest's new stream connection answered
(g2h), each timed; and on the guest's console (--serial) the end of both
connections of the kill, as a reset ("reset", or "eof+epipe": how Linux
shows an RST on an established stream, see crash-guest.c). Then the stop
connection. One line per kill, then
  crash-host: kills=N restart_to_new_ms median=X worst=Y result=ok|fail
and exit 0 if every kill passed within --limit-ms (default 1000).
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

BOUND = 10.0  # seconds any one step may take


def now_ns():
    return time.monotonic_ns()


class Echo(threading.Thread):
    """Accepts the guest's stream connections and echoes them; notes the
    time of each one's first bytes."""

    def __init__(self, path):
        super().__init__(daemon=True)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.lis = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lis.bind(path)
        self.lis.listen(16)
        self.first = []  # first bytes of connection i, monotonic ns
        self.lock = threading.Lock()

    def run(self):
        while True:
            c, _ = self.lis.accept()
            with self.lock:
                i = len(self.first)
                self.first.append(None)
            threading.Thread(target=self.serve, args=(c, i), daemon=True).start()

    def serve(self, c, i):
        with c:
            while True:
                try:
                    b = c.recv(4096)
                except OSError:
                    return
                if not b:
                    return
                with self.lock:
                    if self.first[i] is None:
                        self.first[i] = now_ns()
                try:
                    c.sendall(b)
                except OSError:
                    return

    def first_of(self, i):
        with self.lock:
            return self.first[i] if i < len(self.first) else None


refused = [0]  # CONNECTs answered without an OK line (the guest refused)


def hybrid_connect(uds, port, deadline):
    """CONNECT port through the hybrid socket, tried again until deadline;
    returns the socket once its OK line came, or None."""
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            s.connect(uds)
            s.sendall(f"CONNECT {port}\n".encode())
            line = b""
            while not line.endswith(b"\n"):
                b = s.recv(1)
                if not b:
                    break
                line += b
            if line.startswith(b"OK "):
                return s
            if line or not b:
                refused[0] += 1
        except OSError:
            pass
        s.close()
        time.sleep(0.01)
    return None


def open_idle(uds, port, deadline):
    """A new idle connection, its 4 bytes echoed once. (socket, ns)"""
    while time.monotonic() < deadline:
        s = hybrid_connect(uds, port, deadline)
        if s is None:
            return None, None
        try:
            s.sendall(b"idle")
            got = b""
            while len(got) < 4:
                b = s.recv(4 - len(got))
                if not b:
                    break
                got += b
            if got == b"idle":
                return s, now_ns()
        except OSError:
            pass
        s.close()
    return None, None


def lines_of(path, prefix):
    """The console's whole lines that start with prefix: QEMU may be
    writing the last one while we read, and half a line is not one."""
    try:
        with open(path, errors="replace") as f:
            return [l.strip().replace("\r", "") for l in f
                    if l.endswith("\n") and l.lstrip("\r").startswith(prefix)]
    except FileNotFoundError:
        return []


def wait_for(cond, seconds=BOUND, step=0.02):
    end = time.monotonic() + seconds
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(step)


def main():
    ap = argparse.ArgumentParser()
    for o in ("uds", "supervisor", "serial", "vmio", "control"):
        ap.add_argument("--" + o, required=True)
    for o in ("g2h", "idle", "stop", "kills"):
        ap.add_argument("--" + o, type=int, required=True)
    ap.add_argument("--limit-ms", type=float, default=1000)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    echo = Echo(f"{a.uds}_{a.g2h}")
    echo.start()
    print("crash-host: listening")
    fails = []

    def vm():
        try:
            out = subprocess.run([a.vmio, "stats", "--json", a.control],
                                 capture_output=True, timeout=5).stdout
            return json.loads(out)["vms"][0]
        except (subprocess.SubprocessError, ValueError, KeyError, IndexError):
            return None

    def settled(rsts):
        v = vm()
        return v if (v and v["connections_open"] == 2 and v["rsts_after_crash"] == rsts
                     and v["fd_store"]["owed"] == 0 and v["fd_store"]["writes"] > 0) else None

    def ends_of(k):
        """The guest's lines for the two ends of kill k, once both are there."""
        e = [l for l in lines_of(a.serial, "CRASH ")
             if re.match(rf"CRASH (stream|idle)-end n={k} ", l)]
        return e if len(e) == 2 else None

    def sup(kind):
        """(pid, n, ns) of the supervisor's lines of that kind."""
        out = []
        for l in lines_of(a.supervisor, f"supervisor: {kind} "):
            m = dict(re.findall(r"(\w+)=(\S+)", l))
            out.append((int(m["pid"]), int(m.get("n", 0)), int(m["monotonic_ns"])))
        return out

    # The guest's first stream, then the first idle connection.
    if not wait_for(lambda: echo.first_of(0), a.timeout, 0.1):
        print("crash-host: the guest's stream never came")
        return 1
    idle, _ = open_idle(a.uds, a.idle, time.monotonic() + BOUND)
    if idle is None:
        print("crash-host: no idle connection into the guest")
        return 1
    times = []
    for k in range(1, a.kills + 1):
        want = 0 if k == 1 else 2
        if not wait_for(lambda: settled(want)):
            fails.append(f"kill {k}: vmio not settled before it: {vm()}")
            break
        pid = sup("started")[-1][0]
        if not wait_for(lambda: [r for r in sup("ready") if r[0] == pid]):
            fails.append(f"kill {k}: vmio {pid} never said READY=1")
            break
        starts = len(sup("started"))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            fails.append(f"kill {k}: vmio {pid} had exited before it")
            break
        kill_ns = now_ns()
        st = wait_for(lambda: sup("started")[starts:])
        if not st:
            fails.append(f"kill {k}: the supervisor started no vmio within {BOUND:.0f} s")
            break
        start_ns = st[0][2]
        # The guest's program must have closed its idle socket, ended by
        # the RST, before the host connects to that port again: the new
        # vmio numbers host ports from 1024 again, so the new connection
        # may have the old one's ports, and a Linux guest answers a
        # REQUEST for a socket it still holds with an RST.
        ends = wait_for(lambda: ends_of(k))
        old_idle = idle
        idle, h2g_ns = open_idle(a.uds, a.idle, time.monotonic() + BOUND)
        old_idle.close()  # closed with vmio already: the host's end
        g2h_ns = wait_for(lambda: echo.first_of(k))
        if idle is None or g2h_ns is None:
            fails.append(f"kill {k}: no new connection {'h2g' if idle is None else 'g2h'} "
                         f"within {BOUND:.0f} s of the restart")
            break
        t_h, t_g = (h2g_ns - start_ns) / 1e6, (g2h_ns - start_ns) / 1e6
        times.append(max(t_h, t_g))
        how = " ".join(re.sub(r"^CRASH (\w+)-end n=\d+ how=", r"\1=", l) for l in (ends or []))
        print(f"crash-host: kill {k}: pid {pid}, restarted {(start_ns - kill_ns) / 1e6:.0f} ms "
              f"after the kill; new connections g2h {t_g:.1f} ms, h2g {t_h:.1f} ms after; "
              f"the guest's ends: {how or 'none'}")
        if not ends:
            fails.append(f"kill {k}: the guest did not see both connections end within "
                         f"{BOUND:.0f} s: {lines_of(a.serial, 'CRASH ')[-4:]}")
        elif any(not re.search(r"how=(reset|eof\+epipe)$", l) for l in ends):
            fails.append(f"kill {k}: not ended as by a reset: {ends}")
        if max(t_h, t_g) > a.limit_ms:
            fails.append(f"kill {k}: a new connection {max(t_h, t_g):.1f} ms after the restart")
    if not fails and not wait_for(lambda: settled(2)):
        fails.append(f"after the last kill: vmio not settled: {vm()}")
    stop = hybrid_connect(a.uds, a.stop, time.monotonic() + BOUND)
    if stop is None:
        fails.append("no stop connection")
    else:
        stop.close()
    for f in fails:
        print(f"crash-host: FAIL: {f}")
    if refused[0]:
        fails.append(f"{refused[0]} CONNECTs into the guest refused")
    if times:
        print(f"crash-host: kills={len(times)} restart_to_new_ms median={statistics.median(times):.1f} "
              f"worst={max(times):.1f} refused={refused[0]} result={'fail' if fails else 'ok'}")
    return 1 if fails or len(times) != a.kills else 0


if __name__ == "__main__":
    sys.exit(main())
