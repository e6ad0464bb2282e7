#!/bin/bash
# Installs the Debian packages vmio needs to build and test, and only those
# that are missing: running it again on a ready machine does nothing.
# Each package and why it is here is listed in README.md ("Dependencies").
# `deps.sh deb` also installs what `make deb` alone needs.
# The names are the same on Debian 12 (bookworm) and 13 (trixie): no
# version-pinned package where a release-neutral one exists.
set -euo pipefail

packages=(
	build-essential   # gcc, make, libc headers
	pkg-config
	meson             # build system (pulls in python3)
	ninja-build
	clang             # fuzz targets (libFuzzer) and the BPF program
	libclang-rt-dev   # libFuzzer and the sanitizer runtimes for the release's clang
	                  # (llvm-defaults' name: clang 14 on Debian 12, 19 on 13)
	libtsan2          # ThreadSanitizer runtime for gcc: the suite's build-tsan
	libcmocka-dev     # unit test framework
	libbpf-dev        # vmio redirect's sockmap engine: loads its BPF program
	libxdp-dev        # vmio net --xdp: AF_XDP sockets and their XDP program
	libyaml-dev       # vmio vsock --config: the YAML list of VMs
	zlib1g-dev        # the hand-over state's checksum (CRC-32)
	libjansson-dev    # the integration tests parse --control documents
	bpftool           # build: turns the BPF object into a libbpf skeleton header
	qemu-system-x86   # guest tests: boots a Debian kernel against the vhost-user devices
	                  # (QEMU 7.2); its libraries are also all that bookworm-backports'
	                  # QEMU 10, unpacked into build/guest by scripts/guest/fetch-qemu.sh, needs
	busybox-static    # guest tests: the guest's whole userland, copied into its initramfs
	cpio              # guest tests: packs the initramfs
	xz-utils          # guest tests: unpacks the kernel package's compressed modules, and the kernel source (vsock tests)
	zstd              # guest tests: same, for zstd-compressed modules
	socat             # make bench: the anchor `vmio redirect` is measured against
	valgrind          # make bench: callgrind counts vmio net's instructions per frame (netlog)
	dpdk-dev          # vmio net tests: dpdk-testpmd is the front end
	ethtool           # guest test over AF_XDP: turns off the veth peer's checksum offload
	iproute2          # net and redirect tests: ip (veth pairs, namespaces, TAPs), ss (socket state)
	procps            # tests: pgrep, ps and sysctl (a minimal root has none of them)
	util-linux        # tests: mount, nsenter, runuser, taskset, flock, setsid
	kmod              # tests that need a kernel module (tun, veth): modprobe
	systemd           # install test: systemd-analyze verify, systemd-socket-activate
	man-db            # install test: man --warnings renders the man pages
	debhelper         # make deb and the system test: dh and its meson build system, compat 13
	dpkg-dev          # make deb and the system test: dpkg-buildpackage
	debootstrap       # system tests: the Debian 12 and 13 roots the package is installed into,
	                  # and the Debian 13 root the tree is built and tested in
	git               # those tests copy the files git lists into the roots
	systemd-container # system test: systemd-nspawn boots that root's systemd
)

if [[ ${1:-} == deb ]]; then
	packages+=(
		lintian       # make deb: checks the built package
	)
fi

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
	echo "vmio: these packages are missing: ${missing[*]}" >&2
	echo "vmio: run 'make deps' as root (or install them) first" >&2
	exit 1
fi

echo "vmio: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
