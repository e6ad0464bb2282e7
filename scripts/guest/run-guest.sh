#!/bin/bash
# Boots the guest that build-image.sh makes, runs one test script in it, and
# exits with that script's exit status.
#
# usage: scripts/guest/run-guest.sh [options] [-- QEMU_ARGS...]
#   --script FILE       run FILE in the guest as /test.sh (sh, busybox)
#   --file SRC[:DEST]   put SRC into the guest at DEST (default /SRC's name);
#                       repeatable: helpers, static test binaries
#   --exe SRC[:DEST]    as --file, plus the shared libraries and the loader
#                       that `ldd SRC` lists, at the same paths: a
#                       dynamically linked program (vmio itself) runs there
#   --image DIR         a platform's image (default build/guest/6.1:
#                       ROOT/PLATFORM, see build-image.sh); built if stale
#   --no-build          use the image in DIR as it is (the caller built it)
#   --timeout SECS      hard limit on the whole boot (default 180)
#   --log FILE          serial log (default DIR/logs/run-PID.log); also on stdout
#   --mem SIZE          guest RAM, MiB (default 256), or KiB with a K suffix
#   --cpus N            vCPUs (default 1; Linux's virtio_net uses at most
#                       one queue pair a vCPU)
#   --append ARGS       more kernel command line (may be given again)
#   --name NAME         prefix for messages (default run-guest)
#   -- QEMU_ARGS        passed to QEMU as they are, e.g.
#                       -chardev socket,id=c,path=SOCK -device vhost-user-vsock-pci,chardev=c
#
# Exit status: the guest script's (0 if there was none), 124 when the time
# limit ran out, 125 when the guest never reported an exit status (QEMU
# failed to start, or the guest crashed: see the log).
#
# Environment: VMIO_GUEST_ACCEL=auto|tcg|kvm (default auto: KVM only if a
# probe boot under it works), VMIO_GUEST_CPU (TCG CPU model, default max),
# VMIO_GUEST_MACHINE (default q35), VMIO_GUEST_QEMU (a qemu-system-x86_64
# to run instead of the platform's: the image's `qemu` file names that,
# the system's for 6.1, bookworm-backports' 10.0 unpacked by
# fetch-qemu.sh for 6.12 and 7, trixie-backports' 11.1 for 7-q11: a
# wrapper fetch-qemu11.sh writes, which runs it on the trixie libraries
# unpacked beside it through their own loader).
#
# A QEMU outside /usr (unpacked into the build tree, or installed under a
# prefix) is given its own firmware and modules: -L PREFIX/share/qemu and
# PREFIX/share/seabios, QEMU_MODULE_DIR=PREFIX/lib/x86_64-linux-gnu/qemu,
# where they exist (for QEMU 11's wrapper, PREFIX is its root's /usr).
# Otherwise the unpacked QEMU 10 would load the system QEMU 7.2's option
# ROMs (pvh.bin, linuxboot_dma.bin) and modules.
#
# The guest has one vCPU unless --cpus says more: the machine has two
# cores, and the vhost-user backend under test needs the other.
#
# Guest RAM is a shared memfd, as vhost-user backends need to map it. The
# per-test files go into a second cpio archive appended to the base one:
# the kernel unpacks concatenated archives in order.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
image=$top/build/guest/6.1
script=
files=()
exes=()
limit=180
logfile=
mem=256
cpus=1
append=
name=run-guest
build=1

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
while (($#)); do
	case $1 in
	--script) script=$2; shift 2 ;;
	--file) files+=("$2"); shift 2 ;;
	--exe) exes+=("$2"); shift 2 ;;
	--image) image=$2; shift 2 ;;
	--no-build) build=; shift ;;
	--timeout) limit=$2; shift 2 ;;
	--log) logfile=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--cpus) cpus=$2; shift 2 ;;
	--append) append+="${append:+ }$2"; shift 2 ;;
	--name) name=$2; shift 2 ;;
	--) shift; break ;;
	-h | --help) usage ;;
	*) echo "$name: unknown option '$1'" >&2; usage ;;
	esac
done
qemu_extra=("$@")

die() { echo "$name: $*" >&2; exit 125; }

if [[ $mem =~ ^[1-9][0-9]*$ ]]; then
	mem+=M
elif [[ ! $mem =~ ^[1-9][0-9]*K$ ]]; then
	die "--mem $mem: a size in MiB, or in KiB with a K suffix"
fi

[[ -z $script || -f $script ]] || die "no such script: $script"

# shellcheck source=scripts/guest/platform.sh
. "$top/scripts/guest/platform.sh"
if [[ -n $build ]]; then
	# --image is ROOT/PLATFORM: build that platform's image in ROOT.
	platform=$(basename "$image")
	platform_check "$platform" 2>/dev/null ||
		die "--image $image: the last part must name a platform (${guest_platforms[*]})"
	image=$("$top/scripts/guest/build-image.sh" --platform "$platform" "$(dirname "$image")")
else
	[[ -f $image/stamp && -f $image/initramfs.cpio ]] ||
		die "no guest image in $image: run scripts/guest/build-image.sh"
	image=$(cd "$image" && pwd)
fi
qemu=$(guest_qemu "$image" 2>&1) || die "$qemu"
# Where this platform's kernel and QEMU came from (build-image.sh's
# record: "platform 6.1: linux-image-... from the system's apt (Debian
# GNU/Linux 12 (bookworm)); QEMU ..."), so a log says what it ran.
if [[ -n ${VMIO_GUEST_QEMU:-} ]]; then
	echo "$name: $(sed 's/; QEMU .*//' "$image/source" 2>/dev/null || echo "image $image"); QEMU $VMIO_GUEST_QEMU (VMIO_GUEST_QEMU)" >&2
elif [[ -f $image/source ]]; then
	echo "$name: $(cat "$image/source")" >&2
fi
# A QEMU under its own prefix: its firmware and modules, not the system's
# (platform.sh's qemu_prefix: QEMU 11's wrapper has them in its root).
qprefix=$(qemu_prefix "$qemu")
qemu_data=()
if [[ $qprefix != /usr ]]; then
	for d in "$qprefix/share/qemu" "$qprefix/share/seabios"; do
		if [[ -d $d ]]; then qemu_data+=(-L "$d"); fi
	done
	if [[ -d $qprefix/lib/x86_64-linux-gnu/qemu ]]; then
		export QEMU_MODULE_DIR=$qprefix/lib/x86_64-linux-gnu/qemu
	fi
fi
[[ -n $logfile ]] || logfile=$image/logs/run-$$.log
mkdir -p "$(dirname "$logfile")"
: >"$logfile"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmio-guest.XXXXXX")
qpid=
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	# Never leave a QEMU behind, whatever ended this script.
	if [[ -n $qpid ]] && kill -0 "$qpid" 2>/dev/null; then
		kill "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the per-test archive ------------------------------------------------
# The guest's userland is static busybox: a dynamically linked program
# takes along what ldd says it loads, asked at each run, so a new library
# (libbpf, ...) needs no change here.
for e in "${exes[@]}"; do
	src=${e%%:*}
	files+=("$e")
	libs=$(ldd "$src" 2>&1) || die "ldd $src failed: $libs"
	! grep -q 'not found' <<<"$libs" || die "$src: libraries not found: $libs"
	while read -r lib; do
		files+=("$lib:$lib")
	done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$libs")
done
initrd=$image/initramfs.cpio
if [[ -n $script || ${#files[@]} -gt 0 ]]; then
	mkdir -p "$tmp/add"
	[[ -n $script ]] && install -m 755 "$script" "$tmp/add/test.sh"
	for f in "${files[@]}"; do
		src=${f%%:*}
		dst=/${src##*/}
		[[ $f == *:* ]] && dst=${f#*:}
		[[ -f $src ]] || die "no such file: $src"
		mkdir -p "$tmp/add/$(dirname "$dst")"
		cp -p "$src" "$tmp/add/$dst"
	done
	(cd "$tmp/add" && find . -mindepth 1 | LC_ALL=C sort |
		cpio -o -H newc --quiet --owner=0:0) >"$tmp/add.cpio"
	cat "$image/initramfs.cpio" "$tmp/add.cpio" >"$tmp/initrd.cpio"
	initrd=$tmp/initrd.cpio
fi

# The unpacked kernel boots through PVH, without ~7 s of self-decompression
# under TCG; the bzImage is the fallback.
kernel=$image/vmlinuz
[[ -f $image/vmlinux ]] && kernel=$image/vmlinux

# --- accelerator ---------------------------------------------------------
# KVM where it works, TCG (software emulation) otherwise. /dev/kvm can be
# there and still not run a guest (here, under nested virtualization, QEMU
# aborts on an MSR with -cpu host and the guest hangs silently with other
# CPU models), so "auto" boots the bare image under KVM once, with a short
# limit, and remembers the verdict in the image directory.
# VMIO_GUEST_ACCEL=tcg|kvm|auto (default auto) overrides.
kvm_works() {
	local verdict=$image/kvm-probe key
	[[ -r /dev/kvm && -w /dev/kvm ]] || return 1
	key="$("$qemu" --version | head -n1) $(sha256sum <"$image/stamp" | cut -c1-16)"
	(
		flock 8
		if [[ ! -f $verdict || $(head -n1 "$verdict") != "$key" ]]; then
			local ok=no
			timeout --kill-after=2 10 "$qemu" -nodefaults -no-user-config -display none "${qemu_data[@]}" \
				-no-reboot -machine q35 -accel kvm -cpu host -m 128M \
				-kernel "$kernel" -initrd "$image/initramfs.cpio" \
				-append "console=ttyS0 quiet panic=-1" -serial stdio \
				</dev/null >"$tmp/kvm-probe.log" 2>&1 || true
			grep -q '^vmio-guest: exit 0' "$tmp/kvm-probe.log" && ok=yes
			printf '%s\n%s\n' "$key" "$ok" >"$verdict"
		fi
	) 8>"$image/.kvm-lock"
	[[ $(tail -n1 "$verdict") == yes ]]
}
case ${VMIO_GUEST_ACCEL:-auto} in
tcg) use_kvm= ;;
kvm) use_kvm=1 ;;
auto) use_kvm=; kvm_works && use_kvm=1 ;;
*) die "VMIO_GUEST_ACCEL must be tcg, kvm or auto" ;;
esac
if [[ -n $use_kvm ]]; then
	accel=(-accel kvm -cpu host)
else
	accel=(-accel tcg -cpu "${VMIO_GUEST_CPU:-max}")
fi

# --- boot ----------------------------------------------------------------
# panic=-1 with oops=panic and -no-reboot: a guest kernel crash ends QEMU
# at once (and shows as "no exit status") instead of running to the limit.
cmdline="console=ttyS0 quiet loglevel=3 panic=-1 oops=panic"
# Clock checks and PS/2 probes that only cost boot time in an emulated
# guest: about 2 s of a 7 s TCG boot.
cmdline+=" tsc=reliable no_timer_check i8042.noaux i8042.nokbd"
cmdline+=" mitigations=off random.trust_cpu=on"
[[ -n $append ]] && cmdline+=" $append"

qemu_args=(
	-nodefaults -no-user-config -display none -no-reboot
	"${qemu_data[@]}"
	-machine "${VMIO_GUEST_MACHINE:-q35},memory-backend=mem"
	"${accel[@]}"
	-smp "$cpus" -m "$mem"
	-object "memory-backend-memfd,id=mem,size=$mem,share=on"
	-kernel "$kernel" -initrd "$initrd" -append "$cmdline"
	# The serial console on stdout and, through the chardev's own log,
	# in the log file: no tee, so QEMU's pid is ours to wait for and kill.
	-chardev "stdio,id=con,signal=off,logfile=$logfile"
	-serial chardev:con
	"${qemu_extra[@]}"
)

start=$(date +%s.%N)
# timeout is the hard limit; --kill-after in case QEMU ignores SIGTERM.
timeout --kill-after=5 "$limit" "$qemu" "${qemu_args[@]}" </dev/null &
qpid=$!
qrc=0
wait "$qpid" || qrc=$?
qpid=
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

if ((qrc == 124 || qrc == 137)); then
	echo "$name: timed out after ${limit}s; serial log: $logfile" >&2
	exit 124
fi
# The guest's /init prints "vmio-guest: exit N" just before powering off.
rc=$(tr -d '\r' <"$logfile" | sed -n 's/^vmio-guest: exit \([0-9]\{1,\}\)$/\1/p' | tail -n1)
if [[ -z $rc ]]; then
	if ((qrc != 0)); then
		# Typically a vhost-user socket nobody listens on, or a backend
		# that closed it: QEMU's own message is just above.
		echo "$name: QEMU failed (exit code $qrc after ${elapsed}s, see its message above) before the guest reported an exit status; serial log: $logfile" >&2
	else
		echo "$name: the guest powered off without reporting an exit status (${elapsed}s); serial log: $logfile" >&2
	fi
	exit 125
fi
echo "$name: guest exited with status $rc after ${elapsed}s (QEMU exit code $qrc); serial log: $logfile" >&2
exit "$rc"
