#!/bin/bash
# Builds a Debian root of a given release, cached per release, for the
# system tests. Two kinds:
#
#   boot   (the default) the root that tests/system/systemd_test.sh boots
#          with systemd-nspawn: debootstrap's minbase with systemd, the
#          shared libraries vmio links to, the programs the test's clients
#          use, and that release's own dpdk-testpmd (vmio net's VMM in the
#          test) in /usr/local/bin with the libraries and the two drivers
#          it loads. It never holds vmio itself: the test installs the
#          package anew on each run, in an overlay over this root, which
#          stays pristine.
#   build  the root a copy of the tree builds and tests in
#          (tests/system/debian_build_test.sh, and scripts/system/build-deb.sh
#          for a release other than the host's): minbase and what the
#          tree's scripts/deps.sh installs there (`deps.sh deb`, lintian
#          included). Used through an overlay too.
#
# usage: scripts/system/build-root.sh [--release CODENAME] [--kind boot|build] [CACHE]
#   CODENAME defaults to bookworm (Debian 12); trixie is Debian 13.
#   CACHE defaults to build/sysroot/CODENAME; the root is CACHE/KIND, whose
#   path is printed. The .debs debootstrap fetches stay in CACHE/debs, and
#   those apt fetches in the root afterwards (deps.sh's, testpmd's) in
#   CACHE/apt: a rebuild downloads only what changed, and none at all if
#   nothing did (but for apt's package lists).
#
# The result is cached: a second run compares a stamp of its inputs (this
# script, release, mirror, package list; deps.sh for the build root) and
# does nothing if they are unchanged. Needs root, debootstrap and the
# network to the mirror (only when it builds).
#
# Environment:
#   VMIO_SYSROOT_MIRROR  the Debian mirror (default http://deb.debian.org/debian)
set -euo pipefail

me=build-root
release=bookworm
kind=boot
while (($#)); do
	case $1 in
	--release) release=$2; shift 2 ;;
	--kind) kind=$2; shift 2 ;;
	-*) echo "$me: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
# shellcheck source=scripts/system/cache.sh
. "$(dirname "$0")/cache.sh"
[[ $kind == boot || $kind == build ]] || die "--kind is boot or build, not $kind"
[[ $release =~ ^[a-z]+$ ]] || die "--release takes a Debian codename (bookworm, trixie), not $release"
root=$cache/$kind
in_root=$top/scripts/system/in-root.sh

mirror=${VMIO_SYSROOT_MIRROR:-http://deb.debian.org/debian}
# The same names on every release (none carries a version): the release
# picks the versions.
case $kind in
boot)
	packages=(
		systemd systemd-sysv dbus # the booted system: PID 1, systemctl, journald
		adduser                   # what a package's maintainer scripts create users and groups with
		iproute2                  # the checks: ip link shows vmio net's TAP
		python3-minimal           # the checks: small socket clients (a vhost-user GET_FEATURES, a datagram)
		libyaml-0-2 libbpf1 libxdp1 # vmio's shared libraries (the .deb Depends on them)
	)
	;;
build)
	packages=() # minbase; deps.sh installs the rest with apt
	deps_key="deps.sh $(sha256sum "$top/scripts/deps.sh" | cut -d' ' -f1)"
	;;
esac

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "'debootstrap' is missing: run scripts/deps.sh (as root)"
[[ -f /usr/share/debootstrap/scripts/$release ]] ||
	die "this debootstrap does not know '$release' (/usr/share/debootstrap/scripts/$release)"

# Tests may run in parallel: one builds, the others wait and find it fresh.
exec 9>"$cache/.lock"
flock 9

stamp_text=$(
	echo "script $(sha256sum "$0" | cut -d' ' -f1)"
	echo "release $release"
	echo "kind $kind"
	echo "mirror $mirror"
	echo "packages ${packages[*]}"
	echo "${deps_key:-}"
)
stamp=$cache/$kind.stamp
if [[ -f $stamp && $(cat "$stamp") == "$stamp_text" && -x $root/bin/sh ]]; then
	log "up to date: $root"
	echo "$root"
	exit 0
fi

need_mirror "$mirror"
start=$SECONDS
log "debootstrapping $release ($kind) into $root (from $mirror; packages kept in $cache/debs and $cache/apt)"
rm -f "$stamp"
safe_rm "$root" "$root.new"
mkdir -p "$cache/debs" "$cache/apt/partial"
include=()
((${#packages[@]} == 0)) || include=(--include="$(IFS=,; echo "${packages[*]}")")
debootstrap --variant=minbase "${include[@]}" --cache-dir="$cache/debs" \
	"$release" "$root.new" "$mirror" >"$cache/$kind.log" 2>&1 ||
	die "debootstrap failed; the end of $cache/$kind.log: $(tail -n 20 "$cache/$kind.log")"

# apt in the root keeps what it fetches (apt-get keeps its .debs) in the
# cache.
in_new() { "$in_root" --bind "$cache/apt:/var/cache/apt/archives" "$root.new" "$@"; }

case $kind in
boot)
	# That release's dpdk-testpmd (in dpdk-dev, which also brings every
	# header of DPDK): the binary alone, the libraries its package
	# Depends on (DPDK's own carry their ABI in their names: 23 on
	# Debian 12, 25 on 13), and the drivers it loads at run time, named
	# with the same ABI.
	log "adding $release's dpdk-testpmd"
	# shellcheck disable=SC2016 # for the inner shell
	in_new sh -ec '
		apt-get update -qq
		cd /var/cache/apt/archives
		deb=$(ls dpdk-dev_*.deb 2>/dev/null | tail -n1)
		want=$(apt-cache policy dpdk-dev | awk "/Candidate:/ { print \$2 }" | sed "s/^[0-9]*://")
		case $deb in *_${want}_*) ;; *) apt-get download -q dpdk-dev; deb=$(ls dpdk-dev_${want}_*.deb) ;; esac
		mkdir -p /tmp/x
		dpkg-deb -x "$deb" /tmp/x
		install -m 755 /tmp/x/usr/bin/dpdk-testpmd /usr/local/bin/dpdk-testpmd
		deps=$(dpkg-deb -f "$deb" Depends | tr "," "\n" | sed "s/[(|].*//; s/ //g" |
			grep -v -e "^libdpdk-dev$" -e "^python3$" -e "^$")
		abi=$(echo "$deps" | sed -n "s/^librte-eal\([0-9][0-9]*\)$/\1/p")
		[ -n "$abi" ] || { echo "no librte-eal in dpdk-dev Depends" >&2; exit 1; }
		apt-get install -y -qq --no-install-recommends $deps librte-net-virtio$abi librte-mempool-ring$abi
		if ldd /usr/local/bin/dpdk-testpmd | grep "not found"; then exit 1; fi
	' >>"$cache/$kind.log" 2>&1 ||
		die "installing dpdk-testpmd in the root failed; the end of $cache/$kind.log: $(tail -n 20 "$cache/$kind.log")"
	# A machine of its own: systemd makes a machine ID on its first boot of
	# each run (the overlay forgets it), and no console login waits on a tty.
	: >"$root.new/etc/machine-id"
	echo vmio-system >"$root.new/etc/hostname"
	chroot "$root.new" systemctl mask console-getty.service getty@tty1.service >/dev/null 2>&1
	;;
build)
	log "installing what scripts/deps.sh deb installs"
	install -D -m 755 "$top/scripts/deps.sh" "$root.new/usr/local/lib/vmio-build-root/deps.sh"
	in_new /usr/local/lib/vmio-build-root/deps.sh deb >>"$cache/$kind.log" 2>&1 ||
		die "scripts/deps.sh deb failed in the root; the end of $cache/$kind.log: $(tail -n 20 "$cache/$kind.log")"
	rm -rf "$root.new/usr/local/lib/vmio-build-root"
	;;
esac

mv "$root.new" "$root"
echo "$stamp_text" >"$stamp"
log "built $root in $((SECONDS - start)) s ($(du -sh "$root" | cut -f1))"
echo "$root"
