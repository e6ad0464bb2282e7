#!/bin/bash
# Guest test of `vmio net`: boots the Debian kernel + busybox guest
# (scripts/guest/) with QEMU's virtio-net-pci on `-netdev vhost-user`,
# served by `vmio net --tap vmtap0 --stats` running inside a network
# namespace of its own (vmio creates the TAP there; 10.0.88.1/24 on it, the
# guest 10.0.88.2/24), and runs, between the guest kernel's virtio_net
# driver and the namespace (tests/guest/vsock-tool's tcp modes, both ends):
#   queues     the guest sees as many queue pairs as asked for
#   ping-g2h   busybox ping from the guest to 10.0.88.1
#   ping-h2g   ping from the namespace to the guest
#   tcp-g2h    guest -> namespace, 16 MiB, checked byte for byte there
#   tcp-echo   guest -> namespace echo -> guest, 4 connections of 4 MiB,
#              each checked in the guest
#   tcp-h2g    namespace -> guest, 16 MiB, checked byte for byte in the guest
#   stats      vmio's --stats line on exit: frames both ways, no drop
# With --queues 2: the same over two queue pairs (QEMU queues=2, mq=on),
# and frames must have crossed each pair's queues both ways (the guest
# driver's per-queue counters, read with vsock-tool nic-stats).
#
# usage: tests/guest/net_test.sh [--queues N] [--image DIR] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# Needs root (network namespace, TAP). Exit 0 when every scenario passed;
# 1 with "net_test: FAIL: ..." lines otherwise. Logs:
# DIR/logs/net_test[_mqN].*.log (serial console, vmio -v and its stats,
# namespace peers). The set-up and verdicts shared with the vsock tests:
# vsock-host.sh.
set -euo pipefail

queues=1
args=()
while (($#)); do
	case $1 in
	--queues) queues=$2; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
name=net_test
((queues == 1)) || name=net_test_mq$queues
dev=net
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
((EUID == 0)) || fail "needs root: it creates a network namespace and a TAP interface"
command -v ip >/dev/null || fail "'ip' is missing (package iproute2)"
command -v busybox >/dev/null || fail "'busybox' is missing (package busybox-static)"
vh_setup "${args[@]}"

ns=vmio-$name-$$
# shellcheck disable=SC2317 # called from vh_cleanup
vh_cleanup_hook() { ip netns del "$ns" 2>/dev/null || true; }
ip netns add "$ns" || fail "cannot create network namespace $ns"
ip -n "$ns" link set lo up
vmio_wrap=(ip netns exec "$ns")
nsx() { ip netns exec "$ns" "$@"; }

# --- namespace services, then the backend and the TAP, then QEMU ----------
ns_service() { # port, vsock-tool options...
	vh_spawn "$1" nsx "$tool" tcp-listen "$1" --timeout "$limit" "${@:2}"
}
ns_service 7001 --count 1 --expect 16M # tcp-g2h: every byte checked
ns_service 7002 --count 4 --mode echo  # tcp-echo
vh_start_vmio --socket "$sock" --tap vmtap0 --queues "$queues" --stats
{ nsx ip addr add 10.0.88.1/24 dev vmtap0 && nsx ip link set vmtap0 up; } ||
	fail "cannot configure vmtap0 in $ns: $(nsx ip link 2>&1)"
mq=
((queues == 1)) || mq=",queues=$queues"
# vectors=0: INTx, no MSI-X. QEMU 7.2 under TCG crashes (SIGSEGV in
# virtio-pci's vector unmask, which takes the KVM irqfd path with no irqfd
# table) when a vhost-user virtio-net driver turns on MSI-X; with KVM,
# MSI-X works and mq=on,vectors=2N+2 is the usual line.
# shellcheck disable=SC2054 # QEMU's commas
dev_qemu=(-chardev "socket,id=c,path=$sock" -netdev "vhost-user,chardev=c,id=n$mq"
	-device "virtio-net-pci,netdev=n,mac=52:54:00:00:88:02,vectors=0${mq:+,mq=on}")
# One vCPU a pair: Linux's virtio_net enables min(pairs, CPUs) pairs.
vh_boot "$top/tests/guest/net-guest.sh" --cpus "$queues" --append "NT_QUEUES=$queues"

# --- namespace to guest, once the guest's sink listens --------------------
ping_h2g=FAIL
if vh_wait_marker NET-H2G-READY; then
	# busybox's ping, as in the guest: the host may have no iputils.
	if out=$(nsx busybox ping -c 3 -W 5 10.0.88.2 2>&1); then
		ping_h2g=PASS
	else
		bad "ping-h2g: ping 10.0.88.2 from $ns failed: $(tail -n 2 <<<"$out")"
	fi
	nsx "$tool" tcp-connect 10.0.88.2 7101 --mode source 16M --retry 10 --timeout 100 \
		>"$logs/$name.host-7101.log" 2>&1 || true
else
	bad "the guest never printed NET-H2G-READY (serial log: $serial)"
fi

# --- verdicts -------------------------------------------------------------
vh_finish_guest
vh_expect_steps queues ping-g2h tcp-g2h tcp-echo tcp-h2g
vh_wait_services

fnv16=$("$tool" fnv 16M)
g2h_host=$(hl 7001)
[[ $(field recv_fnv "$g2h_host") == "$fnv16" ]] || bad "tcp-g2h: the namespace's checksum '$(field recv_fnv "$g2h_host")' is not the pattern's $fnv16"
h2g_guest=$(grep '^H2G ' <<<"$con" || true)
[[ $(field recv_fnv "$h2g_guest") == "$fnv16" ]] || bad "tcp-h2g: the guest's checksum is not the pattern's"
h2g_host=$(hl 7101)
[[ $h2g_host == *result=ok* ]] || bad "tcp-h2g: namespace side: $(tail -n 2 "$logs/$name.host-7101.log")"
# The guest driver's per-queue counters (ethtool -S): with several pairs,
# frames crossed every one of them each way (the 4 echo flows spread over
# the guest's transmit queues and the TAP's).
nic=$(grep '^NIC ' <<<"$con" | tr '\n' ' ' || true)
for ((q = 0; q < queues; q++)); do
	for dir in rx tx; do
		v=$(sed -n "s/.*NIC ${dir}_queue_${q}_packets \([0-9]*\).*/\1/p" <<<"$nic")
		((${v:-0} > 0)) || bad "queues: no packet on the guest's ${dir} queue $q (guest counters: ${nic:-none})"
	done
done

# vmio's counters, printed by --stats when it exits (SIGTERM).
stats=
if [[ -n $vpid ]] && kill -0 "$vpid" 2>/dev/null; then
	kill -TERM "$vpid"
	wait "$vpid" || bad "vmio net exited $? on SIGTERM"
	vpid=
	stats=$(sed -n 's/^.*vmio net: stats: //p' "$vlog" | tail -n1)
fi
if [[ -z $stats ]]; then
	bad "stats: vmio net printed no stats line (log: $vlog)"
else
	for k in tx_frames rx_frames; do
		v=$(field "$k" " $stats")
		((${v:-0} > 0)) || bad "stats: $k is 0: $stats"
	done
	for k in tx_dropped rx_errors ctrl_err; do
		v=$(field "$k" " $stats")
		[[ $v == 0 ]] || bad "stats: $k is not 0 in a clean run: $stats"
	done
fi

# --- report ---------------------------------------------------------------
# A scenario's verdict is its guest step's (and the checks above, which
# fail the test on their own); ms and MB/s from the guest's result line.
row() { # scenario, step[, result line]
	local v=FAIL
	grep -q "^STEP $2 PASS" <<<"$con" && v=PASS
	if [[ -z ${3:-} ]]; then
		printf '  %-15s %s\n' "$1" "$v"
	else
		printf '  %-15s %-4s %7s ms %8s MB/s\n' "$1" "$v" "$(field ms "$3")" "$(field MBps "$3")"
	fi
}
echo "$name: results ($queues queue pair(s); guest's view; TCG guest, $queues vCPU(s)):"
row queues queues
row ping-g2h ping-g2h
printf '  %-15s %s\n' ping-h2g "$ping_h2g"
row "tcp-g2h 16M" tcp-g2h "$(grep '^G2H ' <<<"$con" || true)"
row "tcp-echo 4x4M" tcp-echo "$(grep 'summary conns=4' <<<"$con" || true)"
row "tcp-h2g 16M" tcp-h2g "$h2g_guest"
echo "  guest packets per queue: $(grep '^NIC .*_packets ' <<<"$con" | sed 's/^NIC \([rt]x\)_queue_\([0-9]*\)_packets /\1\2=/' | tr '\n' ' ' || true)"
echo "  vmio net stats: ${stats:-none}"
vh_conclude
