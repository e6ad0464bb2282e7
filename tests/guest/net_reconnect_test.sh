#!/bin/bash
# Guest test of restarting `vmio net` under a running guest: QEMU's chardev
# has reconnect=1 (QEMU 9.2 and later: reconnect-ms=1000), so QEMU dials
# the socket again once vmio is gone, and
# brings the vhost-user device up again on whichever backend answers.
#   - the peer's namespace holds a persistent TAP, vmtap0 (ip tuntap add:
#     it outlives vmio, with its address), 10.0.88.1/24, and a sink on 7001
#     that checks 64 MiB of the pattern byte for byte;
#   - `vmio net --tap vmtap0` serves the guest's virtio-net-pci;
#   - the guest (net-reconnect-guest.sh, 10.0.88.2) sends the 64 MiB;
#   - once the sink's socket has received 4 MiB (ss's bytes_received), the
#     test kills vmio with SIGKILL: no clean-up, its socket file is left
#     behind, its rings as they were; then starts it again on the same
#     --socket path (and the same TAP);
#   - QEMU reconnects, the guest's TCP retransmits what was lost, and the
#     transfer completes: the sink's checksum and the guest's sender's
#     both equal the pattern's; a ping after it passes; the second vmio
#     carried frames and dropped none (its --stats line).
# Failures say which stage: the kill came too late (the transfer was
# done), the new vmio did not listen on the stale path, QEMU did not come
# back, or the transfer did not complete or completed wrong.
#
# usage: tests/guest/net_reconnect_test.sh [--platform NAME] [--image ROOT] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# Needs root (a network namespace and a TAP). Exit 0 when every check
# passed; 1 with "net_reconnect_test: FAIL: ..." lines otherwise. Logs:
# ROOT/NAME/logs/net_reconnect_test.*.log (serial console, both vmio runs, the
# sink).
set -euo pipefail

name=net_reconnect_test
dev=net
total=64M
kill_at=$((4 << 20))
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
((EUID == 0)) || fail "needs root: it creates a network namespace and a TAP interface"
command -v ip >/dev/null || fail "'ip' is missing (package iproute2)"
command -v ss >/dev/null || fail "'ss' is missing (package iproute2)"
command -v busybox >/dev/null || fail "'busybox' is missing (package busybox-static)"
vh_setup "$@"

ns=vmio-$name-$$
# shellcheck disable=SC2317 # called from vh_cleanup
vh_cleanup_hook() { ip netns del "$ns" 2>/dev/null || true; }
ip netns add "$ns" || fail "cannot create network namespace $ns"
ip -n "$ns" link set lo up
vmio_wrap=(ip netns exec "$ns")
nsx() { ip netns exec "$ns" "$@"; }

# A TAP that vmio creates goes away with it, its address and routes too;
# a persistent one stays, and the restarted vmio attaches to it.
{ nsx ip tuntap add dev vmtap0 mode tap multi_queue vnet_hdr &&
	nsx ip addr add 10.0.88.1/24 dev vmtap0 && nsx ip link set vmtap0 up; } ||
	fail "cannot create the persistent TAP vmtap0 in $ns"

vh_spawn 7001 nsx "$tool" tcp-listen 7001 --timeout "$limit" --count 1 --expect "$total"
vh_start_vmio --socket "$sock" --tap vmtap0 --stats
vlog1=$vlog
# After a disconnect QEMU dials again every second: reconnect=1 (seconds)
# up to QEMU 9.1; QEMU 9.2 deprecated it for reconnect-ms=1000, which 10.0
# takes (and warns about the old one). vectors=0: see net_test.sh (QEMU
# 7.2 under TCG and MSI-X).
if ((qemu_major > 9 || (qemu_major == 9 && qemu_minor >= 2))); then
	reconnect="reconnect-ms=1000"
else
	reconnect="reconnect=1"
fi
# shellcheck disable=SC2054 # QEMU's commas
dev_qemu=(-chardev "socket,id=c,path=$sock,$reconnect" -netdev "vhost-user,chardev=c,id=n"
	-device "virtio-net-pci,netdev=n,mac=52:54:00:00:88:02,vectors=0")
vh_boot "$top/tests/guest/net-reconnect-guest.sh"

# What the sink's connection has received so far (0 before it exists).
sink_bytes() {
	local n
	n=$(nsx ss -tinH state established '( sport = :7001 )' 2>/dev/null |
		sed -n 's/.*bytes_received:\([0-9]*\).*/\1/p' | head -n1)
	echo "${n:-0}"
}
# Waits until vmio's log FILE has a line matching RE, while vmio runs.
wait_log() { # file, regex, seconds
	for _ in $(seq $(($3 * 20))); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$vpid" 2>/dev/null || break
		sleep 0.05
	done
	grep -q "$2" "$1" 2>/dev/null
}

at_kill=
down_ms=
restarted=
if ! vh_wait_marker RECONNECT-G2H-START; then
	bad "the guest never printed RECONNECT-G2H-START (serial log: $serial)"
else
	got=0
	for _ in $(seq $((limit * 20))); do
		got=$(sink_bytes)
		((got >= kill_at)) && break
		kill -0 "$gpid" 2>/dev/null || break
		sleep 0.05
	done
	if ((got < kill_at)); then
		bad "the sink never received $kill_at bytes (it has $got)"
	else
		t0=$(date +%s%N)
		kill -KILL "$vpid"
		wait "$vpid" 2>/dev/null || true
		vpid=
		at_kill=$(sink_bytes)
		# The kill must land inside the transfer, or this tests nothing.
		((at_kill < (64 << 20))) || bad "vmio was killed after the sink had all $at_kill bytes: nothing was in flight"
		[[ -S $sock ]] || bad "the killed vmio's socket file $sock is gone (expected it left behind)"
		vlog=$logs/$name.vmio2.log
		vh_start_vmio --socket "$sock" --tap vmtap0 --stats
		if ! wait_log "$vlog" 'listening on' 5; then
			bad "the restarted vmio net did not listen on the stale $sock: $(tail -n 3 "$vlog")"
		else
			# A frame for the guest waits in the TAP before QEMU is
			# back (QEMU dials once a second): the new vmio hands it
			# over the moment the rx queue starts, when its call fd
			# is still the one QEMU discards what arrives on.
			nsx busybox ping -c 1 -W 1 10.0.88.2 >/dev/null 2>&1 &
			if ! wait_log "$vlog" 'front end connected' 30; then
				bad "QEMU did not reconnect to the restarted vmio within 30 s ($reconnect)"
			else
				restarted=1
				down_ms=$((($(date +%s%N) - t0) / 1000000))
			fi
			wait $! || true
		fi
	fi
fi

# The transfer must go on soon after QEMU is back: the guest's TCP resends
# at its next timeout (backed off over the outage, a few seconds at most).
# Minutes of backed-off timeouts would mean a queue that stalled (a
# notification lost across the restart) and TCP papering over it.
resume_ms=
if [[ -n $restarted ]]; then
	t1=$(date +%s%N)
	for _ in $(seq 300); do
		(($(sink_bytes) > at_kill)) && break
		kill -0 "$gpid" 2>/dev/null || break
		sleep 0.05
	done
	if (($(sink_bytes) > at_kill)); then
		resume_ms=$((($(date +%s%N) - t1) / 1000000))
	elif ! grep -q '^G2H .*result=ok' "$serial" 2>/dev/null; then
		bad "the transfer did not resume within 15 s of QEMU reconnecting (the sink still has $(sink_bytes) bytes)"
	fi
fi

# --- verdicts -------------------------------------------------------------
vh_finish_guest
vh_expect_steps ping tcp-g2h ping-after
vh_wait_services

fnv=$("$tool" fnv "$total")
sink=$(hl 7001)
[[ $(field recv_fnv "$sink") == "$fnv" && $(field pattern "$sink") == ok ]] ||
	bad "tcp-g2h: the sink got '$(field recvd "$sink")' bytes with checksum '$(field recv_fnv "$sink")', not the pattern's $((64 << 20)) with $fnv"
g2h=$(grep '^G2H ' <<<"$con" || true)
[[ $(field sent_fnv "$g2h") == "$fnv" ]] || bad "tcp-g2h: the guest's sender's checksum '$(field sent_fnv "$g2h")' is not the pattern's $fnv"

# The restarted vmio's counters (--stats, on SIGTERM): it carried the rest.
stats=
[[ -z $restarted ]] || vh_stop_vmio_stats "tx_frames rx_frames" "tx_dropped tx_bad_chain rx_errors"

# --- report ---------------------------------------------------------------
step() { grep -q "^STEP $1 PASS" <<<"$con" && echo PASS || echo FAIL; }
echo "$name: results (backend tap, QEMU $qemu_major.$qemu_minor $reconnect; TCG guest):"
printf '  %-18s %s\n' ping "$(step ping)"
# Times from the host's clock (the sink's, this script's): a TCG guest's
# clock can run several times too fast.
printf '  %-18s %s  %s ms at the sink, vmio killed at %s bytes, QEMU back %s ms later\n' \
	"tcp-g2h $total" "$(step tcp-g2h)" "$(field ms "$sink")" "${at_kill:-?}" "${down_ms:-?}"
printf '  %-18s %s ms after QEMU was back\n' "resumed" "${resume_ms:-?}"
printf '  %-18s %s\n' ping-after "$(step ping-after)"
echo "  restarted vmio net stats: ${stats:-none}"
echo "  first vmio's log: $vlog1"
vh_conclude
