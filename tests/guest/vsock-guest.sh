# shellcheck shell=sh
# The guest half of tests/guest/vsock_test.sh (busybox sh, run as /test.sh).
# The host has started `vmio vsock --guest-cid 3` and its services on
# <uds-path>_PORT before QEMU; this script talks to them through the guest
# kernel's own virtio-vsock driver and checks what it can see from here.
# Every step prints "STEP name PASS|FAIL why" for the host script; the
# host also checks its own side (what arrived, byte for byte).
# Ports: 5001-5005 and 5010 host services, 5999 nothing listens, 6001,
# 6002 and 6010 ours.
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
need_vsock
check_ring vmw_vsock_virtio_transport
# The CID comes from the backend's config space (GET_CONFIG).
cid=$($T cid)
if [ "$cid" = 3 ]; then pass cid; else fail cid "local CID is '$cid', expected 3"; fi

# RST on no listener: nothing listens on <uds>_5999, so the backend must
# answer RST at once: connect() fails with ECONNRESET. A backend that never
# answers shows as ETIMEDOUT after the kernel's 2 s connect timeout.
out=$($T connect 2 5999 --timeout 10); rc=$?
echo "$out"
ms=$(field ms "$out")
if [ $rc -ne 3 ]; then fail rst "connect to port 5999 (no listener) exited $rc, expected 3 (refused)"
elif [ "$(field errno "$out")" != ECONNRESET ]; then fail rst "errno $(field errno "$out"), expected ECONNRESET"
elif [ "${ms:-9999}" -gt 1000 ]; then fail rst "RST took ${ms} ms (more than 1 s)"
else pass rst; fi

# Guest to host, 32 MiB: the host service on 5001 checks every byte.
out=$($T connect 2 5001 --mode source 32M --timeout 100); rc=$?
echo "G2H $out"
if [ $rc -eq 0 ] && echo "$out" | grep -q 'result=ok'; then pass g2h; else fail g2h "exit $rc"; fi

# Half-close: the guest shuts down its write side after 4096 bytes; the
# host reads to EOF and only then replies; the guest reads the reply.
out=$($T connect 2 5002 --mode source 4096 --timeout 20); rc=$?
echo "HALF $out"
check_reply half-close $rc "$out" 4096

# 64 concurrent connections, all open before data flows; the host echoes
# and each connection checks that what came back is what it sent.
out=$($T connect 2 5004 --count 64 --mode source 128K --echo-check --timeout 100); rc=$?
echo "CONC $out"
if [ $rc -eq 0 ] && echo "$out" | grep -q 'summary conns=64 ok=64'; then pass concurrent64
else fail concurrent64 "exit $rc"; fi

# A slow host reader (5003 reads 16 KiB every 20 ms) must stall only its
# own connection: a fast 8 MiB stream to 5005 started after it finishes
# while the slow one is still going.
$T connect 2 5003 --mode source 2M --timeout 100 >/tmp/slow.out 2>&1 &
slow=$!
usleep 300000
out=$($T connect 2 5005 --mode source 8M --timeout 100); rc=$?
echo "FAST $out"
if kill -0 $slow 2>/dev/null; then still=1; else still=0; fi
wait $slow; src=$?
echo "SLOW $(cat /tmp/slow.out)"
if [ $rc -ne 0 ]; then fail slow-reader "the fast stream beside the slow one failed (exit $rc)"
elif [ $src -ne 0 ]; then fail slow-reader "the slow stream failed (exit $src)"
elif [ $still -ne 1 ]; then fail slow-reader "the slow stream ended before the fast one: the host reader was not slow?"
else pass slow-reader; fi

# Seqpacket, guest to host: every message size comes back whole from the
# host's echo on 5010, and one byte over the limit is refused by the guest
# kernel (EMSGSIZE; Linux 6.1 reports it as ENOMEM).
out=$($T seq-connect 2 5010 --timeout 60); rc=$?
echo "SEQG2H $out"
if [ $rc -eq 0 ] && echo "$out" | grep -Eq 'refused=(EMSGSIZE|ENOMEM) result=ok'; then pass seq-g2h
else fail seq-g2h "exit $rc"; fi

# Host to guest: our services, then a marker the host script waits for in
# the serial log before it connects to them through the backend's uds-path.
$T listen 6001 --count 1 --expect 32M --timeout 100 >/tmp/h2g.out 2>&1 &
h2g=$!
$T listen 6002 --count 1 --mode echo --timeout 100 >/tmp/echo.out 2>&1 &
echo_pid=$!
$T seq-listen 6010 --timeout 100 >/tmp/seq.out 2>&1 &
seq_pid=$!
wait_listening /tmp/h2g.out /tmp/echo.out /tmp/seq.out
echo "VSOCK-H2G-READY"
wait $h2g; rc=$?
echo "H2G $(grep -v listening /tmp/h2g.out)"
if [ $rc -eq 0 ]; then pass h2g; else fail h2g "exit $rc"; fi
wait $echo_pid; rc=$?
echo "ECHO $(grep -v listening /tmp/echo.out)"
if [ $rc -eq 0 ]; then pass h2g-echo; else fail h2g-echo "exit $rc"; fi
wait $seq_pid; rc=$?
echo "SEQH2G $(grep -v listening /tmp/seq.out)"
if [ $rc -eq 0 ]; then pass seq-h2g; else fail seq-h2g "exit $rc"; fi

echo "vsock guest: $fails failed"
exit $fails
