#!/bin/bash
# Builds the Debian package of the source tree as it is now (committed or
# not) for the system test: scripts/deb.sh, run in a copy of the tree so
# that the build neither writes into the tree nor beside it, where other
# checkouts' packages land. Lintian and the package's own unit tests are
# left to `make deb` and the suite; this is the same package otherwise.
#
# usage: scripts/system/build-deb.sh [--release CODENAME] [--commit REV] [CACHE]
#   CODENAME (default bookworm) is the Debian release the package is for:
#   the host's own release builds on the host; another one builds in that
#   release's build root (scripts/system/build-root.sh --kind build, with
#   scripts/system/in-root.sh), so that the package's Depends name that
#   release's libraries and its binaries link to that release's glibc.
#   CACHE defaults to build/sysroot/CODENAME; the copy is CACHE/deb/src
#   and the package's path is printed. A second run compares a key of the tree's
#   files (every file git tracks or would track, by content) and does
#   nothing if it is unchanged. The key leaves out tests/ and scripts/
#   (but for scripts/deb.sh): nothing of theirs is in the package, and
#   editing a test must not cost a package build.
#   --commit REV packages that commit of the tree's repository instead
#   (git archive), into CACHE/deb-commit, keyed by the commit: the system
#   test's package of the commit before, which it upgrades from.
set -euo pipefail

me=build-deb
release=bookworm
commit=
while (($#)); do
	case $1 in
	--release) release=$2; shift 2 ;;
	--commit) commit=$2; shift 2 ;;
	-*) echo "$me: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
# shellcheck source=scripts/system/cache.sh
. "$(dirname "$0")/cache.sh"
dir=$cache/deb${commit:+-commit}
mkdir -p "$dir"

# shellcheck disable=SC1091 # the host's
host_release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [[ $release == "$host_release" ]]; then
	tools=(git dpkg-buildpackage dh cpio)
else
	tools=(git cpio debootstrap unshare) # the build happens in the release's root
fi
for tool in "${tools[@]}"; do
	command -v "$tool" >/dev/null ||
		die "'$tool' is missing: run scripts/deps.sh (as root; packages git, dpkg-dev, debhelper, cpio)"
done
git -C "$top" rev-parse --git-dir >/dev/null 2>&1 ||
	die "$top is not a git checkout: the package is built from the files git lists"

exec 9>"$dir/.lock"
flock 9

# The files of the tree, NUL-separated: tracked or not ignored, there, and
# no symbolic link to a folder.
tree_files() {
	git -C "$top" ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			if [[ -e $top/$f && ! -d $top/$f ]]; then printf '%s\0' "$f"; fi
		done
}
if [[ -n $commit ]]; then
	id=$(git -C "$top" rev-parse --verify --quiet "$commit^{commit}") ||
		die "--commit $commit: no such commit in $top"
	key="commit $id"
else
	key=$(cd "$top" && tree_files | grep -zv -e '^tests/' -e '^scripts/' |
		xargs -0 sha256sum scripts/deb.sh | sha256sum | cut -d' ' -f1)
	key="tree $key"
fi
key="script $(sha256sum "$0" | cut -d' ' -f1) release $release $key"
deb=$(cat "$dir/deb" 2>/dev/null || true)
if [[ -f $dir/stamp && $(cat "$dir/stamp") == "$key" && -f $deb ]]; then
	log "up to date: $deb"
	echo "$deb"
	exit 0
fi

start=$SECONDS
log "building the package of $top${commit:+ at $commit ($id)} in $dir/src"
rm -f "$dir/stamp" "$dir/deb"
safe_rm "$dir/src"
rm -f "$dir"/*.deb "$dir"/*.buildinfo "$dir"/*.changes
mkdir "$dir/src"
if [[ -n $commit ]]; then
	git -C "$top" archive "$id" | tar -x -C "$dir/src"
else
	(cd "$top" && tree_files | cpio --null -pdm --quiet "$dir/src")
fi
if [[ $release == "$host_release" ]]; then
	DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" VMIO_DEB_LINTIAN=no \
		"$dir/src/scripts/deb.sh" >"$dir/build.log" 2>&1
else
	broot=$("$top/scripts/system/build-root.sh" --release "$release" --kind build "$cache") ||
		die "no $release build root (build-root.sh said why above)"
	# In an overlay on the build root, which stays as deps.sh left it; the
	# copy's folder is bound on /w, so that dpkg-buildpackage's outputs
	# beside the source (in /w) land in $dir too.
	safe_rm "$dir/overlay"
	mkdir -p "$dir/overlay/upper" "$dir/overlay/work"
	# shellcheck disable=SC2016 # for the inner shell
	"$top/scripts/system/in-root.sh" --overlay "$broot:$dir/overlay/upper:$dir/overlay/work" \
		--bind "$dir:/w" "$dir/overlay/root" sh -c 'cd /w/src &&
		DEB_BUILD_OPTIONS="nocheck $1" VMIO_DEB_LINTIAN=no scripts/deb.sh' sh "${DEB_BUILD_OPTIONS:-}" \
		>"$dir/build.log" 2>&1
fi ||
	die "scripts/deb.sh failed; the end of $dir/build.log: $(tail -n 30 "$dir/build.log")"
deb=$(find "$dir/src/build-deb" -name 'vmio_*.deb' | head -n1)
[[ -f $deb ]] || die "scripts/deb.sh made no vmio_*.deb (see $dir/build.log)"
echo "$deb" >"$dir/deb"
echo "$key" >"$dir/stamp"
log "built $(basename "$deb") for $release in $((SECONDS - start)) s"
echo "$deb"
