#!/bin/bash
# Guest test of `vmio vsock`: boots the Debian kernel + busybox guest
# (scripts/guest/) once, with QEMU's vhost-user-vsock-pci wired to
# `vmio vsock --guest-cid 3`, and runs the scenarios of issue 3 between the
# guest kernel's own virtio-vsock driver (tests/guest/vsock-tool, in the
# guest) and host services (tests/guest/uds-peer, here):
#   cid            the guest sees CID 3 (GET_CONFIG)
#   rst            guest connect to a port with no host listener: ECONNRESET at once
#   g2h            guest -> host, 32 MiB, checked byte for byte on the host
#   half-close     guest SHUT_WR, host reads EOF then replies, guest reads it
#   concurrent64   64 connections at once, echoed, each checked
#   slow-reader    a slow host reader stalls only its own connection
#   h2g-rst        host CONNECT to a guest port nobody listens on: closed at once
#   h2g            host -> guest, 32 MiB, checked byte for byte in the guest
#   h2g-echo       host -> guest echo service -> host, 1 MiB, checked
#
# usage: tests/guest/vsock_test.sh [--image DIR] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# (defaults: build/guest, build/vmio, build/tests/guest/...). Exit 0 when
# every scenario passed; 1 with "vsock_test: FAIL: ..." lines otherwise.
# Logs: DIR/logs/vsock_test.*.log (serial console, vmio -v, host peers).
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
image=$top/build/guest
vmio=$top/build/vmio
tool=$top/build/tests/guest/vsock-tool
peer=$top/build/tests/guest/uds-peer
while (($#)); do
	case $1 in
	--image) image=$2; shift 2 ;;
	--vmio) vmio=$2; shift 2 ;;
	--vsock-tool) tool=$2; shift 2 ;;
	--uds-peer) peer=$2; shift 2 ;;
	*) echo "usage: $0 [--image DIR] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]" >&2; exit 2 ;;
	esac
done
# One boot (~5 s under TCG) plus the transfers; the whole run is bounded.
limit=${VMIO_GUEST_TIMEOUT:-200}

failures=()
fail() { echo "vsock_test: FAIL: $*" >&2; exit 1; }
bad() { echo "vsock_test: FAIL: $*" >&2; failures+=("$*"); }

command -v qemu-system-x86_64 >/dev/null ||
	fail "qemu-system-x86_64 is not installed (package qemu-system-x86): run scripts/deps.sh as root"
for b in "$vmio" "$tool" "$peer"; do
	[[ -x $b ]] || fail "$b is missing: build with 'ninja -C build'"
done
"$vmio" vsock --help >/dev/null 2>&1 || fail "'$vmio vsock --help' failed: this vmio has no vsock device"

start=$SECONDS
"$top/scripts/guest/build-image.sh" "$image" >/dev/null || fail "building the guest image failed"
image=$(cd "$image" && pwd)
logs=$image/logs
mkdir -p "$logs"
serial=$logs/vsock_test.serial.log
vlog=$logs/vsock_test.vmio.log
rm -f "$logs"/vsock_test.*.log

# Unix socket paths are limited to 108 bytes: keep them in a short /tmp dir.
tmp=$(mktemp -d /tmp/vmio-vsock-test.XXXXXX)
sock=$tmp/vhost.sock
uds=$tmp/vm.vsock
pids=()
vpid=
gpid=
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	# Whatever ended the script: no backend, QEMU or peer left behind
	# (run-guest.sh kills its own QEMU when it is killed).
	local p
	for p in $gpid "${pids[@]}" $vpid; do
		kill "$p" 2>/dev/null || true
	done
	for p in $gpid "${pids[@]}" $vpid; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- host services, then the backend, then QEMU ---------------------------
# Started first: the guest connects to them as soon as it is up.
declare -A hpid=()
service() { # port, uds-peer options...
	local port=$1
	shift
	"$peer" listen "${uds}_$port" --timeout "$limit" "$@" >"$logs/vsock_test.host-$port.log" 2>&1 &
	hpid[$port]=$!
	pids+=("$!")
}
service 5001 --count 1 --expect 32M             # g2h: every byte checked
service 5002 --count 1 --mode half-close --expect 4096
service 5003 --count 1 --expect 2M --read-delay-ms 20 --read-size 16K # ~0.8 MB/s
service 5004 --count 64 --mode echo
service 5005 --count 1 --expect 8M

# QEMU 7.2 does not retry a vhost-user socket: the backend must listen
# before QEMU starts.
"$vmio" vsock --guest-cid 3 --socket "$sock" --uds-path "$uds" -v >"$vlog" 2>&1 &
vpid=$!
for _ in $(seq 100); do
	[[ -S $sock ]] && break
	kill -0 "$vpid" 2>/dev/null || fail "vmio vsock exited at start: $(cat "$vlog")"
	sleep 0.05
done
[[ -S $sock ]] || fail "vmio vsock did not create $sock within 5 s (log: $vlog)"

"$top/scripts/guest/run-guest.sh" --name vsock_test --image "$image" --no-build \
	--script "$top/tests/guest/vsock-guest.sh" --file "$tool:/bin/vsock-tool" \
	--timeout "$limit" --log "$serial" -- \
	-chardev "socket,id=vs,path=$sock" -device vhost-user-vsock-pci,chardev=vs \
	>/dev/null 2>"$logs/vsock_test.run-guest.log" &
gpid=$!

# --- host to guest, once the guest's services are up ----------------------
# The guest prints VSOCK-H2G-READY on its console when it listens on 6001
# and 6002; the host side connects through the backend's uds-path then.
ready=
for _ in $(seq $((limit * 5))); do
	if grep -q '^VSOCK-H2G-READY' "$serial" 2>/dev/null; then ready=1; break; fi
	kill -0 "$gpid" 2>/dev/null || break
	sleep 0.2
done
if [[ -n $ready ]]; then
	# No listener on 6099 in the guest: the backend must close the socket
	# (guest RST) at once, with no OK line.
	"$peer" connect "$uds" 6099 --timeout 10 >"$logs/vsock_test.host-6099.log" 2>&1 || true
	# Retry: the guest's listen() may follow its marker by a moment.
	"$peer" connect "$uds" 6001 --mode source 32M --retry 10 --timeout 100 \
		>"$logs/vsock_test.host-6001.log" 2>&1 || true
	"$peer" connect "$uds" 6002 --mode source 1M --echo-check --retry 10 --timeout 60 \
		>"$logs/vsock_test.host-6002.log" 2>&1 || true
else
	bad "the guest never printed VSOCK-H2G-READY (serial log: $serial)"
fi

grc=0
wait "$gpid" || grc=$?
gpid=
kill -0 "$vpid" 2>/dev/null || bad "vmio vsock is no longer running after the guest test (log: $vlog)"
# vmio's CPU time over the run (utime + stime, in clock ticks): for the
# report, a busy loop (an always-armed EPOLLOUT) would show here.
vcpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$vpid/stat" 2>/dev/null || echo "?")

# --- verdicts -------------------------------------------------------------
con=$(tr -d '\r' <"$serial")
case $grc in
0) ;;
124) bad "the guest did not finish within ${limit}s" ;;
125) bad "the guest did not run its test (QEMU failed or the guest crashed): $(tail -n 3 "$logs/vsock_test.run-guest.log")" ;;
*) bad "the guest script reported $grc failed step(s)" ;;
esac
while read -r line; do
	bad "guest: ${line#STEP }"
done < <(grep '^STEP .* FAIL' <<<"$con" || true)
for s in cid rst g2h half-close concurrent64 slow-reader h2g h2g-echo; do
	grep -q "^STEP $s " <<<"$con" || bad "guest step $s did not run"
done

# The host services exit once their connections are done; give stragglers
# a moment, then judge them by their own result lines.
for port in "${!hpid[@]}"; do
	for _ in $(seq 50); do kill -0 "${hpid[$port]}" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "${hpid[$port]}" 2>/dev/null; then
		bad "host service $port still waiting: $(tail -n 2 "$logs/vsock_test.host-$port.log")"
		continue
	fi
	rc=0
	wait "${hpid[$port]}" || rc=$?
	((rc == 0)) || bad "host service $port exited $rc: $(grep -v listening "$logs/vsock_test.host-$port.log" | tail -n 3)"
done

hl() { { grep -v listening "$logs/vsock_test.host-$1.log" 2>/dev/null || true; } | { grep -E 'conn=|summary|result=' || true; } | tail -n 1; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2" | head -n1; }
# The checksum of the pattern is computed here, independently of both ends.
fnv32=$("$peer" fnv 32M)
g2h_host=$(hl 5001)
[[ $(field recv_fnv "$g2h_host") == "$fnv32" ]] || bad "g2h: host checksum '$(field recv_fnv "$g2h_host")' is not the pattern's $fnv32"
g2h_guest=$(grep '^G2H ' <<<"$con" || true)
[[ $(field sent_fnv "$g2h_guest") == "$fnv32" ]] || bad "g2h: the guest's sent checksum is not the pattern's"
r6099=$(cat "$logs/vsock_test.host-6099.log" 2>/dev/null || true)
if [[ -n $ready ]]; then
	[[ $r6099 == *"result=error why=closed"* ]] ||
		bad "h2g-rst: CONNECT 6099 (no guest listener) should be closed by the backend; got: $r6099"
	ms=$(field ms "$r6099")
	((${ms:-9999} <= 2000)) || bad "h2g-rst: the backend took ${ms} ms to refuse"
	h2g_host=$(hl 6001)
	[[ $h2g_host == *result=ok* ]] || bad "h2g: host side: $(tail -n 2 "$logs/vsock_test.host-6001.log")"
	echo_host=$(hl 6002)
	[[ $echo_host == *result=ok* ]] || bad "h2g-echo: host side: $(tail -n 2 "$logs/vsock_test.host-6002.log")"
fi
h2g_guest=$(grep '^H2G ' <<<"$con" || true)
[[ $(field recv_fnv "$h2g_guest") == "$fnv32" ]] || bad "h2g: the guest's checksum is not the pattern's"

# --- report ---------------------------------------------------------------
row() { # scenario, line
	printf '  %-17s %-5s %7s ms %8s MB/s\n' "$1" "$(grep -q 'result=ok' <<<"$2" && echo ok || echo FAIL)" \
		"$(field ms "$2")" "$(field MBps "$2")"
}
echo "vsock_test: results (guest's view; TCG guest, one vCPU):"
row "rst" "$(grep 'port=5999' <<<"$con" | sed 's/result=error/result=ok/')"
row "g2h 32M" "$g2h_guest"
row "half-close" "$(grep '^HALF ' <<<"$con" || true)"
row "concurrent64" "$(grep 'summary conns=64' <<<"$con" || true)"
row "fast beside slow" "$(grep '^FAST ' <<<"$con" || true)"
row "slow reader" "$(grep '^SLOW ' <<<"$con" || true)"
row "h2g 32M" "$h2g_guest"
row "h2g-echo 1M" "$(hl 6002 || true)"
row "h2g-rst" "${r6099//result=error/result=ok}"

if ((${#failures[@]})); then
	echo "vsock_test: ${#failures[@]} failure(s); logs: $logs/vsock_test.*.log" >&2
	echo "--- serial console (last 40 lines) ---" >&2
	tail -n 40 <<<"$con" >&2
	echo "--- vmio -v (last 30 lines) ---" >&2
	tail -n 30 "$vlog" >&2
	exit 1
fi
echo "vsock_test: vmio used ${vcpu} s of CPU over the whole run"
echo "vsock_test: PASS in $((SECONDS - start))s"
