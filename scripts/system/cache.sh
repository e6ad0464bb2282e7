# shellcheck shell=bash
# The head of scripts/system's builders, sourced after `me=NAME`: $top, the
# tree; $cache, the cache folder (the first argument, by default
# build/sysroot), made and absolute; die and log, prefixed with $me.
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${1:-$top/build/sysroot}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

die() { echo "${me:?}: $*" >&2; exit 1; }
log() { echo "${me:?}: $*" >&2; }
