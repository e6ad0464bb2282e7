#!/bin/bash
# Guest test of `vmio vsock`: boots the Debian kernel + busybox guest
# (scripts/guest/) once, with QEMU's vhost-user-vsock-pci wired to
# `vmio vsock --guest-cid 3`, and runs the scenarios of issue 3 between the
# guest kernel's own virtio-vsock driver (tests/guest/vsock-tool, in the
# guest) and host services (tests/guest/uds-peer, here):
#   cid            the guest sees CID 3 (GET_CONFIG)
#   rst            guest connect to a port with no host listener: ECONNRESET at once
#   g2h            guest -> host, 32 MiB, checked byte for byte on the host
#   half-close     guest SHUT_WR, host reads EOF then replies, guest reads it
#   concurrent64   64 connections at once, echoed, each checked
#   slow-reader    a slow host reader stalls only its own connection
#   h2g-rst        host CONNECT to a guest port nobody listens on: closed at once
#   h2g            host -> guest, 32 MiB, checked byte for byte in the guest
#   h2g-echo       host -> guest echo service -> host, 1 MiB, checked
#   seq-g2h        guest SOCK_SEQPACKET -> host <uds>_5010 (an AF_UNIX
#                  SOCK_SEQPACKET echo): messages of 1 B .. 256 KiB each come
#                  back whole, one byte more is refused by the guest kernel
#                  (EMSGSIZE against the backend's buf_alloc; 6.1 says ENOMEM)
#   seq-h2g        host SOCK_SEQPACKET -> <uds>.seqpacket CONNECT 6010 ->
#                  guest echo: the same sizes; one byte more closes the
#                  connection (the backend refuses it, never splits it)
#
# usage: tests/guest/vsock_test.sh [--platform NAME] [--packed] [--in-order]
#          [--image ROOT] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# (defaults: 6.1, split rings, build/guest, build/vmio,
# build/tests/guest/...). --packed: QEMU's packed=on, the guest must
# negotiate RING_PACKED; --in-order (QEMU 10): in_order=on (with or
# without --packed), and the features the guest reports must be those
# vmio was told (its --control document). Exit 0 when every scenario passed; 1 with
# "vsock_test: FAIL: ..." lines otherwise.
# Logs: ROOT/NAME/logs/vsock_test[_packed][_in_order].*.log (serial console,
# vmio -v, host peers).
# The set-up and verdicts shared with redirect_test.sh: vsock-host.sh.
set -euo pipefail

name=vsock_test
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
vh_setup "$@"
if [[ -n $in_order ]] && ! "$qemu" -device vhost-user-vsock-pci,help 2>/dev/null | grep -q 'in_order='; then
	fail "--in-order: QEMU $qemu_major.$qemu_minor ($qemu) has no in_order property on vhost-user-vsock-pci (QEMU 10 has)"
fi

# --- host services, then the backend, then QEMU ---------------------------
vh_service 5001 --count 1 --expect 32M             # g2h: every byte checked
vh_service 5002 --count 1 --mode half-close --expect 4096
vh_service 5003 --count 1 --expect 2M --read-delay-ms 20 --read-size 16K # ~0.8 MB/s
vh_service 5004 --count 64 --mode echo
vh_service 5005 --count 1 --expect 8M
# seq-g2h: a seqpacket echo service (uds-peer seq-listen), judged below.
vh_spawn 5010 "$peer" seq-listen "${uds}_5010" --timeout "$limit"
# --in-order: vmio's own view of what the driver acked, from its control
# socket, to hold against the guest's.
ctl=$tmp/control.sock
vh_start_vmio --guest-cid 3 --socket "$sock" --uds-path "$uds" ${in_order:+--control "$ctl"}
vh_boot "$top/tests/guest/vsock-guest.sh"

# --- host to guest, once the guest's services are up ----------------------
# The guest prints VSOCK-H2G-READY on its console when it listens on 6001
# and 6002; the host side connects through the backend's uds-path then.
ready=
if vh_wait_marker VSOCK-H2G-READY; then
	ready=1
	# The driver is up and has acked its features: vmio's "features"
	# (what the front end acked, as a number).
	[[ -z $in_order ]] || acked=$("$vmio" stats --json "$ctl" 2>&1 | sed -n 's/.*"features": *\([0-9]*\).*/\1/p' | head -n1)
	# No listener on 6099 in the guest: the backend must close the socket
	# (guest RST) at once, with no OK line.
	"$peer" connect "$uds" 6099 --timeout 10 >"$logs/$name.host-6099.log" 2>&1 || true
	# Retry: the guest's listen() may follow its marker by a moment.
	"$peer" connect "$uds" 6001 --mode source 32M --retry 10 --timeout 100 \
		>"$logs/$name.host-6001.log" 2>&1 || true
	"$peer" connect "$uds" 6002 --mode source 1M --echo-check --retry 10 --timeout 60 \
		>"$logs/$name.host-6002.log" 2>&1 || true
	"$peer" seq-connect "$uds" 6010 --retry 10 --timeout 60 \
		>"$logs/$name.host-6010.log" 2>&1 || true
else
	bad "the guest never printed VSOCK-H2G-READY (serial log: $serial)"
fi

# --- verdicts -------------------------------------------------------------
vh_finish_guest
vh_expect_steps cid rst g2h half-close concurrent64 slow-reader h2g h2g-echo seq-g2h seq-h2g
# --packed: the guest saw its driver negotiate packed rings.
[[ -z $packed ]] || vh_expect_steps ring-packed
# --in-order (QEMU 10's in_order=on; vmio offers VIRTIO_F_IN_ORDER): what
# the guest says it negotiated (its features file, bit N the N+1th
# character) must be what vmio was told, PACKED (34) among it with
# --packed. IN_ORDER (35) is the driver's to take: Linux up to 6.12 never
# does (its virtio_ring clears the bit), Linux 7 does on split and packed
# rings; the report says which.
in_order_seen=
if [[ -n $in_order ]]; then
	gfeat=$(sed -n 's/^FEATURES [^ ]* \([01]*\)$/\1/p' <<<"$con" | head -n1)
	if [[ -z $gfeat ]]; then
		bad "in-order: the guest printed no FEATURES line"
	elif [[ -z ${acked:-} ]]; then
		bad "in-order: no features from vmio's control socket ($ctl)"
	else
		for bit in 34 35; do
			g=${gfeat:bit:1}
			v=$(((acked >> bit) & 1))
			[[ $g == "$v" ]] || bad "in-order: feature bit $bit is $g in the guest but $v in what vmio was told ($acked)"
		done
		[[ -z $packed || ${gfeat:34:1} == 1 ]] || bad "in-order: the guest did not negotiate RING_PACKED (features $gfeat)"
		in_order_seen="RING_PACKED $([[ ${gfeat:34:1} == 1 ]] && echo yes || echo no), IN_ORDER $([[ ${gfeat:35:1} == 1 ]] && echo yes || echo no) (guest and vmio agree)"
	fi
fi
vh_wait_services

# The checksum of the pattern is computed here, independently of both ends.
fnv32=$("$peer" fnv 32M)
g2h_host=$(hl 5001)
[[ $(field recv_fnv "$g2h_host") == "$fnv32" ]] || bad "g2h: host checksum '$(field recv_fnv "$g2h_host")' is not the pattern's $fnv32"
g2h_guest=$(grep '^G2H ' <<<"$con" || true)
[[ $(field sent_fnv "$g2h_guest") == "$fnv32" ]] || bad "g2h: the guest's sent checksum is not the pattern's"
r6099=$(cat "$logs/$name.host-6099.log" 2>/dev/null || true)
if [[ -n $ready ]]; then
	[[ $r6099 == *"result=error why=closed"* ]] ||
		bad "h2g-rst: CONNECT 6099 (no guest listener) should be closed by the backend; got: $r6099"
	ms=$(field ms "$r6099")
	((${ms:-9999} <= 2000)) || bad "h2g-rst: the backend took ${ms} ms to refuse"
	h2g_host=$(hl 6001)
	[[ $h2g_host == *result=ok* ]] || bad "h2g: host side: $(tail -n 2 "$logs/$name.host-6001.log")"
	echo_host=$(hl 6002)
	[[ $echo_host == *result=ok* ]] || bad "h2g-echo: host side: $(tail -n 2 "$logs/$name.host-6002.log")"
	seq_h2g=$(hl 6010)
	[[ $seq_h2g == *"refused=closed result=ok"* ]] ||
		bad "seq-h2g: host side: $(tail -n 2 "$logs/$name.host-6010.log")"
fi
seq_g2h=$(grep '^SEQG2H ' <<<"$con" || true)
[[ $seq_g2h =~ refused=(EMSGSIZE|ENOMEM)\ result=ok ]] || bad "seq-g2h: guest side: $seq_g2h"
[[ $(hl 5010) == *"msgs=15 "*result=ok* ]] || bad "seq-g2h: the host echo saw: $(hl 5010)"
h2g_guest=$(grep '^H2G ' <<<"$con" || true)
[[ $(field recv_fnv "$h2g_guest") == "$fnv32" ]] || bad "h2g: the guest's checksum is not the pattern's"

# --- report ---------------------------------------------------------------
echo "vsock_test: results (guest's view; TCG guest, one vCPU):"
vh_row "rst" "$(grep 'port=5999' <<<"$con" | sed 's/result=error/result=ok/')"
vh_row "g2h 32M" "$g2h_guest"
vh_row "half-close" "$(grep '^HALF ' <<<"$con" || true)"
vh_row "concurrent64" "$(grep 'summary conns=64' <<<"$con" || true)"
vh_row "fast beside slow" "$(grep '^FAST ' <<<"$con" || true)"
vh_row "slow reader" "$(grep '^SLOW ' <<<"$con" || true)"
vh_row "h2g 32M" "$h2g_guest"
vh_row "h2g-echo 1M" "$(hl 6002 || true)"
vh_row "h2g-rst" "${r6099//result=error/result=ok}"
vh_row "seq g2h 1B-256K" "$seq_g2h"
vh_row "seq h2g 1B-256K" "${seq_h2g:-}"
[[ -z $in_order ]] || echo "  ${packed:+packed=on,}in_order=on: negotiated ${in_order_seen:-?}"

vh_conclude
