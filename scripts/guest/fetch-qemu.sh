#!/bin/bash
# Fetches bookworm-backports' QEMU (10.0 in 2026) for the 6.12 and 7 guest
# platforms and unpacks it into the build tree: never installed, never in
# the system's apt sources (the system's QEMU stays Debian 12's 7.2).
#
# usage: scripts/guest/fetch-qemu.sh [ROOT]     (default: build/guest)
# Prints the path of the unpacked qemu-system-x86_64.
#
# The packages come through a private apt configuration (platform.sh:
# ROOT/apt/sources.list names bookworm-backports alone, its lists and
# cache stay in ROOT/apt), `apt-get download` into ROOT/qemu-bpo/dl and
# `dpkg-deb -x` into ROOT/qemu-bpo/root:
#   qemu-system-x86     the binary
#   qemu-system-common  its helpers and modules (display, audio: unused)
#   qemu-system-data    option ROMs: pvh.bin (the PVH boot), linuxboot_dma.bin, kvmvapic.bin
#   seabios             bios-256k.bin: QEMU 10 wants seabios >= 1.16.3, Debian 12 has 1.16.2
# run-guest.sh points that QEMU at root/usr/share/{qemu,seabios} (-L) and
# at its modules (QEMU_MODULE_DIR), so nothing of the system's 7.2 is
# mixed in. The shared libraries it needs are all Debian 12's, the same
# list as the system's qemu-system-x86 (scripts/deps.sh installs it, and
# with it them); a missing one is named here.
# Cached: a second run compares a stamp (this script, each package's
# version) and downloads nothing if it still holds.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
root=${1:-$top/build/guest}
mkdir -p "$root"
root=$(cd "$root" && pwd)
dir=$root/qemu-bpo
mkdir -p "$dir"

# shellcheck source=scripts/guest/platform.sh
. "$top/scripts/guest/platform.sh"

die() { echo "fetch-qemu: $*" >&2; exit 1; }
log() { echo "fetch-qemu: $*" >&2; }

for tool in apt-get apt-cache dpkg-deb flock sha256sum ldd; do
	command -v "$tool" >/dev/null || die "'$tool' is missing"
done

exec 9>"$dir/.lock"
flock 9

pkgs=(qemu-system-x86 qemu-system-common qemu-system-data seabios)
bin=$dir/root/usr/bin/qemu-system-x86_64

# The versions the lists name now ("PKG=VERSION" each), from one apt-cache
# call (each costs about a second here, and this runs before every test
# of a 6.12 platform).
versions() {
	local p out=()
	declare -A v=()
	while read -r p ver; do
		[[ -n ${v[$p]:-} ]] || v[$p]=$ver
	done < <(bpo_apt_cache "$root" bookworm-backports show --no-all-versions "${pkgs[@]}" 2>/dev/null |
		awk '/^Package:/ { p = $2 } /^Version:/ { print p, $2 }')
	for p in "${pkgs[@]}"; do
		[[ -n ${v[$p]:-} ]] || return 1
		out+=("$p=${v[$p]}")
	done
	echo "${out[*]}"
}

if ! bpo_refresh "$root" bookworm-backports; then
	# Offline with a usable unpacked QEMU: better than no test at all.
	if [[ -f $dir/stamp && -x $bin ]]; then
		log "cannot reach bookworm-backports; using the cached $(sed -n 's/^packages //p' "$dir/stamp")"
		echo "$bin"
		exit 0
	fi
	die "cannot fetch QEMU from bookworm-backports (above: why)"
fi
want=$(versions) || die "the bookworm-backports lists in $root/apt/lists name no ${pkgs[*]} (is the suite reachable? try: rm -r $root/apt)"

stamp_text=$(
	echo "script $(sha256sum "$0" | cut -d' ' -f1)"
	echo "packages $want"
)
if [[ -f $dir/stamp && $(cat "$dir/stamp") == "$stamp_text" && -x $bin ]]; then
	log "up to date: ${want%% *} (with ${want#* }) from bookworm-backports"
	echo "$bin"
	exit 0
fi

start=$SECONDS
log "fetching $want from bookworm-backports into $dir"
rm -rf "$dir/dl"
mkdir -p "$dir/dl"
# shellcheck disable=SC2086 # one argument a package
if ! (cd "$dir/dl" && bpo_apt_get "$root" bookworm-backports download $want >&2); then
	# The lists may name versions the mirror has replaced since: refresh
	# them once and ask for the versions they name then.
	log "download failed; refreshing the backports lists and retrying once"
	bpo_refresh "$root" bookworm-backports force || die "cannot refresh the bookworm-backports lists"
	want=$(versions) || die "the refreshed bookworm-backports lists name no ${pkgs[*]}"
	stamp_text=$(
		echo "script $(sha256sum "$0" | cut -d' ' -f1)"
		echo "packages $want"
	)
	rm -f "$dir/dl"/*.deb
	# shellcheck disable=SC2086
	(cd "$dir/dl" && bpo_apt_get "$root" bookworm-backports download $want >&2) ||
		die "apt-get download $want from bookworm-backports failed"
fi

# QEMU 10 runs on this system's libraries: its symlinks stay as packaged.
rm -f "$dir/stamp"
unpack_root "$dir" no "$dir"/dl/*.deb || die "cannot unpack the packages in $dir/dl"
[[ -x $dir/root/usr/bin/qemu-system-x86_64 ]] || die "no usr/bin/qemu-system-x86_64 in the unpacked packages ($dir/root)"

# Every library it loads must be on the system (Debian 12's): name the
# missing ones and the package to install, rather than fail at boot.
missing=$(ldd "$bin" 2>&1 | sed -n 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p' | tr '\n' ' ')
[[ -z $missing ]] || die "$bin needs libraries this system lacks: $missing(install the packages that hold them: 'apt-get install qemu-system-x86' brings them all, see scripts/deps.sh)"
"$bin" --version >/dev/null 2>&1 || die "$bin does not run: $("$bin" --version 2>&1 | head -n 3)"

echo "$stamp_text" >"$dir/stamp"
log "unpacked $("$bin" --version | head -n1) in $((SECONDS - start)) s"
echo "$bin"
