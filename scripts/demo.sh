#!/bin/bash
# The demonstration: start `vmio loopback`, drive 1 GiB through it with the
# in-tree front end, check every byte, stop it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT

"$build/vmio" loopback --socket-path "$dir/vhost.sock" &
pid=$!
"$build/vmio-drive" --socket "$dir/vhost.sock" --bytes 1G --verify
kill -TERM "$pid"
wait "$pid"
echo "vmio: demo done: 1 GiB through vmio loopback, every byte checked"
