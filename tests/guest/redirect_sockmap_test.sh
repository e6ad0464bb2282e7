#!/bin/bash
# Guest test of the seed's shape, unix datagrams into vsock through
# `vmio redirect` run INSIDE the guest: a unix datagram sender ->
# UNIX-RECV -> VSOCK-CONNECT:2:PORT -> `vmio vsock --guest-cid 3
# --tx-buffer-size 4m` here -> a host sink on <uds-path>_PORT checking
# every byte (vmio-redirect-bench send and sink: one pattern). On Linux
# 6.4 and later the kernel moves the datagrams (the sockmap engine); on
# older kernels the message engine does, and -v says why. Scenarios (the
# guest half, redirect-sockmap-guest.sh, says more):
#   xfer   32 MiB of 64 KiB datagrams; the engine -v and --control name
#   stall  32 MiB with the host sink reading nothing for 3 s after 2 MiB:
#          the sender held back, the kernel holding no more of its data
#          than its send buffer, the guest's memory flat, nothing lost
#   refused (Linux before 6.4) told to try sockmap anyway, vmio meets the
#          kernel's refusal of the vsock socket and goes on with the
#          message engine on the same connection
#   answer the host's sink answers on the same connection while the host
#          runs two CPU-bound neighbours (this script starts them when the
#          step begins and stops them after): every byte both ways, and
#          vmio's CPU in the guest bounded
#   lock   (Linux 6.4+) the kernel's blocking recv on a vsock socket in a
#          sockmap, against echo services on 7005 and 7006: reported
# VMIO_SOCKMAP_ANSWER_BYTES: the answer step's forward bytes (256M).
# The host credit is 4 MiB, as large as the sockmap engine's vsock buffer:
# its retries wait a jiffy each time the socket is out of credit.
#
# usage: tests/guest/redirect_sockmap_test.sh [--image DIR] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# (vmio-redirect-bench is taken from beside vmio). Exit 0 when every
# scenario passed; 1 with "redirect_sockmap_test: FAIL: ..." lines
# otherwise. Logs: DIR/logs/redirect_sockmap_test.*.log. Set
# VMIO_GUEST_KERNEL_DEB (scripts/guest/build-image.sh) for another kernel.
set -euo pipefail

name=redirect_sockmap_test
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
vh_setup "$@"
bench=$(dirname "$vmio")/vmio-redirect-bench
[[ -x $bench ]] || fail "$bench is missing: build with 'ninja -C build'"
MIB32=33554432

# --- host sinks, then the backend, then QEMU ------------------------------
vh_spawn 7001 "$bench" sink --path "${uds}_7001" --bytes $MIB32 --timeout "$limit"
vh_spawn 7002 "$bench" sink --path "${uds}_7002" --bytes $MIB32 --timeout "$limit" \
	--stall-after 2M --stall-ms 3000
# Before Linux 6.4 the kernel itself must refuse the vsock socket too.
krel=$(cat "$image/kernel-release")
old=
[[ $krel =~ ^([0-9]+)\.([0-9]+) ]] &&
	((BASH_REMATCH[1] < 6 || (BASH_REMATCH[1] == 6 && BASH_REMATCH[2] < 4))) && old=1
ports=(7001 7002)
steps=(xfer stall)
if [[ -n $old ]]; then
	vh_spawn 7003 "$bench" sink --path "${uds}_7003" --bytes 8M --timeout "$limit"
	ports+=(7003)
	steps+=(refused)
fi
abytes=$(numfmt --from=iec "${VMIO_SOCKMAP_ANSWER_BYTES:-256M}") ||
	fail "VMIO_SOCKMAP_ANSWER_BYTES: not a size"
rbytes=$((abytes / 4096))
vh_spawn 7004 "$bench" sink --path "${uds}_7004" --bytes "$abytes" \
	--answer "$rbytes" --timeout "$limit"
ports+=(7004)
steps+=(answer)
if [[ -z $old ]]; then
	vh_service 7005 --mode echo --count 1
	vh_service 7006 --mode echo --count 1
fi
vh_start_vmio --guest-cid 3 --socket "$sock" --uds-path "$uds" --tx-buffer-size 4m
lock=$(dirname "$tool")/sockmap-recv-lock
[[ -x $lock ]] || fail "$lock is missing: build with 'ninja -C build'"
vh_boot "$top/tests/guest/redirect-sockmap-guest.sh" --exe "$vmio:/bin/vmio" \
	--exe "$bench:/bin/vmio-redirect-bench" --file "$lock:/bin/sockmap-recv-lock" \
	--append "ANSWER_BYTES=$abytes"

# --- the answer step's neighbours -------------------------------------------
# Two processes that want a core each, from the step's start to the
# guest's end (bounded by timeout besides: nothing outlives the test).
hogs=()
if vh_wait_marker SOCKMAP-ANSWER-BEGIN; then
	for _ in 1 2; do
		timeout "$limit" sh -c 'while :; do :; done' &
		hogs+=("$!")
		pids+=("$!")
	done
fi
vh_finish_guest
for h in "${hogs[@]}"; do
	kill "$h" 2>/dev/null || true
	wait "$h" 2>/dev/null || true
done
((${#hogs[@]} == 2)) || bad "the guest never began the answer step"
vh_expect_steps "${steps[@]}"
vh_wait_services
for port in "${ports[@]}"; do
	want=$MIB32
	[[ $port != 7003 ]] || want=8388608
	[[ $port != 7004 ]] || want=$abytes
	line=$(tail -n 1 "$logs/$name.host-$port.log" 2>/dev/null || true)
	[[ $line == "bytes=$want "*"intact=1"* ]] ||
		bad "host sink $port: '$line', expected bytes=$want ... intact=1"
	[[ $port != 7004 || $line == *" answered=$rbytes" ]] ||
		bad "host sink $port: '$line', expected answered=$rbytes"
done

# --- report ---------------------------------------------------------------
echo "$name: $(grep '^SOCKMAP-GUEST ' <<<"$con" || echo "the guest said nothing")"
row() { # scenario, port, guest line
	printf '  %-6s host %s | guest %s\n' "$1" \
		"$(tail -n 1 "$logs/$name.host-$2.log" 2>/dev/null)" "${3#* }"
}
row xfer 7001 "$(grep '^SOCKMAP-XFER ' <<<"$con" || true)"
row stall 7002 "$(grep '^SOCKMAP-STALL ' <<<"$con" || true)"
[[ -z $old ]] || row refused 7003 "$(grep '^SOCKMAP-REFUSED ' <<<"$con" || true)"
row answer 7004 "$(grep '^SOCKMAP-ANSWER ' <<<"$con" || true)"
echo "$name: the answer's reader in the guest: $(grep '^SOCKMAP-ANSWER-TAKE ' <<<"$con" | cut -d' ' -f2-)"
ans=$(grep '^SOCKMAP-ANSWER ' <<<"$con" || true)
echo "$name: vmio redirect's CPU in the guest during answer: $(field vmio_cpu_ticks "$ans") of $(field wall_ticks "$ans") ticks (bound: $(field cpu_max_pct "$ans")%)"
grep '^SOCKMAP-LOCK ' <<<"$con" | sed "s/^SOCKMAP-LOCK /$name: blocking recv, vsock: /" || true
echo "$name: the guest's relays said:"
grep -E '^SOCKMAP-(XFER|STALL|REFUSED|ANSWER)-RELAY ' <<<"$con" | sed 's/^/  /' || true

vh_conclude
