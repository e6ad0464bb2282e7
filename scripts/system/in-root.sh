#!/bin/bash
# Runs a command as root in a Debian root folder with chroot, the way a
# machine of that release would run it: /proc, /sys, /dev (with /dev/pts)
# of the host kernel, a fresh tmpfs on /tmp and on /run, the host's
# resolv.conf. Network namespaces, veth pairs, TAPs, AF_XDP sockets and BPF
# maps all work there: they are the host kernel's.
#
# usage: scripts/system/in-root.sh [--overlay LOWER:UPPER:WORK]
#            [--bind SRC:DST]... ROOT COMMAND...
#   --overlay  mounts LOWER (a root that stays pristine) with this run's
#              changes in UPPER on ROOT first; ROOT is made if missing
#   --bind     binds the host's SRC (a folder) on DST in the root: caches
#              that outlive the run, a tree to build
# The command's status is returned.
#
# Safety: every mount is made in a mount namespace of this script's own
# (unshare, private propagation), so the host never sees them and they
# vanish with the script however it ends; they are also unmounted, in
# reverse, when it exits. A root is only ever removed (cache.sh's
# safe_rm) after /proc/self/mountinfo shows nothing under it.
set -euo pipefail

me=in-root
die() { echo "$me: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (mount, chroot)"
if [[ ${VMIO_IN_ROOT_NS:-} != 1 ]]; then
	command -v unshare >/dev/null || die "'unshare' is missing (package util-linux)"
	VMIO_IN_ROOT_NS=1 exec unshare --mount --propagation private -- "$0" "$@"
fi
unset VMIO_IN_ROOT_NS

overlay=
binds=()
while (($#)); do
	case $1 in
	--overlay) overlay=$2; shift 2 ;;
	--bind) binds+=("$2"); shift 2 ;;
	--) shift; break ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
done
(($# >= 2)) || die "usage: $0 [--overlay LOWER:UPPER:WORK] [--bind SRC:DST]... ROOT COMMAND..."
root=$(realpath -m "$1")
shift
[[ $root != / ]] || die "the root may not be /"

mounted=()
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mnt() { # mount's arguments, the target last
	mount "$@"
	mounted+=("${*: -1}")
}

if [[ -n $overlay ]]; then
	IFS=: read -r lower upper work <<<"$overlay"
	[[ -d $lower && -d $upper && -d $work ]] || die "--overlay $overlay: LOWER, UPPER and WORK must be folders"
	mkdir -p "$root"
	mnt -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$root"
fi
[[ -x $root/bin/sh ]] || die "$root is no root (no /bin/sh)"

mnt -t proc proc "$root/proc"
mnt --rbind /sys "$root/sys"
mnt --rbind /dev "$root/dev"
mnt -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
mnt -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"
for b in "${binds[@]}"; do
	src=${b%%:*} dst=${b#*:}
	[[ -d $src ]] || die "--bind $b: $src is no folder"
	mkdir -p "$root$dst"
	mnt --bind "$src" "$root$dst"
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

rc=0
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive "$@" || rc=$?
exit "$rc"
