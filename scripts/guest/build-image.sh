#!/bin/bash
# Builds the guest that vmio's guest tests boot: a stock Debian kernel and a
# tiny initramfs (static busybox, the virtio / vsock / virtio-net modules and
# an /init that loads them, runs /test.sh if one is there, and powers off),
# for one guest platform (scripts/guest/platform.sh: 6.1, 6.12, 6.12-bpo).
#
# usage: scripts/guest/build-image.sh [--platform NAME] [ROOT]
#   NAME  the platform (default 6.1); ROOT the guest cache (default
#   build/guest). The image goes into ROOT/NAME, whose path is printed.
#
# Everything comes from Debian packages: the kernel package is fetched with
# `apt-get download` and unpacked into the cache (the host's /boot and
# /lib/modules are never touched): 6.1 and 6.12 from the system's apt
# sources (Debian 12 and its security suite), 6.12-bpo and the 6.12
# platforms' QEMU from bookworm-backports through a private apt list in
# ROOT/apt (fetch-qemu.sh). busybox comes from busybox-static
# (scripts/deps.sh installs it). The result is cached: a second run only
# compares a stamp of its inputs (this script, kernel package and version,
# busybox version, module list) and does nothing if they are unchanged.
#
# Outputs, in ROOT/NAME:
#   vmlinuz           the kernel, as Debian ships it (a bzImage)
#   vmlinux           the same kernel unpacked, booted through PVH (faster)
#   initramfs.cpio    the base initramfs (uncompressed: unpacking gzip under
#                     TCG costs boot time, and it is only a few MiB)
#   kernel-release    e.g. 6.1.0-57-amd64
#   modules.order     the modules /init loads, in load order
#   qemu              the QEMU binary the platform boots under ("system":
#                     the system's qemu-system-x86_64), for run-guest.sh
#
# Environment:
#   VMIO_GUEST_KERNEL_DEB   a linux-image-*.deb to use instead of the
#                           platform's kernel (any platform asked for)
#   VMIO_GUEST_MODULES      extra modules to include and load (space-separated)
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
platform=6.1
args=("$@")
while (($#)); do
	case $1 in
	--platform) platform=$2; shift 2 ;;
	-*) echo "build-image: unknown option '$1' (usage: build-image.sh [--platform NAME] [ROOT])" >&2; exit 2 ;;
	*) break ;;
	esac
done
groot=${1:-$top/build/guest}
mkdir -p "$groot"
groot=$(cd "$groot" && pwd)
cache=$groot/$platform

# shellcheck source=scripts/guest/fetch-deb.sh
. "$top/scripts/guest/fetch-deb.sh"
# shellcheck source=scripts/guest/platform.sh
. "$top/scripts/guest/platform.sh"

die() { echo "build-image: $*" >&2; exit 1; }
log() { echo "build-image: $*" >&2; }

platform_check "$platform" || die "--platform: see scripts/guest/platform.sh"
mkdir -p "$cache"

# The modules the guest loads. Their dependencies (virtio_ring,
# virtio_pci_modern_dev, vsock, failover, ...) are added from modules.dep, so
# only the leaves are named here. vsock_diag: the kernel's vsock_diag_test
# lists the guest's vsock sockets through it.
modules=(virtio_pci vmw_vsock_virtio_transport virtio_net vsock_diag)
# shellcheck disable=SC2206 # word splitting is the point
modules+=(${VMIO_GUEST_MODULES:-})

for tool in dpkg-deb cpio xz zstd flock sha256sum; do
	command -v "$tool" >/dev/null || die "'$tool' is missing: run scripts/deps.sh (as root)"
done
busybox=/bin/busybox
if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'; then
	die "package busybox-static is not installed: run scripts/deps.sh (as root)"
fi

# Tests may run in parallel and all call this script: one builds, the others
# wait for it and then find the cache fresh.
exec 9>"$cache/.lock"
flock 9

# --- which QEMU ------------------------------------------------------------
# Written on every run (the QEMU may have been refreshed without the
# kernel changing); run-guest.sh reads it.
if [[ $(platform_qemu_kind "$platform") == bpo ]]; then
	qemu=$("$top/scripts/guest/fetch-qemu.sh" "$groot") || die "no QEMU for platform $platform (fetch-qemu.sh said why above)"
else
	qemu=system
fi
[[ -f $cache/qemu && $(cat "$cache/qemu") == "$qemu" ]] || echo "$qemu" >"$cache/qemu"

# --- which kernel --------------------------------------------------------
# The platform's kernel package, as the apt lists name it now
# (platform.sh: linux-image-6.1.0-NN-amd64 for 6.1, ...).
kdeb=${VMIO_GUEST_KERNEL_DEB:-}
kapt=system
[[ $platform != 6.12-bpo ]] || kapt=bpo
if [[ -n $kdeb ]]; then
	[[ -f $kdeb ]] || die "VMIO_GUEST_KERNEL_DEB=$kdeb does not exist"
	kdeb=$(cd "$(dirname "$kdeb")" && pwd)/$(basename "$kdeb")
	kpkg=$(dpkg-deb -f "$kdeb" Package)
	kver=$(dpkg-deb -f "$kdeb" Version)
else
	# The backports lists were refreshed by fetch-qemu.sh above.
	dep=$(platform_kernel "$platform" "$groot")
	kpkg=${dep%% *}
	kver=${dep#* }
	if [[ -z $dep ]]; then
		# No apt lists (fresh container): use the cache if there is one
		# rather than failing; otherwise say what to do.
		if [[ -f $cache/stamp && -f $cache/vmlinuz && -f $cache/initramfs.cpio ]]; then
			log "apt lists do not name platform $platform's kernel; using the cached image"
			echo "$cache"
			exit 0
		fi
		if [[ $kapt == bpo ]]; then
			die "the bookworm-backports lists in $groot/apt/lists name no linux-image-amd64"
		fi
		die "apt does not know platform $platform's kernel package: run 'apt-get update' (as root) first"
	fi
fi

# --- is the cache fresh? -------------------------------------------------
bbver=$(dpkg-query -W -f='${Version}' busybox-static)
stamp_text=$(
	echo "script $(sha256sum "$0" | cut -d' ' -f1)"
	echo "platform $platform"
	echo "kernel $kpkg $kver"
	echo "busybox $bbver"
	echo "modules ${modules[*]}"
)
if [[ -f $cache/stamp && $(cat "$cache/stamp") == "$stamp_text" &&
	-f $cache/vmlinuz && -f $cache/initramfs.cpio ]]; then
	log "up to date: platform $platform, $kpkg $kver"
	echo "$cache"
	exit 0
fi

start=$SECONDS
log "building guest image for platform $platform in $cache ($kpkg $kver, busybox $bbver)"

# --- fetch the kernel package --------------------------------------------
if [[ -z $kdeb ]]; then
	if [[ $kapt == bpo ]]; then
		# fetch_deb's apt-get, with the private backports configuration;
		# backports keeps one version of a package: stale lists name one
		# that is gone, so refresh them once and start again.
		mapfile -t fetch_apt_opts < <(bpo_opts "$groot")
		if ! kdeb=$(fetch_deb "$cache/dl" "$kpkg" "$kver"); then
			[[ -z ${VMIO_GUEST_RETRIED:-} ]] ||
				die "apt-get download $kpkg=$kver from bookworm-backports failed (lists in $groot/apt/lists)"
			log "download failed; refreshing the backports lists and retrying once"
			bpo_refresh "$groot" force || die "cannot refresh the bookworm-backports lists"
			VMIO_GUEST_RETRIED=1 exec "$0" "${args[@]}" 9>&-
		fi
	elif ! kdeb=$(fetch_deb "$cache/dl" "$kpkg" "$kver"); then
		# Stale lists name a version the mirror has dropped (Debian
		# replaces kernel ABIs on security updates): refresh once.
		if [[ $(id -u) -ne 0 || -n ${VMIO_GUEST_RETRIED:-} ]]; then
			die "apt-get download $kpkg=$kver failed (as root, 'apt-get update' may help)"
		fi
		log "download failed; refreshing apt lists and retrying once"
		apt-get update -qq >&2
		VMIO_GUEST_RETRIED=1 exec "$0" "${args[@]}" 9>&-
	fi
fi

# --- unpack it and pick the files ----------------------------------------
work=$cache/.work
rm -rf "$work"
mkdir -p "$work/kernel" "$work/root"
trap 'rm -rf "$work"' EXIT
log "unpacking $(basename "$kdeb")"
# The kernel image and the module tree are what is needed: leave out the
# documentation and the package's hook scripts. The modules are in
# lib/modules up to Debian 12's packages and in usr/lib/modules from
# Debian 13's (linux-image-6.12.*+deb13-amd64).
dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$work/kernel" --exclude=./usr/share --exclude=./etc
vmlinuz=$(find "$work/kernel/boot" -name 'vmlinuz-*' | head -n1)
[[ -n $vmlinuz ]] || die "no vmlinuz in $kdeb"
krel=${vmlinuz##*/vmlinuz-}
moddir=
for d in "$work/kernel/usr/lib/modules/$krel" "$work/kernel/lib/modules/$krel"; do
	[[ -d $d/kernel ]] && moddir=$d && break
done
[[ -n $moddir ]] || die "no modules in $kdeb (for $krel, in usr/lib/modules or lib/modules)"

# Module file by name. The package ships no modules.dep (depmod makes it at
# install time), so dependencies come from each module's own .modinfo
# "depends=" field, which needs no kmod on the host.
declare -A modpath=()
while IFS= read -r f; do
	b=${f##*/}
	b=${b%%.ko*}
	modpath[${b//-/_}]=$f
done < <(find "$moddir/kernel" -name '*.ko' -o -name '*.ko.*')

# busybox insmod is not built with compressed-module support, so modules
# are decompressed at build time.
decompress() { # file -> stdout
	case $1 in
	*.ko) cat "$1" ;;
	*.ko.xz) xz -dc "$1" ;;
	*.ko.zst) zstd -q -dc "$1" ;;
	*.ko.gz) gzip -dc "$1" ;;
	*) die "unknown module format: $1" ;;
	esac
}

# Load order: each dependency before its user; what is built into the
# kernel is skipped.
order=()
declare -A seen=()
add_module() { # name (with '-' or '_')
	local name=${1//-/_} path deps dep
	[[ -n ${seen[$name]:-} ]] && return 0
	seen[$name]=1
	path=${modpath[$name]:-}
	if [[ -z $path ]]; then
		if grep -qE "/${name//_/[_-]}\.ko$" "$moddir/modules.builtin"; then
			return 0
		fi
		die "module $name is neither a module nor built in ($krel)"
	fi
	deps=$(decompress "$path" | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n1)
	for dep in ${deps//,/ }; do
		add_module "$dep"
	done
	order+=("$name")
}
for m in "${modules[@]}"; do
	add_module "$m"
done

root=$work/root
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,etc,lib/modules}
: >"$root/etc/modules.order"
for name in "${order[@]}"; do
	decompress "${modpath[$name]}" >"$root/lib/modules/$name.ko"
	echo "$name" >>"$root/etc/modules.order"
done

# busybox and one symlink per applet, made here rather than at boot (every
# millisecond of guest userland is slow under TCG).
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list-full); do
	[[ -e $root/$applet ]] || ln -s /bin/busybox "$root/$applet"
done

echo "$krel" >"$root/etc/kernel-release"
# What the kernel has built in, for tests that ask whether a driver is
# there in whichever form (boot_test.sh).
cp "$moddir/modules.builtin" "$root/lib/modules/modules.builtin"

cat >"$root/init" <<'INIT'
#!/bin/sh
# vmio guest init: mount the kernel file systems, load the virtio modules,
# run the per-test /test.sh (from a second cpio archive appended to the
# initramfs), print its exit status as "vmio-guest: exit N", power off.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# The base archive has no /dev/console node (making one needs root), so the
# kernel may have started us with no console: reopen it.
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root
hostname vmio-guest

while read -r m; do
	insmod "/lib/modules/$m.ko" || echo "vmio-guest: insmod $m failed"
done </etc/modules.order
ip link set lo up

echo "vmio-guest: up ($(cat /etc/kernel-release), $(cut -d' ' -f1 /proc/uptime)s)"
rc=0
if [ -f /test.sh ]; then
	sh /test.sh
	rc=$?
else
	echo "vmio-guest: no /test.sh"
fi
echo "vmio-guest: exit $rc"
sync
poweroff -f
INIT
chmod 755 "$root/init"

# --- pack and publish ----------------------------------------------------
# newc is the format the kernel reads; --owner keeps files root-owned in the
# archive whoever builds it.
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
	cpio -o -H newc --quiet --owner=0:0) >"$work/initramfs.cpio"
cp "$vmlinuz" "$work/vmlinuz"

# The bzImage unpacks itself at boot, and under TCG that xz decompression
# alone takes ~7 s of a ~12 s boot. Unpack it here instead and boot the ELF
# vmlinux through its PVH entry point (QEMU loads such an ELF directly),
# which brings a boot down to ~6 s. Only used if the kernel has the PVH
# entry note (Xen ELF note 0x12, XEN_ELFNOTE_PHYS32_ENTRY), as Debian's has.
extract_vmlinux() { # bzImage -> vmlinux on stdout, or fail
	local img=$1 off magic cmd
	for magic in '\xfd7zXZ\x00:xz -dc --single-stream' '\x28\xb5\x2f\xfd:zstd -q -dc' \
		'\x1f\x8b\x08:gzip -dc'; do
		cmd=${magic#*:}
		off=$(LC_ALL=C grep -obUaP "${magic%%:*}" "$img" | head -n1 | cut -d: -f1 || true)
		[[ -n $off ]] || continue
		# gzip and zstd complain about the data after the stream: ignore
		# that and judge the result by its ELF header.
		tail -c +$((off + 1)) "$img" | $cmd 2>/dev/null || true
		return 0
	done
	return 1
}
if extract_vmlinux "$vmlinuz" >"$work/vmlinux" &&
	[[ $(head -c 4 "$work/vmlinux" | od -An -c | tr -d ' ') == '177ELF' ]] &&
	{ ! command -v readelf >/dev/null || readelf -n "$work/vmlinux" | grep -q '(0x00000012)'; }; then
	have_vmlinux=1
else
	log "could not unpack a PVH-bootable vmlinux; guests boot the slower bzImage"
	have_vmlinux=
fi
# Install atomically-ish: the stamp is written last, so an interrupted build
# is rebuilt next time.
rm -f "$cache/stamp"
mv "$work/vmlinuz" "$cache/vmlinuz"
rm -f "$cache/vmlinux"
[[ -n $have_vmlinux ]] && mv "$work/vmlinux" "$cache/vmlinux"
mv "$work/initramfs.cpio" "$cache/initramfs.cpio"
echo "$krel" >"$cache/kernel-release"
cp "$root/etc/modules.order" "$cache/modules.order"
echo "$stamp_text" >"$cache/stamp"

log "built in $((SECONDS - start)) s: kernel $krel, modules: $(tr '\n' ' ' <"$cache/modules.order")"
if [[ -n $have_vmlinux ]]; then
	log "  kernel:    $cache/vmlinux (PVH boot; bzImage: $cache/vmlinuz)"
else
	log "  kernel:    $cache/vmlinuz"
fi
log "  initramfs: $cache/initramfs.cpio ($(du -k "$cache/initramfs.cpio" | cut -f1) KiB)"
echo "$cache"
