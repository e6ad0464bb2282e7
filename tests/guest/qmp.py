#!/usr/bin/env python3
"""A tiny QMP client for the guest tests (net_migrate_test.sh).

usage: qmp.py SOCK COMMAND [ARGUMENTS-JSON]
         one command; prints its "return" as JSON on one line, exit 0, or
         its "error" on stderr, exit 1
       qmp.py SOCK migrate URI TIMEOUT
         live migration: migrate-set-parameters (a bandwidth a localhost
         link can take, QEMU's default downtime limit), migrate URI, then
         query-migrate every 50 ms until the status is completed, failed
         or cancelled, or TIMEOUT seconds passed. Prints
           "migrate start_ms=T" (host wall clock, ms) at the command,
           "migrate end_ms=T status=S" when the status changed to an end,
         and the last query-migrate's return as JSON on one line. Exit 0
         only for "completed".
       qmp.py compare FILE1 FILE2 [DIFF]
         two pmemsave dumps, page (4 KiB) by page: exit 0 if the same,
         else 1 with the count and the first guest-physical addresses
         that differ; DIFF, if given, gets for each page that differs a
         line "page ADDR bytes N first OFF last OFF" and the runs of
         bytes that differ (hex, FILE1's then FILE2's), to tell a frame's
         payload from the guest kernel's own data
Every wait is bounded (10 s to connect and for each answer).
"""
import json
import socket
import sys
import time


class Qmp:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.s.connect(path)
                break
            except OSError:
                # QEMU creates the socket as it starts.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.f = self.s.makefile("r")
        self.read()  # the greeting
        self.cmd("qmp_capabilities")

    def read(self):
        line = self.f.readline()
        if not line:
            raise EOFError("QMP closed")
        return json.loads(line)

    def cmd(self, name, args=None):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.s.sendall((json.dumps(msg) + "\n").encode())
        while True:
            r = self.read()
            if "event" in r:  # asynchronous: not the answer
                continue
            if "error" in r:
                raise RuntimeError(f"{name}: {r['error']}")
            return r["return"]


def describe(out, addr, pa, pb):
    offs = [i for i in range(min(len(pa), len(pb))) if pa[i] != pb[i]]
    if not offs:
        out.write(f"page {addr:#x} lengths {len(pa)} {len(pb)}\n")
        return
    out.write(f"page {addr:#x} bytes {len(offs)} first {offs[0]} last {offs[-1]}\n")
    start = prev = offs[0]
    for i in offs[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        end = min(prev + 1, start + 64)
        out.write(f"  +{start} {pa[start:end].hex()} {pb[start:end].hex()}\n")
        if i is not None:
            start = prev = i


def compare(a, b, diff=None):
    differ = []
    out = open(diff, "w") if diff else None
    with open(a, "rb") as fa, open(b, "rb") as fb:
        addr = 0
        while True:
            pa, pb = fa.read(4096), fb.read(4096)
            if not pa and not pb:
                break
            if pa != pb:
                differ.append(addr)
                if out:
                    describe(out, addr, pa, pb)
            addr += 4096
    if out:
        out.close()
    if not differ:
        print(f"{addr // 4096} pages the same")
        return 0
    print(f"{len(differ)} of {addr // 4096} pages differ, from "
          + " ".join(hex(x) for x in differ[:8]))
    return 1


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    if argv[1] == "compare":
        return compare(argv[2], argv[3], argv[4] if len(argv) > 4 else None)
    q = Qmp(argv[1])
    if argv[2] != "migrate":
        args = json.loads(argv[3]) if len(argv) > 3 else None
        try:
            print(json.dumps(q.cmd(argv[2], args)))
        except (RuntimeError, EOFError) as e:
            print(f"qmp: {e}", file=sys.stderr)
            return 1
        return 0
    uri, limit = argv[3], float(argv[4])
    # 7.2's default bandwidth is 128 MiB/s, fine for 256 MiB of guest
    # memory; said here so that QEMU 10 and 7.2 run the same migration.
    q.cmd("migrate-set-parameters", {"max-bandwidth": 256 << 20, "downtime-limit": 300})
    print(f"migrate start_ms={int(time.time() * 1000)}", flush=True)
    q.cmd("migrate", {"uri": uri})
    deadline = time.monotonic() + limit
    info = {}
    while time.monotonic() < deadline:
        info = q.cmd("query-migrate")
        if info.get("status") in ("completed", "failed", "cancelled"):
            break
        time.sleep(0.05)
    print(f"migrate end_ms={int(time.time() * 1000)} status={info.get('status', 'none')}", flush=True)
    print(json.dumps(info), flush=True)
    return 0 if info.get("status") == "completed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
