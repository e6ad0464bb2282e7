#!/bin/bash
# Guest test of issue 36's crash recovery for `vmio vsock --fd-store`: a
# real Linux guest under QEMU keeps its vsock device while vmio is killed
# with SIGKILL again and again. No systemd here: vmio runs under
# tests/guest/fdstore-supervisor.py, which does systemd's part (the fd
# store over NOTIFY_SOCKET, with kcmp's duplicate suppression; the next
# start given the store through LISTEN_FDS, LISTEN_PID and
# LISTEN_FDNAMES; a restart 500 ms after a crash, as vmio-vsock@'s
# RestartSec=). The guest (crash-guest.sh, crash-guest.c) holds a stream
# to the host, round trips every 20 ms, and an idle connection from the
# host; tests/guest/crash-host.py is the host's end and kills vmio
# VMIO_CRASH_KILLS times (default 10).
#
# Checked, at each kill:
#   - before it, vmio's document (vmio stats --json): both connections
#     open, the session kept (fd_store.owed 0, writes > 0), and after the
#     first kill rsts_after_crash 2 (the RSTs its predecessor owed)
#   - both connections open at the kill end on the guest's side as by an
#     RST ("reset", or "eof+epipe": Linux reports an RST on an established
#     stream as the end of the stream and EPIPE on a write, with no
#     ECONNRESET; crash-guest.c)
#   - a new connection each way, the guest's stream answered and the
#     host's idle connection echoed, within 1 s of the supervisor's next
#     start of vmio; the host connects once the guest has closed its idle
#     socket (the new vmio numbers host ports from 1024 again, and a Linux
#     guest refuses a REQUEST whose ports are those of a socket it still
#     holds), and every CONNECT must get its OK line
# and over the run: the guest's stream answered right every time, the
# supervisor started vmio kills+1 times, each kill a SIGKILL, the store
# no larger after the last kill than after the first, vmio exits 0 on
# SIGTERM at the end; the guest's kernel log has no vsock or virtio line
# and none at warning level or worse; QEMU logs nothing about its
# vhost-user device (it never noticed).
# Reported: each kill's times, and the median and worst restart-to-new-
# connection time.
#
# usage: tests/guest/crash_test.sh [--platform NAME] [--image ROOT]
#          [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
#          [--crash-guest BIN]
# (defaults: 6.1, build/guest, build/vmio, build/tests/guest/...). Exit 0
# when everything passed; 1 with "crash_test: FAIL: ..." lines otherwise.
# Logs: ROOT/NAME/logs/crash_test.*.log.
set -euo pipefail

name=crash_test
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
# The boot, the kills (each about a second) and the end.
limit=${VMIO_GUEST_TIMEOUT:-360}
cguest=''
rest=()
while (($#)); do
	case $1 in
	--crash-guest) cguest=$2; shift 2 ;;
	*) rest+=("$1"); shift ;;
	esac
done
vh_setup "${rest[@]}"
cguest=${cguest:-$(dirname "$tool")/crash-guest}
[[ -x $cguest ]] || fail "$cguest is missing: build with 'ninja -C build'"
command -v python3 >/dev/null || fail "python3 is missing (the supervisor and the host's end)"
KILLS=${VMIO_CRASH_KILLS:-10}
ctl=$tmp/control.sock
sup_out=$logs/$name.supervisor.log
hlog=$logs/$name.host-5301.log

# --- the host's end, vmio under the supervisor, QEMU ----------------------
vh_spawn 5301 python3 "$top/tests/guest/crash-host.py" --uds "$uds" --g2h 5301 --idle 6301 \
	--stop 6302 --supervisor "$sup_out" --serial "$serial" --vmio "$vmio" --control "$ctl" \
	--kills "$KILLS" --timeout "$limit"
for _ in $(seq 100); do
	grep -q listening "$hlog" 2>/dev/null && break
	sleep 0.05
done
grep -q listening "$hlog" || fail "crash-host.py did not start: $(cat "$hlog")"
vh_start_supervised --fd-store --guest-cid 3 --socket "$sock" --uds-path "$uds" --control "$ctl"
vh_boot "$top/tests/guest/crash-guest.sh" --file "$cguest:/bin/crash-guest"

# --- verdicts -------------------------------------------------------------
vh_finish_guest
vh_expect_steps crash-guest dmesg
vh_wait_services
con_crash=$(grep '^CRASH-GUEST ' <<<"$con" || true)
[[ $con_crash == *"stream_ends=$KILLS idle_ends=$KILLS "*"result=ok"* ]] ||
	bad "the guest: ${con_crash:-no CRASH-GUEST line} (wanted stream_ends=$KILLS idle_ends=$KILLS)"
vh_stop_supervised "$KILLS"
# QEMU's log (run-guest.sh's own lines aside): nothing about the
# vhost-user device going away.
qemu_says=$(grep -v "^$name: " "${serial%.serial.log}.run-guest.log" 2>/dev/null |
	grep -iE 'vhost|vsock|disconnect' | head -n 3 || true)
[[ -z $qemu_says ]] || bad "QEMU logged: $qemu_says"

# --- report ---------------------------------------------------------------
echo "$name: $KILLS SIGKILLs of vmio vsock --fd-store (TCG guest, Linux $kernel_release, QEMU $qemu_major.$qemu_minor):"
sed -n '/^crash-host: listening$/d; s/^crash-host: /  /p' "$hlog"
echo "  the guest: ${con_crash#CRASH-GUEST }"
echo "  the store: $kept fds kept at each kill"
vh_conclude
