#!/bin/bash
# The demonstration (`make demo`): a real Linux guest talks to host programs
# over AF_VSOCK through `vmio vsock`.
#
# It boots Debian's stock kernel with a busybox initramfs under QEMU
# (scripts/guest/, built and cached in build/guest on first use), with
# QEMU's vhost-user-vsock-pci device served by `vmio vsock --guest-cid 3`,
# then:
#   1. a host program connects to an echo service in the guest (port 6000)
#      through vmio's hybrid-vsock socket ("CONNECT 6000"), sends 16 MiB and
#      checks that the same bytes come back;
#   2. a guest program connects to CID 2 port 5000, which vmio connects to
#      the host service listening on <uds-path>_5000, and sends 32 MiB that
#      the host checks byte for byte;
# and prints what crossed and how fast. (The earlier loopback demo, 1 GiB
# through `vmio loopback` and the in-tree front end, is gone from here:
# tests/integration covers it.) The guest runs under software emulation
# (TCG) with one vCPU, so the rates say more about QEMU than about vmio:
# `make bench` measures vmio itself.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
vmio=$build/vmio
tool=$build/tests/guest/vsock-tool
peer=$build/tests/guest/uds-peer
say() { echo "demo: $*"; }
die() { echo "demo: $*" >&2; exit 1; }

for b in "$vmio" "$tool" "$peer"; do
	[[ -x $b ]] || die "$b is missing: run 'make build' (with -Dguest_tests=true, the default)"
done
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing: run 'make deps' as root"

say "preparing the guest image (Debian kernel + busybox; cached after the first run)"
image=$("$top/scripts/guest/build-image.sh" "$build/guest" 2>/dev/null) ||
	die "building the guest image failed: run scripts/guest/build-image.sh to see why"

dir=$(mktemp -d /tmp/vmio-demo.XXXXXX) # short: unix socket paths are limited
pids=()
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The host service the guest will reach as CID 2 port 5000.
"$peer" listen "$dir/vm.vsock_5000" --count 1 --expect 32M --timeout 150 >"$dir/host-5000.log" 2>&1 &
svc=$!
pids+=("$svc")

say "\$ vmio vsock --guest-cid 3 --socket $dir/vhost.sock --uds-path $dir/vm.vsock"
"$vmio" vsock --guest-cid 3 --socket "$dir/vhost.sock" --uds-path "$dir/vm.vsock" 2>"$dir/vmio.log" &
pids+=("$!")
for _ in $(seq 100); do [[ -S $dir/vhost.sock ]] && break; sleep 0.05; done
[[ -S $dir/vhost.sock ]] || die "vmio vsock did not start: $(cat "$dir/vmio.log")"

# What the guest runs: an echo service for the host, then a 32 MiB stream
# to the host service.
cat >"$dir/guest.sh" <<'GUEST'
echo "guest: my CID is $(vsock-tool cid)"
vsock-tool listen 6000 --count 1 --mode echo --timeout 100 >/tmp/echo.out 2>&1 &
e=$!
i=0
while ! grep -q listening /tmp/echo.out && [ $i -lt 100 ]; do usleep 50000; i=$((i + 1)); done
echo "DEMO-ECHO-READY"
wait $e
echo "guest: echo service: $(grep -v listening /tmp/echo.out)"
echo "guest: sending 32 MiB to CID 2 port 5000"
vsock-tool connect 2 5000 --mode source 32M --timeout 100
GUEST

say "booting the guest (QEMU, software emulation: ~6 s) with"
say "  -object memory-backend-memfd,id=mem,size=256M,share=on -machine q35,memory-backend=mem"
say "  -chardev socket,id=vs,path=$dir/vhost.sock -device vhost-user-vsock-pci,chardev=vs"
log=$dir/serial.log
"$top/scripts/guest/run-guest.sh" --name demo --image "$image" --no-build --timeout 180 \
	--script "$dir/guest.sh" --file "$tool:/bin/vsock-tool" --log "$log" -- \
	-chardev "socket,id=vs,path=$dir/vhost.sock" -device vhost-user-vsock-pci,chardev=vs \
	> >(sed -u 's/\r$//' | grep --line-buffered -E '^(guest|vmio-guest|vsock-tool)' | sed -u 's/^/  | /') \
	2>"$dir/run-guest.log" &
guest=$!
pids+=("$guest")

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2" | head -n1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

for _ in $(seq 600); do
	grep -q DEMO-ECHO-READY "$log" 2>/dev/null && break
	kill -0 "$guest" 2>/dev/null || break
	sleep 0.2
done
grep -q DEMO-ECHO-READY "$log" 2>/dev/null || die "the guest did not start its echo service: $(tail -n 5 "$log" "$dir/run-guest.log")"

say "host -> guest: connecting to $dir/vm.vsock, 'CONNECT 6000', sending 16 MiB to the guest's echo service"
out=$("$peer" connect "$dir/vm.vsock" 6000 --mode source 16M --echo-check --retry 10 --timeout 100) ||
	die "host -> guest failed: $out"
line=$(grep 'conn conn=' <<<"$out")
say "  $(grep -o 'reply="[^"]*"' <<<"$out" | head -n1 | sed 's/reply=/vmio answered /'); $(mib "$(field sent "$line")") out, $(mib "$(field recvd "$line")") back, checksums match, $(field ms "$line") ms, $(field MBps "$line") MB/s each way"

rc=0
wait "$guest" || rc=$?
((rc == 0)) || die "the guest failed (status $rc): $(tail -n 8 "$log")"
wait "$svc" || die "the host service failed: $(cat "$dir/host-5000.log")"
line=$(grep 'conn conn=' "$dir/host-5000.log")
say "guest -> host: CID 2 port 5000 reached the host service on $dir/vm.vsock_5000: $(mib "$(field recvd "$line")"), every byte checked ($(field pattern "$line")), $(field ms "$line") ms, $(field MBps "$line") MB/s"
say "done: a Linux guest's own virtio-vsock driver talked to host programs through vmio vsock, both ways"
