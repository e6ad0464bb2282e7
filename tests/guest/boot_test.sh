#!/bin/bash
# Guest smoke test: boots a guest platform's Debian kernel + busybox
# initramfs that scripts/guest/build-image.sh makes (building it if
# needed), and checks in the guest that the virtio, vsock and virtio-net
# drivers are there (as modules or built in) and bound to the devices
# given to it. Every later guest test stands on this.
#
# usage: tests/guest/boot_test.sh [--platform NAME] [--image ROOT]
#   (defaults: 6.1, build/guest; the image is ROOT/NAME)
# Exit 0 on success; non-zero with a message naming what failed. A missing
# QEMU is a failure, not a skip: the guest tests are part of the suite.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
root=$top/build/guest
platform=6.1
while (($#)); do
	case $1 in
	--platform) platform=$2; shift 2 ;;
	--image) root=$2; shift 2 ;;
	*) echo "usage: $0 [--platform NAME] [--image ROOT]" >&2; exit 2 ;;
	esac
done
# A boot takes ~5 s under TCG on this 2-core machine; leave room for a
# loaded CI machine, but never hang.
limit=${VMIO_GUEST_TIMEOUT:-120}

fail() { echo "boot_test: FAIL: $*" >&2; exit 1; }

# shellcheck source=scripts/guest/platform.sh
. "$top/scripts/guest/platform.sh"
platform_check "$platform" || fail "--platform $platform"

start=$SECONDS
image=$("$top/scripts/guest/build-image.sh" --platform "$platform" "$root") ||
	fail "building the guest image for platform $platform failed"
build_s=$((SECONDS - start))
qemu=$(guest_qemu "$image" 2>&1) || fail "$qemu"
echo "boot_test: platform $platform: Linux $(cat "$image/kernel-release"), $("$qemu" --version | head -n1) ($qemu)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmio-boot-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Runs in the guest (busybox sh). Each check prints what it saw, so a
# failure's log says why.
cat >"$tmp/test.sh" <<'GUEST'
fail() { echo "boot_test(guest): FAIL: $*"; exit 1; }
# A module counts as present loaded or built in: which one a kernel
# builds in is its own choice (6.12 builds virtio_ring and virtio in).
# /sys/module/NAME exists for both kinds once the code is in (a built-in
# one only if it has parameters or a version, so modules.builtin, which
# build-image.sh copies from the kernel package, is asked too).
builtin() { grep -qE "/$(echo "$1" | sed 's/_/[_-]/g')\.ko$" /lib/modules/modules.builtin 2>/dev/null; }
loaded= built_in=
for m in virtio_ring virtio virtio_pci vsock vmw_vsock_virtio_transport_common \
	vmw_vsock_virtio_transport failover net_failover virtio_net; do
	if grep -q "^$m " /proc/modules; then
		loaded="$loaded $m"
	elif [ -d "/sys/module/$m" ] || builtin "$m"; then
		built_in="$built_in $m"
	else
		fail "module $m is neither loaded nor built in"
	fi
done
echo "modules loaded:$loaded"
echo "built in:${built_in:- none}"
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
