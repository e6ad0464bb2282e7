#!/bin/bash
# The tree on another Debian release, from a fresh root: a minbase root of
# that release (debootstrapped once, cached in BUILD/sysroot/CODENAME by
# scripts/system/build-root.sh --kind build, with what the tree's
# scripts/deps.sh installs there) gets a clean copy of the tree (the files
# git lists, committed or not, as build-deb.sh copies them) in an overlay
# of its own, and in a chroot of it (scripts/system/in-root.sh: the host's
# kernel, its /proc, /sys and /dev, a tmpfs /tmp and /run):
#   scripts/deps.sh deb                    installs nothing more (the root has it all)
#   meson setup build && ninja -C build    the plain build
#   meson test --suite unit --suite integration, not their variants
#                                          (another ring layout: nothing
#                                          the release changes)
#   scripts/deb.sh                         the package (nocheck: the suite has
#                                          just run in this root) and lintian
# Prints the release and the versions it used, the "N passed, M failed"
# of the inner test run (scripts/count-tests.py), the times, and the end
# of the log of a step that failed; exits 1 if any step failed. The whole
# log stays in BUILD/sysroot/CODENAME/build-run/log until the next run;
# the package in BUILD/sysroot/CODENAME/build-run/deb/.
#
# usage: tests/system/debian_build_test.sh [--build DIR] [--release CODENAME]
#   DIR is the meson build tree whose sysroot/ caches the roots (default
#   build); CODENAME the release (default trixie, Debian 13).
# Needs root and, on the first run, the network to the Debian archive:
# what is missing fails the test with its reason, nothing is skipped.
set -uo pipefail
export LC_ALL=C.UTF-8

top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build
release=trixie
while (($#)); do
	case $1 in
	--build) build=$2; shift 2 ;;
	--release) release=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--release CODENAME]" >&2; exit 2 ;;
	esac
done
me=debian_build
fail() { echo "$me: FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || fail "needs root: it debootstraps a root, mounts an overlay and chroots into it"
cache=$build/sysroot/$release
# shellcheck source=scripts/system/cache.sh
. "$top/scripts/system/cache.sh" "$cache"
run=$cache/build-run
for tool in debootstrap unshare chroot git cpio python3; do
	command -v "$tool" >/dev/null || fail "'$tool' is missing: run scripts/deps.sh (as root)"
done
git -C "$top" rev-parse --git-dir >/dev/null 2>&1 || fail "$top is not a git checkout: the copy is of the files git lists"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || fail "the kernel has no overlayfs"

t0=$SECONDS
broot=$("$top/scripts/system/build-root.sh" --release "$release" --kind build "$cache") ||
	fail "no $release root (build-root.sh said why above: no network on a first run?)"
t_root=$((SECONDS - t0))

# This run's root: an overlay on the cached one, the tree copied into it.
safe_rm "$run"
mkdir -p "$run/upper/src" "$run/work" "$run/deb"
git -C "$top" ls-files -z --cached --others --exclude-standard |
	(cd "$top" && while IFS= read -r -d '' f; do
		if [[ -e $f && ! -d $f ]]; then printf '%s\0' "$f"; fi
	done) | (cd "$top" && cpio --null -pdm --quiet "$run/upper/src") || fail "copying the tree failed"

# The steps, each with a marker line the log is cut by.
# shellcheck disable=SC2016 # for the inner shell
inner='
step() { echo "=== step $1"; }
cd /src
step versions
. /etc/os-release
echo "release: $PRETTY_NAME, $(cat /etc/debian_version)"
echo "gcc: $(gcc -dumpfullversion)"
echo "clang: $(clang --version | sed -n "s/.*clang version \([^ ]*\).*/\1/p")"
echo "systemd: $(dpkg-query -W -f="\${Version}" systemd)"
echo "kernel headers (linux-libc-dev): $(dpkg-query -W -f="\${Version}" linux-libc-dev)"
echo "meson: $(meson --version); libbpf: $(dpkg-query -W -f="\${Version}" libbpf-dev); libxdp: $(dpkg-query -W -f="\${Version}" libxdp-dev); dpdk: $(dpkg-query -W -f="\${Version}" dpdk-dev); lintian: $(dpkg-query -W -f="\${Version}" lintian)"
echo "running kernel (the host'"'"'s): $(uname -r)"
step deps
scripts/deps.sh deb || exit 1
step build
{ meson setup build && ninja -C build; } || exit 1
step test
meson test -C build --print-errorlogs --num-processes 2 --suite unit --suite integration --no-suite variant
echo "meson test: exit $?"
python3 scripts/count-tests.py build
tested=$?
step deb
DEB_BUILD_OPTIONS=nocheck scripts/deb.sh || exit 1
cp build-deb/vmio_*.deb /deb/
exit $tested
'
t0=$SECONDS
"$top/scripts/system/in-root.sh" --overlay "$broot:$run/upper:$run/work" --bind "$run/deb:/deb" \
	"$run/root" bash -c "$inner" >"$run/log" 2>&1
rc=$?
t_run=$((SECONDS - t0))

section() { # name: the log's lines of that step
	awk -v s="=== step $1" '$0 == s { on = 1; next } /^=== step / { on = 0 } on' "$run/log"
}
last_step=$(grep '^=== step ' "$run/log" | tail -n1 | cut -d' ' -f3)
section versions
counts=$(section test | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n1)
echo "inner run (unit + integration): ${counts:-no count (the tests did not run)}"
section test | sed -n '/^meson test: exit/,$p' | grep -E '^FAILED: |^  ' | sed 's/^/  /' | head -n 40
lint=$(section deb | grep -E '^vmio: lintian reports|^[EW]: vmio' | head -n 20)
[[ -z $lint ]] || printf '%s\n' "$lint"
echo "times: root ${t_root} s, copy+deps+build+tests+package ${t_run} s (log: $run/log)"
if ((rc != 0)); then
	echo "the log's end (step $last_step):"
	tail -n 40 "$run/log" | sed 's/^/  | /'
	fail "$release: step '$last_step' failed (exit $rc)"
fi
echo "$me: $release: deps, build, unit and integration tests, package and lintian: all passed"
