#!/bin/bash
# Benchmarks. Each figure is a median over interleaved runs; runs swing a
# lot on this 2-core shared machine, so compare only figures from one run
# of this script. Later issues add their anchors (socat, DPDK) here, run
# interleaved with vmio: A B A B ...
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
runs=${RUNS:-5}
bytes=${BYTES:-1G}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT

"$build/vmio" loopback --socket-path "$dir/vhost.sock" -q &
pid=$!
results=()
for i in $(seq "$runs"); do
	line=$("$build/vmio-drive" --socket "$dir/vhost.sock" --bytes "$bytes")
	echo "loopback run $i: $line"
	results+=("$(sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p' <<<"$line")")
done
median=$(printf '%s\n' "${results[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "loopback: median $median MB/s over $runs runs of $bytes"
