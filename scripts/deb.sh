#!/bin/bash
# Builds the Debian package from debian/ and checks it with lintian; the
# package and its .buildinfo and .changes end up in build-deb/.
# VMIO_DEB_LINTIAN=no leaves lintian out (the system test's build: its
# check is `make deb`'s).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

dpkg-buildpackage -us -uc -b

# dpkg-buildpackage can only write beside the source tree.
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -q DEB_HOST_ARCH)
mkdir -p build-deb
outputs=()
for f in "vmio_${version}_$arch.deb" "vmio-dbgsym_${version}_$arch.deb" \
	"vmio_${version}_$arch.buildinfo" "vmio_${version}_$arch.changes"; do
	if [[ -f ../$f ]]; then
		mv "../$f" build-deb/
		outputs+=("build-deb/$f")
	fi
done
printf 'vmio: built %s\n' "${outputs[@]}"

[[ ${VMIO_DEB_LINTIAN:-yes} != no ]] || exit 0
lintian --fail-on error "build-deb/vmio_${version}_$arch.deb"
echo "vmio: lintian reports no error on build-deb/vmio_${version}_$arch.deb"
