#!/usr/bin/env python3
"""systemd's part in a crash of `vmio vsock --fd-store` or `vmio net
--fd-store`, for the guest tests (no systemd there): a notify socket
whose FDSTORE=1 datagrams keep their fds under their FDNAME=, dropping
an fd that is the same open file as one kept already (kcmp KCMP_FILE,
as systemd's "Suppressing duplicate fd"), FDSTOREREMOVE=1 letting a name
go; READY=1 noted. The command is
started with NOTIFY_SOCKET set and, when the store holds anything, the
kept fds at 3 and up named by LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES;
when it dies of a signal or exits nonzero it is started again, after
what it sent before it died was read (as systemd does before it handles
a child's exit), --restart-sec later (Restart=on-failure,
RestartSec=). Exit 0 or 2 ends the supervisor with that status; SIGTERM
is passed on to the command, whose exit then ends it.

usage: fdstore-supervisor.py --notify PATH [--restart-sec S] [--log FILE]
                             -- COMMAND [ARGS...]

One line each on stdout, with CLOCK_MONOTONIC nanoseconds (the clock of
time.monotonic_ns()):
  supervisor: started pid=N n=K fds=F monotonic_ns=T   (K: starts so far)
  supervisor: ready pid=N monotonic_ns=T
  supervisor: died pid=N status=S cpu_s=X kept=F names=a,b,... monotonic_ns=T
    (S: the exit status, or minus the signal; X: its CPU seconds)
  supervisor: exit status=S
The command's own output goes to --log (default: the supervisor's
stderr).
"""
import argparse
import ctypes
import fcntl
import os
import select
import signal
import socket
import sys
import time

SYS_KCMP = 312  # x86_64
KCMP_FILE = 0
MAX_FDS = 253   # SCM_MAX_FD

libc = ctypes.CDLL(None, use_errno=True)


def say(text):
    print(f"supervisor: {text} monotonic_ns={time.monotonic_ns()}", flush=True)


def same_file(a, b):
    pid = os.getpid()
    return libc.syscall(SYS_KCMP, pid, pid, KCMP_FILE, a, b) == 0


class Store:
    def __init__(self):
        self.kept = []  # (fd, name), in the order kept

    def keep(self, fd, name):
        for k, _ in self.kept:
            if same_file(k, fd):
                os.close(fd)
                return
        self.kept.append((fd, name))

    def remove(self, name):
        for fd, n in [k for k in self.kept if k[1] == name]:
            os.close(fd)
            self.kept.remove((fd, n))


def drain(sock, store, state):
    """Reads every datagram queued on the notify socket."""
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 4096, MAX_FDS,
                                             socket.MSG_CMSG_CLOEXEC)
        except BlockingIOError:
            return
        put = remove = False
        name = "stored"
        for line in msg.decode(errors="replace").split("\n"):
            if line == "FDSTORE=1":
                put = True
            elif line == "FDSTOREREMOVE=1":
                remove = True
            elif line == "READY=1":
                state["ready"] = True
            elif line.startswith("FDNAME="):
                name = line[7:]
        if remove:
            store.remove(name)
        for fd in fds:
            if put:
                store.keep(fd, name)
            else:
                os.close(fd)


def spawn(argv, notify, store, log_fd):
    n = len(store.kept)
    pid = os.fork()
    if pid == 0:
        try:
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if log_fd >= 0:  # before 3 and up are taken for the store's
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 3 + n + 64)
                    for fd, _ in store.kept]
            for i, h in enumerate(high):
                os.dup2(h, 3 + i)
                os.close(h)
            env = dict(os.environ)
            env["NOTIFY_SOCKET"] = notify
            for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
                env.pop(k, None)
            if n:
                env["LISTEN_PID"] = str(os.getpid())
                env["LISTEN_FDS"] = str(n)
                env["LISTEN_FDNAMES"] = ":".join(name for _, name in store.kept)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.execvpe(argv[0], argv, env)
        except BaseException as e:  # noqa: BLE001: the child's end
            print(f"supervisor: cannot start {argv[0]}: {e}", file=sys.stderr)
        os._exit(127)
    return pid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notify", required=True)
    ap.add_argument("--restart-sec", type=float, default=0.5)
    ap.add_argument("--log")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not argv:
        ap.error("no command")
    log_fd = os.open(a.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                     0o644) if a.log else -1
    try:
        os.unlink(a.notify)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK
                         | socket.SOCK_CLOEXEC)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(a.notify)
    store = Store()
    stop_r, stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(stop_w)
    terminated = []
    signal.signal(signal.SIGTERM, lambda *_: terminated.append(1))
    signal.signal(signal.SIGINT, lambda *_: terminated.append(1))
    starts = 0
    while True:
        state = {"ready": False}
        pid = spawn(argv, a.notify, store, log_fd)
        starts += 1
        say(f"started pid={pid} n={starts} fds={len(store.kept)}")
        pidfd = os.pidfd_open(pid)
        sent_term = False
        while True:
            if terminated and not sent_term:
                os.kill(pid, signal.SIGTERM)
                sent_term = True
            r, _, _ = select.select([sock, pidfd, stop_r], [], [])
            if stop_r in r:
                try:
                    os.read(stop_r, 64)
                except BlockingIOError:
                    pass
            if sock in r:
                was = state["ready"]
                drain(sock, store, state)
                if state["ready"] and not was:
                    say(f"ready pid={pid}")
            if pidfd in r:
                break
        # What it said before it died comes first.
        drain(sock, store, state)
        _, status, ru = os.wait4(pid, 0)
        os.close(pidfd)
        code = os.waitstatus_to_exitcode(status)
        say(f"died pid={pid} status={code} cpu_s={ru.ru_utime + ru.ru_stime:.3f} "
            f"kept={len(store.kept)} names={','.join(n for _, n in store.kept)}")
        if terminated or code in (0, 2):
            print(f"supervisor: exit status={code}", flush=True)
            return 0 if code == -signal.SIGTERM else (code if code >= 0 else 1)
        time.sleep(a.restart_sec)


if __name__ == "__main__":
    sys.exit(main())
