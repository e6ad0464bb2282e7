#!/bin/bash
# Guest test of `vmio net`: boots the Debian kernel + busybox guest
# (scripts/guest/) with QEMU's virtio-net-pci on `-netdev vhost-user`,
# served by `vmio net --stats` on one of two backends, the peer in a
# network namespace of the test's own (10.0.88.1/24 there, the guest
# 10.0.88.2/24):
#   --backend tap       (default) `vmio net --tap vmtap0`, run inside that
#                       namespace: vmio creates the TAP, the peer's address
#                       is on it
#   --backend xdp       `vmio net --xdp xa`: a veth pair, xb (the peer's
#                       address) in that namespace, xa (up, no address) in
#                       a second one where vmio runs and binds its XSKs;
#                       the guest's memory must become the UMEM (no copy)
#   --backend xdp-copy  the same with --xdp-copy
# and runs, between the guest kernel's virtio_net driver and the namespace
# (tests/guest/vsock-tool's tcp modes, both ends):
#   queues     the guest sees as many queue pairs as asked for
#   ping-g2h   busybox ping from the guest to 10.0.88.1
#   ping-h2g   ping from the namespace to the guest
#   tcp-g2h    guest -> namespace, 16 MiB, checked byte for byte there
#   tcp-echo   guest -> namespace echo -> guest, 4 connections of 4 MiB,
#              each checked in the guest
#   tcp-h2g    namespace -> guest, 16 MiB, checked byte for byte in the guest
#   stats      vmio's --stats line on exit: frames both ways, no drop
#   mode       (AF_XDP) the mode each pair runs in, as vmio logs it, shown
#              in the results; with xdp-copy it must be the copy path
# With --queues 2: the same over two queue pairs (QEMU queues=2, mq=on),
# and frames must have crossed each pair's queues both ways (the guest
# driver's per-queue counters, read with vsock-tool nic-queues).
#
# With --in-order: in_order=on on virtio-net-pci (QEMU 10; vmio offers
# VIRTIO_F_IN_ORDER with the TAP backend), and the report says whether the
# guest's driver took it (Linux 7 does, 6.x never).
#
# usage: tests/guest/net_test.sh [--platform NAME] [--backend tap|xdp|xdp-copy] [--queues N] [--packed] [--in-order] [--image ROOT] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# Needs root (network namespaces, a TAP or a veth pair, AF_XDP). Exit 0
# when every scenario passed; 1 with "net_test: FAIL: ..." lines otherwise.
# Logs: ROOT/NAME/logs/net_test[_mqN][_xdp|_xdp_copy].*.log (serial console, vmio
# -v and its stats, namespace peers). The set-up and verdicts shared with
# the vsock tests: vsock-host.sh.
set -euo pipefail

queues=1
backend=tap
args=()
while (($#)); do
	case $1 in
	--queues) queues=$2; shift 2 ;;
	--backend) backend=$2; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
case $backend in
tap | xdp | xdp-copy) ;;
*) echo "net_test: --backend is tap, xdp or xdp-copy, not '$backend'" >&2; exit 2 ;;
esac
name=net_test
((queues == 1)) || name=net_test_mq$queues
[[ $backend == tap ]] || name=${name}_${backend//-/_}
dev=net
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
what="a TAP interface"
[[ $backend == tap ]] || what="a veth pair and AF_XDP sockets (CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF)"
((EUID == 0)) || fail "needs root: it creates network namespaces and $what"
command -v ip >/dev/null || fail "'ip' is missing (package iproute2)"
command -v busybox >/dev/null || fail "'busybox' is missing (package busybox-static)"
[[ $backend == tap ]] || command -v ethtool >/dev/null || fail "'ethtool' is missing (package ethtool)"
vh_setup "${args[@]}"

# ns: the peer's namespace (services, pings); vns: where vmio runs, the
# same one with a TAP, a second one holding xa with AF_XDP.
nss=("vmio-$name-$$")
[[ $backend == tap ]] || nss+=("${nss[0]}-v")
ns=${nss[0]}
vns=${nss[-1]}
# shellcheck disable=SC2317 # called from vh_cleanup
vh_cleanup_hook() {
	local n
	for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null || true; done
}
for n in "${nss[@]}"; do
	ip netns add "$n" || fail "cannot create network namespace $n"
	ip -n "$n" link set lo up
done
vmio_wrap=(ip netns exec "$vns")
nsx() { ip netns exec "$ns" "$@"; }

# --- namespace services, then the backend and its TAP or veth, then QEMU --
ns_service() { # port, vsock-tool options...
	vh_spawn "$1" nsx "$tool" tcp-listen "$1" --timeout "$limit" "${@:2}"
}
ns_service 7001 --count 1 --expect 16M # tcp-g2h: every byte checked
ns_service 7002 --count 4 --mode echo  # tcp-echo
if [[ $backend == tap ]]; then
	peer_if=vmtap0
	vh_start_vmio --socket "$sock" --tap vmtap0 --queues "$queues" --stats
else
	# xa in vmio's namespace, xb in the peer's; as many queues as pairs
	# (veth's XDP wants xa's rx queues to cover xb's tx queues).
	peer_if=xb
	vq=(numtxqueues "$queues" numrxqueues "$queues")
	{ ip -n "$vns" link add xa "${vq[@]}" type veth peer name xb netns "$ns" "${vq[@]}" &&
		ip -n "$vns" link set xa up; } ||
		fail "cannot create the veth pair xa ($vns) / xb ($ns)"
	# Checksums: xb offers checksum offload, so the namespace's TCP hands
	# it segments whose checksum is left for a NIC to finish
	# (CHECKSUM_PARTIAL), and an XSK receives the bytes alone, with no word
	# that the checksum is unfinished: the guest (offered no offload over
	# AF_XDP) drops every such segment as corrupt; pings pass, TCP never
	# connects. With xb's tx checksumming off the stack finishes each
	# checksum, as frames from a wire always are.
	# GRO: left off on xb (veth's default). Native XDP on veth needs the
	# peer's NAPI (an XDP program or GRO on xb) only for frames put into
	# xa by ndo_xdp_xmit (XDP_TX, XDP_REDIRECT); an XSK on a veth sends
	# through the generic xmit path (veth_xmit: xb takes them by netif_rx),
	# and xa, which has the XDP program, has a NAPI of its own for what
	# xb sends. Frames cross both ways without it.
	nsx ethtool -K xb tx off >/dev/null || fail "cannot turn off xb's tx checksum offload (ethtool -K xb tx off)"
	xcopy=()
	[[ $backend == xdp ]] || xcopy=(--xdp-copy)
	vh_start_vmio --socket "$sock" --xdp xa --queues "$queues" "${xcopy[@]}" --stats
fi
{ nsx ip addr add 10.0.88.1/24 dev "$peer_if" && nsx ip link set "$peer_if" up; } ||
	fail "cannot configure $peer_if in $ns: $(nsx ip link 2>&1)"
mq=
((queues == 1)) || mq=",queues=$queues"
# vectors=0: INTx, no MSI-X. QEMU 7.2 under TCG crashes (SIGSEGV in
# virtio-pci's vector unmask, which takes the KVM irqfd path with no irqfd
# table) when a vhost-user virtio-net driver turns on MSI-X; with KVM,
# MSI-X works and mq=on,vectors=2N+2 is the usual line.
# shellcheck disable=SC2054 # QEMU's commas
dev_qemu=(-chardev "socket,id=c,path=$sock" -netdev "vhost-user,chardev=c,id=n$mq"
	-device "virtio-net-pci,netdev=n,mac=52:54:00:00:88:02,vectors=0${mq:+,mq=on}${packed:+,packed=on}${in_order:+,in_order=on}")
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
# QEMU keeps virtio-net's config space itself, and warns at every start
# about a back end that offers VHOST_USER_PROTOCOL_F_CONFIG: vmio net
# does not offer it.
qlog=${serial%.serial.log}.run-guest.log
if grep -q 'F_CONFIG' "$qlog"; then
	bad "qemu: $(grep -m 1 'F_CONFIG' "$qlog")"
fi
vh_expect_steps queues ping-g2h tcp-g2h tcp-echo tcp-h2g
[[ -z $packed ]] || vh_expect_steps ring-packed
vh_wait_services

fnv16=$("$tool" fnv 16M)
g2h_host=$(hl 7001)
[[ $(field recv_fnv "$g2h_host") == "$fnv16" ]] || bad "tcp-g2h: the namespace's checksum '$(field recv_fnv "$g2h_host")' is not the pattern's $fnv16"
h2g_guest=$(grep '^H2G ' <<<"$con" || true)
[[ $(field recv_fnv "$h2g_guest") == "$fnv16" ]] || bad "tcp-h2g: the guest's checksum is not the pattern's"
h2g_host=$(hl 7101)
[[ $h2g_host == *result=ok* ]] || bad "tcp-h2g: namespace side: $(tail -n 2 "$logs/$name.host-7101.log")"
# The guest driver's per-queue counters (vsock-tool nic-queues: ethtool -S
# or netdev qstats, as the guest kernel has them): with several pairs,
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
vh_stop_vmio_stats "tx_frames rx_frames" "tx_dropped rx_errors ctrl_err"

# The mode each pair ran in, as vmio logged it ("queue N (pair M): ..." at
# start, and again when a pair goes onto the guest's memory): read once
# vmio is gone. The default must have gone without a copy; --xdp-copy
# never.
modes=
if [[ $backend != tap ]]; then
	modes=$(grep -E 'xdp xa queue [0-9]+ \(pair [0-9]+\): ' "$vlog" | sed 's/^vmio: info: net: //' || true)
	[[ -n $modes ]] || bad "mode: vmio logged no 'queue N (pair M): ...' line (log: $vlog)"
	if [[ $backend == xdp ]] && ! grep -q 'no-copy (' <<<"$modes"; then
		bad "mode: the guest's memory never became the UMEM: $modes"
	fi
	if [[ $backend == xdp-copy ]] && grep -q 'no-copy (' <<<"$modes"; then
		bad "mode: with --xdp-copy a pair ran without a copy: $modes"
	fi
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
echo "$name: results (backend $backend, $queues queue pair(s); guest's view; TCG guest, $queues vCPU(s)):"
row queues queues
row ping-g2h ping-g2h
printf '  %-15s %s\n' ping-h2g "$ping_h2g"
row "tcp-g2h 16M" tcp-g2h "$(grep '^G2H ' <<<"$con" || true)"
row "tcp-echo 4x4M" tcp-echo "$(grep 'summary conns=4' <<<"$con" || true)"
row "tcp-h2g 16M" tcp-h2g "$h2g_guest"
echo "  guest packets per queue: $(grep '^NIC .*_packets ' <<<"$con" | sed 's/^NIC \([rt]x\)_queue_\([0-9]*\)_packets /\1\2=/' | tr '\n' ' ' || true)(from $(sed -n 's/^NIC source //p' <<<"$con" | head -n1))"
echo "  vmio net stats: ${stats:-none}"
if [[ -n $in_order ]]; then
	# The guest's features file: bit N is its N+1th character.
	gfeat=$(sed -n 's/^FEATURES [^ ]* \([01]*\)$/\1/p' <<<"$con" | head -n1)
	[[ -n $gfeat ]] || bad "in-order: the guest printed no FEATURES line"
	echo "  ${packed:+packed=on,}in_order=on: the guest negotiated IN_ORDER $([[ ${gfeat:35:1} == 1 ]] && echo yes || echo no)"
fi
if [[ $backend != tap ]]; then
	while read -r m; do echo "  vmio mode: $m"; done <<<"${modes:-none}"
fi
vh_conclude
