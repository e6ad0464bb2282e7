#!/bin/bash
# Builds the Debian 12 (bookworm) root that the system test boots with
# systemd-nspawn: debootstrap's minbase with systemd, the shared libraries
# vmio and the test's tools link to, and the programs the test's clients
# use. It never holds vmio itself: the test installs the package anew on
# each run, in an overlay over this root, which stays pristine.
#
# usage: scripts/system/build-root.sh [CACHE]
#   CACHE defaults to build/sysroot; the root is CACHE/base, whose path is
#   printed. The .debs debootstrap fetches stay in CACHE/debs, so a
#   rebuild downloads only what changed.
#
# The result is cached: a second run compares a stamp of its inputs (this
# script, suite, mirror, package list) and does nothing if they are
# unchanged. Needs root, debootstrap and the network to the mirror.
#
# Environment:
#   VMIO_SYSROOT_MIRROR  the Debian mirror (default http://deb.debian.org/debian)
set -euo pipefail

me=build-root
# shellcheck source=scripts/system/cache.sh
. "$(dirname "$0")/cache.sh"
base=$cache/base

suite=bookworm
mirror=${VMIO_SYSROOT_MIRROR:-http://deb.debian.org/debian}
packages=(
	systemd systemd-sysv dbus # the booted system: PID 1, systemctl, journald
	adduser                   # what a package's maintainer scripts create users and groups with
	iproute2                  # the checks: ip link shows vmio net's TAP
	python3-minimal           # the checks: small socket clients (a vhost-user GET_FEATURES, a datagram)
	libyaml-0-2 libbpf1 libxdp1 # vmio's shared libraries (the .deb Depends on them)
	# dpdk-testpmd, vmio net's VMM in the test as in test_net, is the
	# host's (its package, dpdk-dev, brings all of DPDK's headers and
	# drivers): the libraries it links to, and the two drivers it loads.
	librte-net-virtio23 librte-mempool-ring23
)
testpmd=/usr/bin/dpdk-testpmd

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, and the test boots the root with systemd-nspawn)"
command -v debootstrap >/dev/null || die "'debootstrap' is missing: run scripts/deps.sh (as root)"
[[ -x $testpmd ]] || die "$testpmd is missing: run scripts/deps.sh (as root; package dpdk-dev)"
# The packages of its libraries (dpkg knows libc's by their /lib names
# only, and debootstrap brings those anyway).
mapfile -t -O "${#packages[@]}" packages < <(ldd "$testpmd" | awk '$3 ~ /^\// { print $3 }' |
	xargs readlink -f | { xargs dpkg -S 2>/dev/null || true; } | cut -d: -f1 | sort -u)

# Tests may run in parallel: one builds, the others wait and find it fresh.
exec 9>"$cache/.lock"
flock 9

stamp_text=$(
	echo "script $(sha256sum "$0" | cut -d' ' -f1)"
	echo "suite $suite"
	echo "mirror $mirror"
	echo "packages ${packages[*]}"
)
if [[ -f $cache/stamp && $(cat "$cache/stamp") == "$stamp_text" && -x $base/lib/systemd/systemd ]]; then
	log "up to date: $base"
	echo "$base"
	exit 0
fi

start=$SECONDS
log "debootstrapping $suite into $base (from $mirror; packages kept in $cache/debs)"
rm -f "$cache/stamp"
rm -rf "$base" "$base.new"
mkdir -p "$cache/debs"
include=$(IFS=,; echo "${packages[*]}")
debootstrap --variant=minbase --include="$include" --cache-dir="$cache/debs" \
	"$suite" "$base.new" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
	die "debootstrap failed; the end of $cache/debootstrap.log: $(tail -n 20 "$cache/debootstrap.log")"

# A machine of its own: systemd makes a machine ID on its first boot of
# each run (the overlay forgets it), and no console login waits on a tty.
: >"$base.new/etc/machine-id"
echo vmio-system >"$base.new/etc/hostname"
chroot "$base.new" systemctl mask console-getty.service getty@tty1.service >/dev/null 2>&1

mv "$base.new" "$base"
echo "$stamp_text" >"$cache/stamp"
log "built $base in $((SECONDS - start)) s ($(du -sh "$base" | cut -f1))"
echo "$base"
