#!/bin/bash
# Guest smoke test: boots the Debian kernel + busybox initramfs that
# scripts/guest/build-image.sh makes (building it if needed), and checks in
# the guest that the virtio, vsock and virtio-net drivers loaded and bound
# to the devices given to it. Every later guest test stands on this.
#
# usage: tests/guest/boot_test.sh [IMAGE_DIR]      (default build/guest)
# Exit 0 on success; non-zero with a message naming what failed. A missing
# QEMU is a failure, not a skip: the guest tests are part of the suite.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
image=${1:-$top/build/guest}
# A boot takes ~5 s under TCG on this 2-core machine; leave room for a
# loaded CI machine, but never hang.
limit=${VMIO_GUEST_TIMEOUT:-120}

fail() { echo "boot_test: FAIL: $*" >&2; exit 1; }

command -v qemu-system-x86_64 >/dev/null ||
	fail "qemu-system-x86_64 is not installed (package qemu-system-x86): run scripts/deps.sh as root"

start=$SECONDS
"$top/scripts/guest/build-image.sh" "$image" >/dev/null || fail "building the guest image failed"
build_s=$((SECONDS - start))

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmio-boot-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Runs in the guest (busybox sh). Each check prints what it saw, so a
# failure's log says why.
cat >"$tmp/test.sh" <<'GUEST'
fail() { echo "boot_test(guest): FAIL: $*"; exit 1; }
for m in virtio_ring virtio virtio_pci vsock vmw_vsock_virtio_transport_common \
	vmw_vsock_virtio_transport failover net_failover virtio_net; do
	grep -q "^$m " /proc/modules || fail "module $m is not loaded"
done
echo "modules: $(cut -d' ' -f1 /proc/modules | tr '\n' ' ')"
# The drivers registered with the virtio bus...
for d in vmw_vsock_virtio_transport virtio_net; do
	[ -d "/sys/bus/virtio/drivers/$d" ] || fail "no virtio driver $d in /sys/bus/virtio/drivers"
done
# ...and virtio_pci found the virtio-net device the host gave us, which
# virtio_net then bound and made into a network interface.
ls /sys/bus/virtio/devices/ | grep -q . || fail "no device on the virtio bus"
for dev in /sys/bus/virtio/devices/*; do
	echo "virtio device ${dev##*/}: id $(cat "$dev/device"), driver $(basename "$(readlink "$dev/driver")")"
done
net=$(ls /sys/bus/virtio/drivers/virtio_net | grep '^virtio' | head -n1)
[ -n "$net" ] || fail "virtio_net bound no device"
ifname=$(ls "/sys/bus/virtio/devices/$net/net" 2>/dev/null | head -n1)
[ -n "$ifname" ] || fail "virtio_net device $net has no network interface"
ip link set "$ifname" up || fail "cannot bring $ifname up"
echo "network interface: $ifname"
echo "BOOT-TEST-OK"
GUEST

log=$image/logs/boot_test.log
# A virtio-net device on a QEMU hub with no other port: the guest driver
# gets a real device to bind, and no packet leaves QEMU (which says so:
# "hub 0 is not connected to host network" is expected).
rc=0
"$top/scripts/guest/run-guest.sh" --name boot_test --image "$image" --no-build --script "$tmp/test.sh" \
	--timeout "$limit" --log "$log" -- \
	-netdev hubport,id=n0,hubid=0 -device virtio-net-pci,netdev=n0,romfile= || rc=$?

case $rc in
0) ;;
124) fail "the guest did not power off within ${limit}s (log: $log)" ;;
125) fail "the guest did not run its test (QEMU failed or the guest crashed; log: $log)" ;;
*) fail "the guest test exited with status $rc (log: $log)" ;;
esac
grep -q '^BOOT-TEST-OK' <(tr -d '\r' <"$log") || fail "the success marker is missing from $log"
echo "boot_test: PASS (image ready in ${build_s}s, total $((SECONDS - start))s)"
