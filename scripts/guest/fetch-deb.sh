# shellcheck shell=bash
# Sourced by build-image.sh and build-vsock-test.sh: fetches a Debian
# package into a cache directory with `apt-get download` (never installing
# it) unless that version is there already.
#
# fetch_deb DIR PKG VERSION   prints the .deb's path; returns 1 (apt's
#                             messages on stderr) if the download failed.
# DIR holds one package's download: any other .deb there (an older
# version, an older kernel ABI) is removed first, being of no use any more.
# fetch_apt_opts (an array the caller may set): more apt-get options, e.g.
# a private sources list (platform.sh's bpo_opts).
fetch_apt_opts=()
fetch_deb() {
	local dl=$1 pkg=$2 ver=$3 deb aptopt=("${fetch_apt_opts[@]}")
	mkdir -p "$dl"
	# apt names the file PKG_VERSION_ARCH.deb with ':' escaped as %3a.
	deb=$(find "$dl" -maxdepth 1 -name "${pkg}_${ver//:/%3a}_*.deb" | head -n1)
	if [[ -z $deb ]]; then
		rm -f "$dl"/*.deb
		# As root, apt drops to the _apt user to download, who may not be
		# able to write into the build tree; stay root instead of warning.
		[[ $(id -u) -ne 0 ]] || aptopt+=(-o APT::Sandbox::User=root)
		(cd "$dl" && apt-get download -q "${aptopt[@]}" "$pkg=$ver" >&2) || return 1
		deb=$(find "$dl" -maxdepth 1 -name "${pkg}_*.deb" | head -n1)
		[[ -n $deb ]] || { echo "apt-get download $pkg left no .deb in $dl" >&2; return 1; }
	fi
	echo "$deb"
}
