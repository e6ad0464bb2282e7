#!/bin/bash
# Fetches trixie-backports' QEMU (11.1 in December 2026) for the guest
# platform 7-q11, with the Debian 13 (trixie) libraries it needs, and
# unpacks them into the build tree: never installed, never in the
# system's apt sources, never chrooted into (the system's QEMU stays
# Debian 12's 7.2).
#
# usage: scripts/guest/fetch-qemu11.sh [ROOT]     (default: build/guest)
# Prints the path of a wrapper, ROOT/qemu11/bin/qemu-system-x86_64, that
# runs it.
#
# QEMU 11.1 of trixie-backports is built against trixie's libraries
# (glibc 2.41, ...): Debian 12's cannot run it. So the packages and their
# whole dependency closure come from trixie and trixie-backports, through
# a private apt configuration (platform.sh: ROOT/apt-trixie+trixie-
# backports/sources.list names the two suites, its lists and cache stay
# there; the dpkg status is empty, so apt resolves the closure from
# nothing), `apt-get download` into ROOT/qemu11/debs (kept: a rerun, or a
# new QEMU with the same libraries, downloads only what it lacks) and
# `dpkg-deb -x` into ROOT/qemu11/root, no maintainer script run. QEMU runs
# from there through the root's own dynamic loader:
#   ROOT/qemu11/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
#     --inhibit-cache --library-path R/usr/lib/x86_64-linux-gnu:R/lib/x86_64-linux-gnu
#     R/usr/bin/qemu-system-x86_64 ARGS...
# with QEMU_MODULE_DIR=R/usr/lib/x86_64-linux-gnu/qemu (run-guest.sh adds
# -L R/usr/share/qemu -L R/usr/share/seabios, as for every QEMU outside
# /usr): it sees the host's files, sockets and /dev as any process does,
# and nothing is ever mounted, so removing the root is a plain rm -rf.
# --inhibit-cache: the host's /etc/ld.so.cache names Debian 12's
# libraries; every library must resolve inside the root, which is checked
# here (`ld.so --list`). Absolute symlinks in the packages (the loader's
# /lib64 link, option ROMs linked into /usr/lib/ipxe) are made relative,
# so that they point into the root and not at the host's files.
# Cached: a second run compares a stamp (this script, every package's
# version) and downloads nothing if it still holds. Each run logs where
# QEMU, seabios and glibc came from (release and version), and
# ROOT/qemu11/packages lists every package: "PACKAGE VERSION SUITE".
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
root=${1:-$top/build/guest}
mkdir -p "$root"
root=$(cd "$root" && pwd)
dir=$root/qemu11
mkdir -p "$dir"
suite=trixie+trixie-backports

# shellcheck source=scripts/guest/platform.sh
. "$top/scripts/guest/platform.sh"

die() { echo "fetch-qemu11: $*" >&2; exit 1; }
log() { echo "fetch-qemu11: $*" >&2; }

for tool in apt-get apt-cache dpkg-deb flock sha256sum; do
	command -v "$tool" >/dev/null || die "'$tool' is missing"
done

exec 9>"$dir/.lock"
flock 9

# From backports: QEMU and what it wants newer than trixie has; the rest
# of the closure is whatever apt picks (trixie's, unless a backport is
# required).
want_pkgs=(qemu-system-x86 qemu-system-common qemu-system-data seabios)
wrapper=$dir/bin/qemu-system-x86_64
multiarch=x86_64-linux-gnu

# The closure, "PACKAGE VERSION SUITE" a line, from a simulated install on
# an empty dpkg status (apt-get -s: "Inst PKG (VERSION ORIGIN:RELEASE
# [ARCH])", ORIGIN "Debian" or "Debian Backports").
closure() {
	local req=() p
	for p in "${want_pkgs[@]}"; do req+=("$p/trixie-backports"); done
	bpo_apt_get "$root" "$suite" -s install --no-install-recommends -o APT::Architecture=amd64 "${req[@]}" 2>&1 |
		awk '/^Inst / {
			v = $3; sub(/^\(/, "", v)
			s = ($0 ~ /\(.* Debian Backports:/) ? "trixie-backports" : "trixie"
			print $2, v, s
		}' | LC_ALL=C sort
}

if ! bpo_refresh "$root" "$suite"; then
	if [[ -f $dir/stamp && -x $wrapper ]]; then
		log "cannot reach trixie/trixie-backports; using the cached $(sed -n 's/^packages //p' "$dir/stamp" | cut -d' ' -f1)"
		echo "$wrapper"
		exit 0
	fi
	die "cannot fetch QEMU from trixie-backports (above: why)"
fi
pkgs=$(closure)
grep -q '^qemu-system-x86 .* trixie-backports$' <<<"$pkgs" ||
	die "apt cannot install qemu-system-x86 from trixie-backports with trixie's packages: $(bpo_apt_get "$root" "$suite" -s install --no-install-recommends qemu-system-x86/trixie-backports 2>&1 | tail -n 5)"
ver_of() { awk -v p="$1" '$1 == p { print $2 " from " $3 }' <<<"$pkgs"; }
summary="qemu-system-x86 $(ver_of qemu-system-x86), seabios $(ver_of seabios), on libc6 $(ver_of libc6) ($(wc -l <<<"$pkgs") packages)"

stamp_text=$(
	echo "script $(sha256sum "$0" | cut -d' ' -f1)"
	# qemu-system-x86 first: build-image.sh reads its version from here.
	echo "packages qemu-system-x86=$(awk '$1 == "qemu-system-x86" { print $2 }' <<<"$pkgs") $(awk '{ printf "%s=%s ", $1, $2 }' <<<"$pkgs")"
)
if [[ -f $dir/stamp && $(cat "$dir/stamp") == "$stamp_text" && -x $wrapper ]]; then
	log "up to date: $summary"
	echo "$wrapper"
	exit 0
fi

# --- download what the cache lacks ---------------------------------------
start=$SECONDS
mkdir -p "$dir/debs"
missing=()
declare -A keep=()
while read -r p v _; do
	f=${p}_${v//:/%3a}_
	keep[$f]=1
	compgen -G "$dir/debs/$f*.deb" >/dev/null || missing+=("$p=$v")
done <<<"$pkgs"
if ((${#missing[@]})); then
	log "fetching ${#missing[@]} of $(wc -l <<<"$pkgs") packages from trixie and trixie-backports into $dir/debs"
	if ! (cd "$dir/debs" && bpo_apt_get "$root" "$suite" download "${missing[@]}" >&2); then
		die "apt-get download from trixie/trixie-backports failed (stale lists? rm -r $(bpo_dir "$root" "$suite") and run again)"
	fi
fi
# Versions no longer in the closure: of no use any more.
for deb in "$dir"/debs/*.deb; do
	b=${deb##*/}
	[[ -n ${keep[${b%_*.deb}_]:-} ]] || rm -f "$deb"
done

# --- unpack (platform.sh's unpack_root), its symlinks into the root -------
rm -f "$dir/stamp"
unpack_root "$dir" yes "$dir"/debs/*.deb || die "cannot unpack the packages in $dir/debs"

r=$dir/root
loader=$r/usr/lib/$multiarch/ld-linux-x86-64.so.2
[[ -e $loader ]] || loader=$r/lib/$multiarch/ld-linux-x86-64.so.2
[[ -e $loader ]] || die "no ld-linux-x86-64.so.2 in the unpacked libc6 ($r)"
loader=$(realpath "$loader")
[[ $loader == "$r"/* ]] || die "the loader $loader is outside the root $r"
[[ -x $r/usr/bin/qemu-system-x86_64 ]] || die "no usr/bin/qemu-system-x86_64 in the unpacked packages ($r)"
libpath=$r/usr/lib/$multiarch:$r/lib/$multiarch

# The wrapper: exec, so that its process is QEMU's (run-guest.sh waits
# for it and kills it). QEMU_MODULE_DIR unless the caller set one.
mkdir -p "$dir/bin"
cat >"$dir/bin/qemu-system-x86_64.new" <<EOF
#!/bin/sh
# trixie-backports' QEMU ($(ver_of qemu-system-x86)) on trixie's libraries
# (libc6 $(ver_of libc6)), unpacked in $r by
# scripts/guest/fetch-qemu11.sh: run through that root's own loader, with
# its libraries only (not the host's ld.so.cache) and its modules.
export QEMU_MODULE_DIR=\${QEMU_MODULE_DIR:-$r/usr/lib/$multiarch/qemu}
exec "$loader" --inhibit-cache --library-path "$libpath" "$r/usr/bin/qemu-system-x86_64" "\$@"
EOF
chmod 755 "$dir/bin/qemu-system-x86_64.new"
mv "$dir/bin/qemu-system-x86_64.new" "$wrapper"

# Every library resolves inside the root (none from the host's /lib).
libs=$("$loader" --inhibit-cache --library-path "$libpath" --list "$r/usr/bin/qemu-system-x86_64" 2>&1) ||
	die "$r/usr/bin/qemu-system-x86_64 cannot be loaded: $libs"
outside=$(awk '$2 == "=>" && $3 !~ /^\// { print $1 " (" $3 " " $4 ")" } $2 == "=>" && $3 ~ /^\// && index($3, r) != 1 { print $1 " => " $3 }' r="$r/" <<<"$libs")
[[ -z $outside ]] || die "libraries of QEMU 11 not resolved inside $r: $outside"
"$wrapper" --version >/dev/null 2>&1 || die "$wrapper does not run: $("$wrapper" --version 2>&1 | head -n 3)"

echo "$pkgs" >"$dir/packages"
echo "$stamp_text" >"$dir/stamp"
log "unpacked $("$wrapper" --version | head -n1) in $((SECONDS - start)) s: $summary; the packages in $dir/packages"
echo "$wrapper"
