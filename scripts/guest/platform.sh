# shellcheck shell=bash
# Sourced by the guest scripts: the guest platforms, each a guest kernel
# and the QEMU that boots it, and the private apt configurations that
# reach the backports suites without touching the system's sources.
#
#   platform  kernel                                        QEMU
#   6.1       linux-image-amd64 of the system's apt          the system's (qemu-system-x86, 7.2)
#             (Debian 12: Linux 6.1; on another host its own)
#   6.12      the newest linux-image-6.12.*+deb12-amd64      bookworm-backports' qemu-system-x86 (10.0)
#             (Debian 12's security suite)
#   6.12-bpo  linux-image-amd64 of bookworm-backports       the same QEMU 10.0
#             (6.12.95 in 2026: the 6.12.94+ range that resets a
#             connection past a packet count, see issue 21)
#   7         the newest linux-image-7.*-amd64 of           the same QEMU 10.0
#             trixie-backports (7.3.4 in December 2026): a
#             meta package since Linux 7, the kernel in
#             linux-binary-VER (usr/lib/modules/VER/vmlinuz),
#             the modules in linux-modules-VER and
#             modules.builtin in linux-base-VER
#   7-q11     platform 7's kernel (its downloads shared)    trixie-backports' qemu-system-x86 (11.1),
#                                                           on trixie's libraries (fetch-qemu11.sh)
#
# Each platform's image lives in ROOT/PLATFORM (ROOT: build/guest), with
# a file `qemu` naming the QEMU binary it boots under and a file `source`
# saying where its kernel and QEMU came from; QEMU 10 is unpacked into
# ROOT/qemu-bpo by fetch-qemu.sh, the private apt state of a backports
# suite into ROOT/apt (bookworm-backports) or ROOT/apt-SUITE (others,
# e.g. ROOT/apt-trixie-backports). QEMU 11 and the trixie libraries it
# runs on are unpacked into ROOT/qemu11 by fetch-qemu11.sh (apt state in
# ROOT/apt-trixie+trixie-backports) and started through that root's own
# loader, never installed, chrooted or bind-mounted.
#
# Environment (for every platform): VMIO_GUEST_KERNEL_DEB (a kernel
# package instead of the platform's, build-image.sh), VMIO_GUEST_QEMU (a
# QEMU binary instead of the platform's, run-guest.sh).

guest_platforms=(6.1 6.12 6.12-bpo 7 7-q11)

# Fails (status 1, a message on stderr) for a name not in the table.
platform_check() { # platform
	local p
	for p in "${guest_platforms[@]}"; do
		[[ $1 == "$p" ]] && return 0
	done
	echo "unknown guest platform '$1' (known: ${guest_platforms[*]})" >&2
	return 1
}

# The platform whose kernel a platform boots: itself, but 7-q11 boots
# platform 7's (the same packages, fetched once into ROOT/7/dl) under
# another QEMU.
platform_kernel_platform() { # platform
	case $1 in
	7-q11) echo 7 ;;
	*) echo "$1" ;;
	esac
}

# The QEMU a platform boots under, a "kind": system (the host's apt and
# QEMU), bpo (bookworm-backports' 10.0 on the host's libraries),
# trixie-bpo (trixie-backports' 11.1 on trixie's libraries, through the
# unpacked root's own loader).
platform_qemu_kind() { # platform
	case $1 in
	6.1) echo system ;;
	7-q11) echo trixie-bpo ;;
	*) echo bpo ;;
	esac
}

# What a fetched QEMU kind is: "SCRIPT DIR SUITE", the script under
# scripts/guest/ that fetches it and prints its binary, its directory
# under ROOT (whose `stamp` has a line "packages qemu-system-x86=VERSION
# ..."), the suite it comes from.
qemu_kind_fetch() { # kind
	case $1 in
	bpo) echo "fetch-qemu.sh qemu-bpo bookworm-backports" ;;
	trixie-bpo) echo "fetch-qemu11.sh qemu11 trixie-backports" ;;
	*)
		echo "qemu_kind_fetch: no fetched QEMU of kind '$1'" >&2
		return 1
		;;
	esac
}

# Where a platform's kernel comes from: "system" (the host's apt
# sources) or the backports suite reached through a private list.
platform_kernel_suite() { # platform
	case $(platform_kernel_platform "$1") in
	6.12-bpo) echo bookworm-backports ;;
	7) echo trixie-backports ;;
	*) echo system ;;
	esac
}

# The source package the kernel's own vsock tests are built from, and the
# apt it comes from ("PACKAGE SUITE", SUITE as platform_kernel_suite's
# but "system" for the 6.x platforms, whose sources Debian 12 has): the
# same minor version as the guest kernel, whose suite has its cases. With
# the image built, its kernel says which (IMAGE/kernel-release: 7.3.4+...
# -> linux-source-7.3; on a host that is not Debian 12, platform 6.1's
# kernel is that host's, 6.12 on Debian 13); without it, 6.x's usual one.
# Platform 7 needs its image: its minor version moves with backports.
platform_linux_source() { # platform [image dir]
	local rel suite=system
	set -- "$(platform_kernel_platform "$1")" "${2:-}"
	[[ $1 != 7 ]] || suite=$(platform_kernel_suite 7)
	if rel=$(cat "${2:-/nonexistent}/kernel-release" 2>/dev/null) && [[ $rel =~ ^([0-9]+)\.([0-9]+) ]]; then
		echo "linux-source-${BASH_REMATCH[1]}.${BASH_REMATCH[2]} $suite"
		return 0
	fi
	case $1 in
	6.1) echo "linux-source-6.1 system" ;;
	7)
		echo "platform_linux_source: platform 7 needs its image's kernel-release (${2:-no image given})" >&2
		return 1
		;;
	*) echo "linux-source-6.12 system" ;;
	esac
}

# The release the host's apt serves, from /etc/os-release ("Debian GNU/
# Linux 12 (bookworm)"): what the "system" kernel and QEMU are.
system_release() {
	local PRETTY_NAME='' ID='' VERSION_ID=''
	# shellcheck disable=SC1091
	[[ -r /etc/os-release ]] && . /etc/os-release
	echo "${PRETTY_NAME:-${ID:-unknown} ${VERSION_ID:-}}"
}

# --- a backports suite through a private apt configuration -------------
# Never the system's sources or lists: apt reads a list naming the one
# suite (bookworm-backports, trixie-backports) and keeps its lists and
# cache under ROOT/apt (bookworm-backports, the first) or ROOT/apt-SUITE,
# and `apt-get download` fetches into the current directory without
# installing anything. Nor the system's dpkg status: with it, apt-cache
# would name the installed QEMU 7.2 as a version of qemu-system-x86
# whenever the backports lists are missing. Every helper takes the root
# and the suite first.
bpo_dir() { # root, suite -> the suite's apt directory
	case $2 in
	bookworm-backports) echo "$1/apt" ;;
	*) echo "$1/apt-$2" ;;
	esac
}
# A "suite" may also name several, joined by '+' (trixie+trixie-backports:
# a release and its backports, as QEMU 11's dependency closure needs),
# with one sources.list line each and one apt directory for them all.
bpo_suites() { # suite -> the suites it names, one a line
	tr '+' '\n' <<<"$1"
}
bpo_suite_line() { # suite -> its sources.list line(s)
	local s
	while read -r s; do
		echo "deb http://deb.debian.org/debian $s main"
	done < <(bpo_suites "$1")
}
# Whether the suite's lists are all there (each suite's Packages file).
bpo_have_lists() { # apt directory, suite
	local s
	while read -r s; do
		compgen -G "$1/lists/*_dists_${s}_*Packages*" >/dev/null || return 1
	done < <(bpo_suites "$2")
}
bpo_opts() { # root, suite -> apt options, one a line
	local d
	d=$(bpo_dir "$1" "$2")
	printf '%s\n' -o "Dir::Etc::sourcelist=$d/sources.list" -o Dir::Etc::sourceparts=/dev/null \
		-o "Dir::State::Lists=$d/lists" -o "Dir::Cache=$d/cache" -o Dir::State::status=/dev/null -q
	# As root, apt drops to the _apt user to download, who may not be
	# able to write into the build tree.
	[[ $(id -u) -ne 0 ]] || printf '%s\n' -o APT::Sandbox::User=root
}
bpo_apt_get() { # root, suite, apt-get arguments...
	local opts
	mapfile -t opts < <(bpo_opts "$1" "$2")
	shift 2
	apt-get "${opts[@]}" "$@"
}
bpo_apt_cache() { # root, suite, apt-cache arguments...
	local opts
	mapfile -t opts < <(bpo_opts "$1" "$2")
	shift 2
	apt-cache "${opts[@]}" "$@"
}

# Makes sure the suite's private lists exist and are at most a day old
# (backports replaces versions, and a fresh clone has none): `apt-get
# update` of the one list, under a lock. An update that fails with lists
# already there keeps them (with a warning); with none it fails, saying
# why. force: refresh whatever their age (a download failed: stale lists).
bpo_refresh() { # root, suite [force]
	local root=$1 suite=$2 force=${3:-} d line out
	d=$(bpo_dir "$root" "$suite")
	line=$(bpo_suite_line "$suite")
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
	(
		flock 8
		[[ -f $d/sources.list && $(cat "$d/sources.list") == "$line" ]] ||
			echo "$line" >"$d/sources.list"
		if [[ -z $force ]] && bpo_have_lists "$d" "$suite" &&
			[[ -n $(find "$d/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440) ]]; then
			exit 0
		fi
		# --error-on=any: apt-get update otherwise exits 0 when it could
		# fetch nothing (a warning), and leaves no list behind.
		if out=$(bpo_apt_get "$root" "$suite" update --error-on=any 2>&1) &&
			bpo_have_lists "$d" "$suite"; then
			# apt leaves the file alone when nothing changed: its age is
			# the check's.
			touch "$d"/lists/*_Packages* 2>/dev/null || true
			exit 0
		fi
		if bpo_have_lists "$d" "$suite"; then
			echo "warning: apt-get update of $suite failed; using the lists from $(date -r "$(compgen -G "$d/lists/*_Packages*" | head -n1)" +%F):" >&2
			echo "$out" | tail -n 3 >&2
			exit 0
		fi
		echo "apt-get update of $suite (${line//$'\n'/; }, lists in $d/lists) failed:" >&2
		echo "$out" | tail -n 5 >&2
		exit 1
	) 8>"$d/.lock"
}

# "PACKAGE VERSION" of what a meta package depends on (linux-image-amd64
# -> linux-image-6.1.0-NN-amd64 (= V)), from the apt-cache show output
# on stdin; nothing if it names none.
meta_depends() {
	sed -n 's/^Depends: *\(linux-image-[0-9][^ ,]*\) *(= *\([^) ]*\)).*/\1 \2/p' | head -n1
}

# The kernel package of a platform, "PACKAGE VERSION [PART=VERSION...]"
# (parts: kernel_parts below), from the apt lists (the system's, or the
# private backports ones, which the caller refreshed); nothing if the
# lists do not name one (no apt-get update yet).
platform_kernel() { # platform, root
	local dep pkg
	case $(platform_kernel_platform "$1") in
	6.1)
		# One apt-cache call (each costs about a second here).
		apt-cache show --no-all-versions linux-image-amd64 2>/dev/null | meta_depends
		;;
	6.12)
		# The meta package follows the newest ABI; should it go, the
		# highest of the packages themselves.
		dep=$(apt-cache show --no-all-versions linux-image-6.12-amd64 2>/dev/null | meta_depends)
		if [[ -z $dep ]]; then
			pkg=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' 2>/dev/null |
				cut -d' ' -f1 | sort -V | tail -n1)
			[[ -z $pkg ]] || dep="$pkg $(apt-cache show --no-all-versions "$pkg" | sed -n 's/^Version: *//p' | head -n1)"
		fi
		echo "$dep"
		;;
	6.12-bpo)
		bpo_apt_cache "$2" bookworm-backports show --no-all-versions linux-image-amd64 2>/dev/null | meta_depends
		;;
	7)
		# The highest linux-image-7.X.Y+debNN-amd64 of the suite (not its
		# linux-image-amd64, which will move on past Linux 7), with its
		# parts: since Linux 7 it is itself a meta package.
		pkg=$(bpo_apt_cache "$2" trixie-backports search --names-only '^linux-image-7\.[0-9]+\.[0-9]+\+deb[0-9]+-amd64$' 2>/dev/null |
			cut -d' ' -f1 | sort -V | tail -n1)
		[[ -z $pkg ]] || bpo_apt_cache "$2" trixie-backports show --no-all-versions "$pkg" 2>/dev/null | kernel_parts
		;;
	esac
}

# "PACKAGE VERSION [PART=VERSION...]" of a kernel package from its
# apt-cache show stanza on stdin. From Linux 7 on, linux-image-VER is a
# meta package: the kernel is in linux-binary-VER (usr/lib/modules/VER/
# vmlinuz), the modules in linux-modules-VER, modules.builtin and the
# config in linux-base-VER, each named in its Depends with "(= V)"; those
# are the parts. An older linux-image-VER holds everything: no parts.
kernel_parts() {
	awk '/^Package:/ { p = $2 } /^Version:/ { v = $2 }
	/^Depends:/ {
		d = $0; sub(/^Depends: */, "", d); n = split(d, a, /, */)
		for (i = 1; i <= n; i++)
			if (a[i] ~ /^linux-(binary|modules|base)-[0-9][^ ]* *\(= *[^) ]+\)$/) {
				split(a[i], w, /[ ()=]+/); parts = parts " " w[1] "=" w[2]
			}
	}
	/^$/ && p != "" { exit }
	END { if (p != "") print p, v parts }'
}

# The QEMU a run uses: VMIO_GUEST_QEMU if set, else the one the platform
# image names (the `qemu` file build-image.sh writes). Fails with a
# message naming what is missing.
guest_qemu() { # image dir
	local q=${VMIO_GUEST_QEMU:-}
	if [[ -n $q ]]; then
		[[ -x $q ]] || { echo "VMIO_GUEST_QEMU=$q is not an executable file" >&2; return 1; }
		echo "$q"
		return 0
	fi
	if [[ -f $1/qemu ]]; then
		q=$(cat "$1/qemu")
	else
		q=system
	fi
	if [[ $q == system ]]; then
		q=$(command -v qemu-system-x86_64) || {
			echo "qemu-system-x86_64 is not installed (package qemu-system-x86): run scripts/deps.sh as root" >&2
			return 1
		}
	fi
	[[ -x $q ]] || { echo "$q (the QEMU of the image in $1) is missing: run scripts/guest/build-image.sh again" >&2; return 1; }
	echo "$q"
}

# The prefix whose share/qemu, share/seabios and lib/x86_64-linux-gnu/qemu
# a QEMU binary is to use: its own (PREFIX/bin/qemu-system-x86_64), or,
# for the wrapper of an unpacked root (fetch-qemu11.sh: DIR/bin/
# qemu-system-x86_64 running DIR/root/usr/bin/qemu-system-x86_64 through
# the root's loader), that root's /usr.
qemu_prefix() { # binary
	local p
	p=$(cd "$(dirname "$1")/.." && pwd)
	[[ ! -x $p/root/usr/bin/qemu-system-x86_64 ]] || p=$p/root/usr
	echo "$p"
}

# Unpacks the .debs into DIR/root: beside the old tree, then swapped in
# whole, so that a QEMU running from the old one (another build tree's
# test) keeps its files. Documentation, manual pages and translations are
# left out. With relink, absolute symlinks are made relative, into the
# root (for a root run on its own libraries: the host's files are another
# release's). Nothing is ever mounted in these trees: plain rm -rf.
# Fails (status 1, a message on stderr) if a .deb does not unpack.
unpack_root() { # dir, relink (yes|no), deb...
	local dir=$1 relink=$2 deb l t
	shift 2
	rm -rf "$dir/root.new" "$dir/root.old"
	mkdir -p "$dir/root.new"
	for deb in "$@"; do
		dpkg-deb -x "$deb" "$dir/root.new" || { echo "cannot unpack $deb" >&2; return 1; }
	done
	rm -rf "$dir/root.new/usr/share/doc" "$dir/root.new/usr/share/man" "$dir/root.new/usr/share/locale"
	if [[ $relink == yes ]]; then
		while IFS= read -r -d '' l; do
			t=$(readlink "$l")
			[[ $t == /* ]] || continue
			ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$dir/root.new$t")" "$l"
		done < <(find "$dir/root.new" -type l -print0)
	fi
	[[ ! -d $dir/root ]] || mv "$dir/root" "$dir/root.old"
	mv "$dir/root.new" "$dir/root"
	rm -rf "$dir/root.old"
}

# QEMU's version as "MAJOR MINOR" (from --version's first line).
qemu_version() { # binary
	"$1" --version 2>/dev/null | sed -n '1s/.*version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p'
}
