#!/bin/bash
# Guest test of issue 21's trickle: a host program writing small pieces to
# a guest that is busy. Linux 6.12.94 and later refuse a packet once a
# socket's unread packets cost more than its buffer at 576 bytes each
# (some 455 packets for 256 KiB): a device that made a packet of each
# write lost the connection (the guest's read ENOBUFS, the host's EPIPE).
# One boot of the guest with `vmio vsock --tx-buffer-size 1048576
# --control`; the guest half is trickle-guest.sh:
#   g2h-1m             guest -> host, 4 MiB, with the host's credit above
#                      the guest socket's own 256 KiB (a stall at exactly
#                      262144 bytes before vmio timed its credit updates on
#                      min(its buffer, the guest's)); every byte checked here
#   trickle-stream     host CONNECT 6101 on <uds-path>: 2000 writes of 300
#                      bytes, 0.2 ms after each write ends, while the guest
#                      reads nothing for 4 s; then the guest reads all of it,
#                      in order. vmio's --control must show it merged
#                      (merge_holds > 0, fewer packets than writes)
#   trickle-seqpacket  the same through <uds-path>.seqpacket to 6102: 2000
#                      messages, each arriving whole, in order. vmio must
#                      have held messages back at its packet bound
#                      (packet_stalls > 0)
# The figures come from vmio's --control document (its totals, before and
# after each case), not from its log.
#
# usage: tests/guest/trickle_test.sh [--platform NAME] [--image ROOT]
#          [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# (defaults: 6.1, build/guest, build/vmio, build/tests/guest/...). Exit 0
# when every case passed; 1 with "trickle_test: FAIL: ..." lines otherwise.
# Logs: ROOT/NAME/logs/trickle_test.*.log.
set -euo pipefail

name=trickle_test
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
vh_setup "$@"
PIECES=2000
SIZE=300

# One counter of the totals in vmio's --control document (empty if vmio
# has no such counter).
ctl=$tmp/control.sock
total() { # key
	"$vmio" stats --json "$ctl" 2>/dev/null | sed -n 's/.*"totals":{\([^}]*\)}.*/\1/p' |
		sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
declare -A before=() delta=()
# True if $1 is a number above (below) $2 (not if vmio had no such counter).
above() { [[ $1 =~ ^[0-9]+$ ]] && (($1 > $2)); }
below() { [[ $1 =~ ^[0-9]+$ ]] && (($1 < $2)); }
snap() { # the counters now, into before
	local k
	for k in packets_to_guest bytes_to_guest merge_holds packet_stalls; do before[$k]=$(total "$k"); done
}
since() { # case: each counter's growth since snap, into delta[case.key]
	local k v
	for k in "${!before[@]}"; do
		v=$(total "$k")
		delta[$1.$k]=$([[ -n $v && -n ${before[$k]} ]] && echo $((v - before[$k])) || echo "none (no such counter)")
	done
}

# --- the host sink, the backend, QEMU -------------------------------------
# The sink fails unless exactly 4 MiB of the pattern arrive.
vh_service 5101 --count 1 --expect 4M
vh_start_vmio --guest-cid 3 --socket "$sock" --uds-path "$uds" \
	--tx-buffer-size 1048576 --control "$ctl"
vh_boot "$top/tests/guest/trickle-guest.sh"

# --- the trickles, one after the other, once the guest listens ------------
ready=
if vh_wait_marker TRICKLE-READY; then
	ready=1
	for kind in stream seqpacket; do
		port=6101 opt=()
		[[ $kind == stream ]] || port=6102 opt=(--seqpacket)
		snap
		# The writer ends when the guest, having read everything, closes.
		"$peer" trickle "$uds" "$port" "${opt[@]}" --pieces $PIECES --size $SIZE \
			--gap-us 200 --retry 10 --timeout 60 >"$logs/$name.host-$port.log" 2>&1 || true
		since "$kind"
	done
else
	bad "the guest never printed TRICKLE-READY (serial log: $serial)"
fi

# --- verdicts -------------------------------------------------------------
vh_finish_guest
vh_expect_steps g2h-1m trickle-stream trickle-seqpacket
vh_wait_services
if [[ -n $ready ]]; then
	for kind in stream seqpacket; do
		port=6101
		[[ $kind == stream ]] || port=6102
		host=$(tail -n 1 "$logs/$name.host-$port.log")
		[[ $host == *"pieces=$PIECES bytes=$((PIECES * SIZE)) "*result=ok* ]] ||
			bad "trickle-$kind: host side: $host"
		# What the device did, by its own counters.
		[[ ${delta[$kind.bytes_to_guest]} == $((PIECES * SIZE)) ]] ||
			bad "trickle-$kind: vmio's bytes_to_guest grew by ${delta[$kind.bytes_to_guest]}, not $((PIECES * SIZE))"
	done
	# A stream into a guest that holds its packets unread is merged. Once
	# the guest reads, it keeps up and each write that follows goes out at
	# once: how many packets the whole case takes depends on how far the
	# writer got during the hold (1105 of 2000 on 6.1), so the count is
	# only bounded by the writes.
	above "${delta[stream.merge_holds]}" 0 ||
		bad "trickle-stream: vmio held nothing back to merge (merge_holds grew by ${delta[stream.merge_holds]})"
	below "${delta[stream.packets_to_guest]}" $PIECES ||
		bad "trickle-stream: ${delta[stream.packets_to_guest]} packets for $PIECES writes: not merged"
	# Messages cannot be merged: vmio must have stopped at its packet bound.
	above "${delta[seqpacket.packet_stalls]}" 0 ||
		bad "trickle-seqpacket: vmio never waited at its packet bound (packet_stalls grew by ${delta[seqpacket.packet_stalls]})"
	above "${delta[seqpacket.packets_to_guest]}" $((PIECES - 1)) ||
		bad "trickle-seqpacket: ${delta[seqpacket.packets_to_guest]} packets for $PIECES messages"
fi

# --- report ---------------------------------------------------------------
echo "$name: results (TCG guest, one vCPU; vmio's counters for each case):"
vh_row "g2h 4M (1M credit)" "$(grep '^G2H1M ' <<<"$con" || true)"
for kind in stream seqpacket; do
	port=6101
	[[ $kind == stream ]] || port=6102
	printf '  trickle %-9s host: %s\n' "$kind" "$(tail -n 1 "$logs/$name.host-$port.log" 2>/dev/null | sed 's/^uds-peer: trickle [a-z]* //')"
	printf '  %17s guest: %s\n' "" "$(grep "^TRICKLE-GUEST .* trickle $kind " <<<"$con" | sed 's/^TRICKLE-GUEST vsock-tool: trickle [a-z]* //')"
	printf '  %17s vmio: packets_to_guest=%s bytes_to_guest=%s merge_holds=%s packet_stalls=%s\n' "" \
		"${delta[$kind.packets_to_guest]:-?}" "${delta[$kind.bytes_to_guest]:-?}" \
		"${delta[$kind.merge_holds]:-?}" "${delta[$kind.packet_stalls]:-?}"
done

vh_conclude
