# shellcheck shell=bash
# The head of scripts/system's builders, sourced after `me=NAME` and, if
# the builder takes one, `release=CODENAME`: $top, the tree; $cache, the
# cache folder (the first argument, by default build/sysroot/RELEASE, one
# per Debian release), made and absolute; die and log, prefixed with $me;
# safe_rm, which removes a folder only when nothing is mounted under it;
# need_mirror, which fails clearly when the Debian archive is out of reach.
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
release=${release:-bookworm}
cache=${1:-$top/build/sysroot/$release}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

die() { echo "${me:?}: $*" >&2; exit 1; }
log() { echo "${me:?}: $*" >&2; }

# What is mounted at or under PATH, as this process's mount namespace sees
# it (one mount point a line).
mounts_under() { # path
	local p
	p=$(realpath -m "$1")
	awk -v p="$p" '$5 == p || index($5, p "/") == 1 { print $5 }' /proc/self/mountinfo
}

# rm -rf, but never of a folder with anything mounted under it: a root
# with the host's /dev, /proc or /tmp bound inside would take the host's
# files with it.
safe_rm() { # path...
	local p m
	for p in "$@"; do
		[[ -e $p || -L $p ]] || continue
		m=$(mounts_under "$p")
		[[ -z $m ]] || die "refusing to remove $p: mounted under it: ${m//$'\n'/ }"
		rm -rf "$p"
	done
}

# Fails with the reason when the mirror cannot be reached (only the first
# run, or one whose inputs changed, needs it).
need_mirror() { # url
	local host=${1#*://} port=80
	host=${host%%/*}
	if [[ $host == *:* ]]; then port=${host##*:} host=${host%:*}; fi
	timeout 20 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null ||
		die "cannot reach $host (port $port): no network? The root is downloaded from $1 on the first run (and when its inputs change)"
}
