# shellcheck shell=bash
# Sourced by the guest scripts: the guest platforms, each a guest kernel
# and the QEMU that boots it, and the private apt configuration that
# reaches bookworm-backports without touching the system's sources.
#
#   platform  kernel                                        QEMU
#   6.1       linux-image-amd64 of Debian 12 (Linux 6.1)     the system's (qemu-system-x86, 7.2)
#   6.12      the newest linux-image-6.12.*+deb12-amd64      bookworm-backports' qemu-system-x86 (10.0)
#             (Debian 12's security suite)
#   6.12-bpo  linux-image-amd64 of bookworm-backports       the same QEMU 10.0
#             (6.12.95 in 2026: the 6.12.94+ range that resets a
#             connection past a packet count, see issue 21)
#
# Each platform's image lives in ROOT/PLATFORM (ROOT: build/guest), with
# a file `qemu` naming the QEMU binary it boots under; QEMU 10 is unpacked
# into ROOT/qemu-bpo by fetch-qemu.sh, the private apt state into ROOT/apt.
#
# Environment (for every platform): VMIO_GUEST_KERNEL_DEB (a kernel
# package instead of the platform's, build-image.sh), VMIO_GUEST_QEMU (a
# QEMU binary instead of the platform's, run-guest.sh).

guest_platforms=(6.1 6.12 6.12-bpo)

# Fails (status 1, a message on stderr) for a name not in the table.
platform_check() { # platform
	local p
	for p in "${guest_platforms[@]}"; do
		[[ $1 == "$p" ]] && return 0
	done
	echo "unknown guest platform '$1' (known: ${guest_platforms[*]})" >&2
	return 1
}

# system: the host's apt and QEMU; bpo: bookworm-backports' QEMU.
platform_qemu_kind() { # platform
	case $1 in
	6.1) echo system ;;
	*) echo bpo ;;
	esac
}

# The source package the kernel's own vsock tests are built from: the
# same minor version as the guest kernel, whose suite has its cases.
platform_linux_source() { # platform
	case $1 in
	6.1) echo linux-source-6.1 ;;
	*) echo linux-source-6.12 ;;
	esac
}

# --- bookworm-backports through a private apt configuration -------------
# Never the system's sources or lists: apt reads this list and keeps its
# lists and cache under ROOT/apt, and `apt-get download` fetches into the
# current directory without installing anything. Nor the system's dpkg
# status: with it, apt-cache would name the installed QEMU 7.2 as a
# version of qemu-system-x86 whenever the backports lists are missing.
bpo_suite_line='deb http://deb.debian.org/debian bookworm-backports main'
bpo_opts() { # root -> apt options, one a line
	local d=$1/apt
	printf '%s\n' -o "Dir::Etc::sourcelist=$d/sources.list" -o Dir::Etc::sourceparts=/dev/null \
		-o "Dir::State::Lists=$d/lists" -o "Dir::Cache=$d/cache" -o Dir::State::status=/dev/null -q
	# As root, apt drops to the _apt user to download, who may not be
	# able to write into the build tree.
	[[ $(id -u) -ne 0 ]] || printf '%s\n' -o APT::Sandbox::User=root
}
bpo_apt_get() { # root, apt-get arguments...
	local root=$1 opts
	shift
	mapfile -t opts < <(bpo_opts "$root")
	apt-get "${opts[@]}" "$@"
}
bpo_apt_cache() { # root, apt-cache arguments...
	local root=$1 opts
	shift
	mapfile -t opts < <(bpo_opts "$root")
	apt-cache "${opts[@]}" "$@"
}

# Makes sure the private lists exist and are at most a day old (backports
# replaces versions, and a fresh clone has none): `apt-get update` of the
# one list, under a lock. An update that fails with lists already there
# keeps them (with a warning); with none it fails, saying why.
# force: refresh whatever their age (a download failed: stale lists).
bpo_refresh() { # root [force]
	local root=$1 force=${2:-} d=$1/apt out
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
	(
		flock 8
		[[ -f $d/sources.list && $(cat "$d/sources.list") == "$bpo_suite_line" ]] ||
			echo "$bpo_suite_line" >"$d/sources.list"
		if [[ -z $force ]] && compgen -G "$d/lists/*_Packages*" >/dev/null &&
			[[ -n $(find "$d/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440) ]]; then
			exit 0
		fi
		# --error-on=any: apt-get update otherwise exits 0 when it could
		# fetch nothing (a warning), and leaves no list behind.
		if out=$(bpo_apt_get "$root" update --error-on=any 2>&1) &&
			compgen -G "$d/lists/*bookworm-backports*_Packages*" >/dev/null; then
			# apt leaves the file alone when nothing changed: its age is
			# the check's.
			touch "$d"/lists/*_Packages* 2>/dev/null || true
			exit 0
		fi
		if compgen -G "$d/lists/*_Packages*" >/dev/null; then
			echo "warning: apt-get update of bookworm-backports failed; using the lists from $(date -r "$(compgen -G "$d/lists/*_Packages*" | head -n1)" +%F):" >&2
			echo "$out" | tail -n 3 >&2
			exit 0
		fi
		echo "apt-get update of bookworm-backports ($bpo_suite_line, lists in $d/lists) failed:" >&2
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

# The kernel package of a platform, "PACKAGE VERSION", from the apt lists
# (the system's, or the private backports ones); nothing if the lists do
# not name one (no apt-get update yet).
platform_kernel() { # platform, root
	local dep pkg
	case $1 in
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
		bpo_apt_cache "$2" show --no-all-versions linux-image-amd64 2>/dev/null | meta_depends
		;;
	esac
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

# QEMU's version as "MAJOR MINOR" (from --version's first line).
qemu_version() { # binary
	"$1" --version 2>/dev/null | sed -n '1s/.*version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p'
}
