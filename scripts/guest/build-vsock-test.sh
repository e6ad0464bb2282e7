#!/bin/bash
# Builds the Linux kernel's own vsock test suite (tools/testing/vsock:
# vsock_test and vsock_diag_test) as static programs for the guest, from
# one of Debian's linux-source-X.Y packages, and prints the directory they
# are in.
#
# usage: scripts/guest/build-vsock-test.sh [--source PACKAGE] [--suite SUITE] [ROOT]
#   PACKAGE  linux-source-6.1 (default), linux-source-6.12, linux-source-7.3:
#            the suite of the guest kernel's version (6.12's has more
#            cases); each platform's is named in platform.sh
#            (platform_linux_source), with the apt it comes from
#   SUITE    system (default: the host's apt sources) or a backports
#            suite reached through platform.sh's private apt list
#            (trixie-backports has linux-source-7.X)
#   ROOT     the guest cache (default: build/guest)
#
# The package is fetched with `apt-get download` into
# ROOT/vsock_test/PACKAGE/dl (never installed); only tools/testing/vsock
# and tools/include (its Makefile's include path; the rest comes from
# linux-libc-dev) are unpacked from the kernel tarball inside it, and
# built with the kernel's own Makefile (`make LDFLAGS=-static
# vsock_test vsock_diag_test`). The result, ROOT/vsock_test/PACKAGE/
# {vsock_test,vsock_diag_test}, is cached: a second run only compares a
# stamp of its inputs (this script, package version, compiler).
#
# Never run these on the build machine: AF_VSOCK there reaches its own
# hypervisor. tests/guest/linux_vsock_test.sh runs them inside two guests.
#
# Environment: VMIO_LINUX_SOURCE_DEB   a linux-source-X.Y .deb to use
# instead of downloading one (its own package name replaces --source).
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
pkg=linux-source-6.1
suite=system
while (($#)); do
	case $1 in
	--source) pkg=$2; shift 2 ;;
	--suite) suite=$2; shift 2 ;;
	-*) echo "build-vsock-test: unknown option '$1' (usage: build-vsock-test.sh [--source PACKAGE] [--suite SUITE] [ROOT])" >&2; exit 2 ;;
	*) break ;;
	esac
done
cache=${1:-$top/build/guest}
if [[ -n ${VMIO_LINUX_SOURCE_DEB:-} ]]; then
	[[ -f $VMIO_LINUX_SOURCE_DEB ]] || { echo "build-vsock-test: VMIO_LINUX_SOURCE_DEB=$VMIO_LINUX_SOURCE_DEB does not exist" >&2; exit 1; }
	pkg=$(dpkg-deb -f "$VMIO_LINUX_SOURCE_DEB" Package)
fi
[[ $pkg =~ ^linux-source-[0-9]+\.[0-9]+$ ]] || { echo "build-vsock-test: --source must be linux-source-X.Y, not '$pkg'" >&2; exit 2; }
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
dir=$cache/vsock_test/$pkg
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# shellcheck source=scripts/guest/fetch-deb.sh
. "$top/scripts/guest/fetch-deb.sh"
# shellcheck source=scripts/guest/platform.sh
. "$top/scripts/guest/platform.sh"

die() { echo "build-vsock-test: $*" >&2; exit 1; }
log() { echo "build-vsock-test: $*" >&2; }

for tool in dpkg-deb xz make cc flock sha256sum; do
	command -v "$tool" >/dev/null || die "'$tool' is missing: run scripts/deps.sh (as root)"
done

# Tests may run in parallel: one builds, the others wait and find it fresh.
exec 9>"$dir/.lock"
flock 9

deb=${VMIO_LINUX_SOURCE_DEB:-}
if [[ -n $deb ]]; then
	[[ -f $deb ]] || die "VMIO_LINUX_SOURCE_DEB=$deb does not exist"
	ver=$(dpkg-deb -f "$deb" Version)
	from=VMIO_LINUX_SOURCE_DEB
elif [[ $suite == system ]]; then
	from="the system's apt ($(system_release))"
	ver=$(apt-cache show --no-all-versions "$pkg" 2>/dev/null | sed -n 's/^Version: *//p' | head -n1 || true)
else
	from=$suite
	bpo_refresh "$cache" "$suite" || log "cannot refresh the $suite lists (above: why)"
	ver=$(bpo_apt_cache "$cache" "$suite" show --no-all-versions "$pkg" 2>/dev/null | sed -n 's/^Version: *//p' | head -n1 || true)
	mapfile -t fetch_apt_opts < <(bpo_opts "$cache" "$suite")
fi
if [[ -z $deb ]]; then
	if [[ -z $ver ]]; then
		# No apt lists (fresh container): a cached build will do.
		if [[ -f $dir/stamp && -x $dir/vsock_test ]]; then
			log "apt lists do not name $pkg; using the cached build ($(sed -n 's/^package //p' "$dir/stamp"))"
			echo "$dir"
			exit 0
		fi
		[[ $suite == system ]] || die "the $suite lists in $(bpo_dir "$cache" "$suite")/lists name no $pkg"
		die "apt does not know $pkg: run 'apt-get update' (as root) first"
	fi
fi

stamp_text=$(
	echo "script $(sha256sum "$0" | cut -d' ' -f1)"
	echo "package $pkg $ver"
	echo "cc $(cc --version | head -n1)"
)
if [[ -f $dir/stamp && $(cat "$dir/stamp") == "$stamp_text" && -x $dir/vsock_test ]]; then
	log "up to date: $pkg $ver from $from"
	echo "$dir"
	exit 0
fi

start=$SECONDS
if [[ -z $deb ]]; then
	deb=$(fetch_deb "$dir/dl" "$pkg" "$ver") ||
		die "apt-get download $pkg=$ver from $from failed (as root, 'apt-get update' may help; a backports suite's lists are refreshed once a day)"
fi

# The .deb holds /usr/src/linux-source-6.1.tar.xz (about 140 MB); from
# that, only the test directory and the tools/include it names.
work=$dir/.work
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
log "unpacking tools/testing/vsock from $(basename "$deb")"
dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards "./usr/src/$pkg.tar.xz" | xz -dc |
	tar -x -C "$work" --strip-components=1 --wildcards \
		"$pkg/tools/testing/vsock" "$pkg/tools/include"
[[ -f $work/tools/testing/vsock/vsock_test.c ]] || die "no tools/testing/vsock/vsock_test.c in $deb"
# Static: the guest's userland is busybox alone. (glibc warns that a static
# getaddrinfo needs its NSS libraries at run time; the control channel
# passes a numeric address, which needs none.)
make -s -C "$work/tools/testing/vsock" LDFLAGS=-static vsock_test vsock_diag_test >&2 2> >(grep -v 'getaddrinfo\|in function .control_init' >&2) ||
	die "building vsock_test failed"

rm -f "$dir/stamp"
mv "$work/tools/testing/vsock/vsock_test" "$work/tools/testing/vsock/vsock_diag_test" "$dir/"
echo "$stamp_text" >"$dir/stamp"
log "built vsock_test and vsock_diag_test from $pkg $ver ($from) in $((SECONDS - start)) s, in $dir"
echo "$dir"
