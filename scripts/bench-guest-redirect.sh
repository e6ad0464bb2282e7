#!/bin/bash
# The seed's table (the vsock sockmap series: "guest unix dgram sender ->
# guest vsock redirector -> host vsock server", 64 KiB payloads), measured
# in one guest boot: each relay below runs between the same unix datagram
# sender in the guest and the same host sink, rounds interleaved (A B C D
# A B C D ...), and the sink's MB/s (first byte to last, every byte
# checked) is reported as a median with its range and its ratio to socat.
#
#   socat    socat -b 65536 VSOCK-CONNECT:2:PORT UNIX-RECV:PATH (the seed's
#            redirector; -b because socat's default 8 KiB buffer cuts each
#            64 KiB datagram to its first 8 KiB)
#   plain    vmio-redirect-bench relay: recv() a datagram, write() it to
#            the vsock socket, blocking: the plainest copy relay
#   message  vmio redirect --engine copy UNIX-RECV:PATH VSOCK-CONNECT:2:PORT
#            (a datagram end: vmio's message engine, recvmmsg/sendmmsg)
#   sockmap  vmio redirect UNIX-RECV:PATH VSOCK-CONNECT:2:PORT (the kernel
#            moves the datagrams; Linux 6.4+ in the guest)
# Any row may also be given as NAME+OPTS, OPTS appended to its VSOCK-CONNECT
# address (vmio redirect) e.g. sockmap+vsock-buffer=0; and the column
# "waits" counts, for sockmap rows, how often the kernel's forwarding found
# the vsock socket out of credit and retried a jiffy later (a kretprobe on
# skb_send_sock returning -EAGAIN).
#
# usage: scripts/bench-guest-redirect.sh [--image DIR] [--rounds N]
#            [--bytes N] [--tx-buffer-size N] [--rows "socat plain ..."]
#            [--append KERNEL_ARGS] [--build DIR]
# Defaults: the image build/guest-6.12, built from the kernel package
# VMIO_GUEST_KERNEL_DEB names, or used as it is without it (the sockmap
# rows need Linux 6.4+),
# 5 rounds of 128 MiB, `vmio vsock --tx-buffer-size 4m`, all four rows.
# Needs socat on this machine (it goes into the guest with its libraries).
# The guest runs under TCG here: MB/s are far below a KVM guest's, and the
# ratios are what compares. Its CPU model is qemu64 unless VMIO_GUEST_CPU
# says otherwise: with run-guest.sh's default (max) the guest kernel copies
# with `rep movsb` (ERMS), which TCG emulates a byte at a time, and that
# one instruction then takes most of every row's time (all rows about 3x
# slower, their ratios squeezed towards the count of copies each makes).
# --append: more guest kernel arguments, e.g. init_on_alloc=0 (Debian's
# kernels zero every page they allocate: a quarter of the sockmap row's
# time in this guest, perf says).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
image=$top/build/guest-6.12
rounds=5
bytes=128M
txbuf=4m
rows="socat plain message sockmap"
append=
export VMIO_GUEST_CPU=${VMIO_GUEST_CPU:-qemu64}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
while (($#)); do
	case $1 in
	--image) image=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--bytes) bytes=$2; shift 2 ;;
	--tx-buffer-size) txbuf=$2; shift 2 ;;
	--rows) rows=$2; shift 2 ;;
	--append) append=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "bench-guest-redirect: unknown option '$1'" >&2; usage ;;
	esac
done
die() { echo "bench-guest-redirect: $*" >&2; exit 1; }
for b in vmio vmio-redirect-bench; do
	[[ -x $build/$b ]] || die "$build/$b is missing: build with 'ninja -C $build'"
done
socat=$(command -v socat || true)
[[ -n $socat ]] || die "socat is not installed (package socat)"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds: '$rounds' is not a number"
read -r -a rowv <<<"$rows"
((${#rowv[@]})) || die "--rows: no row"
for r in "${rowv[@]}"; do
	case ${r%%+*} in socat | plain | message | sockmap) ;;
	*) die "--rows: unknown row '$r' (socat, plain, message, sockmap)" ;;
	esac
done
# An image is built only from the kernel package named: build-image.sh
# without one would put the suite's default kernel (6.1) into the cache.
if [[ -n ${VMIO_GUEST_KERNEL_DEB:-} ]]; then
	"$top/scripts/guest/build-image.sh" "$image" >/dev/null || die "building the guest image in $image failed"
elif [[ ! -f $image/stamp ]]; then
	die "no guest image in $image: set VMIO_GUEST_KERNEL_DEB to a linux-image-6.12.*.deb (apt-get download linux-image-6.12.<N>+deb12-amd64) or pass --image"
fi
image=$(cd "$image" && pwd)
krel=$(cat "$image/kernel-release")
logs=$image/logs/bench-redirect
mkdir -p "$logs"
rm -f "$logs"/*.log
tmp=$(mktemp -d /tmp/vmio-bench-redir.XXXXXX)
pids=()
vpid=
cleanup() {
	local p
	for p in "${pids[@]}" $vpid; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}" $vpid; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT

# --- the backend, then one sink per run, all before the guest boots -------
"$build/vmio" vsock --guest-cid 3 --socket "$tmp/vhost.sock" --uds-path "$tmp/vm.vsock" \
	--tx-buffer-size "$txbuf" -v >"$logs/vmio.log" 2>&1 &
vpid=$!
for _ in $(seq 100); do [[ -S $tmp/vhost.sock ]] && break; sleep 0.05; done
[[ -S $tmp/vhost.sock ]] || die "vmio vsock did not start: $(cat "$logs/vmio.log")"
runs=$((rounds * ${#rowv[@]}))
limit=$((60 + runs * 30))
for ((i = 1; i <= runs; i++)); do
	port=$((7000 + i))
	"$build/vmio-redirect-bench" sink --path "$tmp/vm.vsock_$port" --bytes "$bytes" \
		--timeout "$limit" >"$logs/sink-$port.log" 2>&1 &
	pids+=($!)
done

# --- the guest's half -------------------------------------------------------
cat >"$tmp/guest.sh" <<EOF
# shellcheck shell=sh
V=/bin/vmio B=/bin/vmio-redirect-bench S=/bin/socat
rounds=$rounds bytes=$bytes rows="$rows"
EOF
cat >>"$tmp/guest.sh" <<'EOF'
T=/sys/kernel/tracing
# skb_send_sock's -EAGAIN: a forwarded datagram met a vsock socket out of
# credit, and the kernel retries it a jiffy later.
tracing=
if mount -t tracefs tracefs $T 2>/dev/null &&
	echo 'r:smwait skb_send_sock ret=$retval:s32' >>$T/kprobe_events 2>/dev/null &&
	echo 'ret == -11' >$T/events/kprobes/smwait/filter &&
	echo 1 >$T/events/kprobes/smwait/enable; then
	tracing=1
fi
wait_socket() { i=0; while [ ! -S "$1" ] && [ $i -lt 200 ]; do i=$((i + 1)); usleep 50000; done; }
port=7000
r=1
while [ $r -le $rounds ]; do
	for row in $rows; do
		port=$((port + 1))
		name=${row%%+*}
		opts=
		[ "$name" = "$row" ] || opts=,${row#*+}
		[ -z "$tracing" ] || echo >$T/trace
		rm -f /tmp/in.sock
		case $name in
		socat) $S -b 65536 VSOCK-CONNECT:2:$port UNIX-RECV:/tmp/in.sock >/tmp/relay.log 2>&1 & ;;
		plain) $B relay --from udg:/tmp/in.sock --to vsock:2:$port --timeout 60 >/tmp/relay.log 2>&1 & ;;
		message) $V redirect --engine copy UNIX-RECV:/tmp/in.sock VSOCK-CONNECT:2:$port$opts >/tmp/relay.log 2>&1 & ;;
		sockmap) $V redirect --engine sockmap UNIX-RECV:/tmp/in.sock VSOCK-CONNECT:2:$port$opts >/tmp/relay.log 2>&1 & ;;
		esac
		rp=$!
		wait_socket /tmp/in.sock
		out=$($B send --to udg:/tmp/in.sock --bytes $bytes --timeout 60 2>&1)
		# socat takes no empty datagram for an end: it stops once the
		# sink, which has all it expects, closes.
		i=0
		while kill -0 $rp 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); usleep 50000; done
		kill $rp 2>/dev/null
		wait $rp
		waits=-
		[ -z "$tracing" ] || waits=$(grep -c 'smwait:' $T/trace)
		echo "BENCH round=$r row=$row port=$port waits=$waits $out relay=\"$(tail -n 1 /tmp/relay.log | tr -d '"')\""
	done
	r=$((r + 1))
done
EOF
"$top/scripts/guest/run-guest.sh" --name bench-guest-redirect --image "$image" --no-build \
	--script "$tmp/guest.sh" --exe "$build/vmio:/bin/vmio" \
	--exe "$build/vmio-redirect-bench:/bin/vmio-redirect-bench" --exe "$socat:/bin/socat" \
	--timeout "$limit" --log "$logs/serial.log" ${append:+--append "$append"} -- \
	-chardev "socket,id=vs,path=$tmp/vhost.sock" -device vhost-user-vsock-pci,chardev=vs \
	>/dev/null 2>"$logs/run-guest.log" || die "the guest failed: $(tail -n 2 "$logs/run-guest.log")"

# --- the table ----------------------------------------------------------------
con=$(tr -d '\r' <"$logs/serial.log")
declare -A mbps waits
bad=0
for ((i = 1; i <= runs; i++)); do
	port=$((7000 + i))
	line=$(grep "^BENCH .* port=$port " <<<"$con" || true)
	row=$(sed -n 's/.* row=\([^ ]*\) .*/\1/p' <<<"$line")
	sink=$(tail -n 1 "$logs/sink-$port.log" 2>/dev/null || true)
	if [[ -z $row || $sink != *intact=1* ]]; then
		echo "bench-guest-redirect: run on port $port (${row:-?}) failed: sink: '$sink'; guest: '${line:-nothing}'" >&2
		bad=1
		continue
	fi
	mbps[$row]+="$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$sink") "
	waits[$row]+="$(sed -n 's/.* waits=\([^ ]*\).*/\1/p' <<<"$line") "
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
base=$(median <<<"${mbps[socat]:-}")
echo "bench-guest-redirect: Linux $krel guest (TCG, -cpu $VMIO_GUEST_CPU${append:+, $append}), vmio vsock --tx-buffer-size $txbuf, $rounds interleaved rounds of $bytes in 64 KiB datagrams"
printf '%-34s %9s %17s %9s  %s\n' row "MB/s" "(min-max)" "x socat" "waits per run"
for row in "${rowv[@]}"; do
	v=${mbps[$row]:-}
	[[ -n $v ]] || { printf '%-34s %9s\n' "$row" "failed"; continue; }
	m=$(median <<<"$v")
	lo=$(tr ' ' '\n' <<<"$v" | grep . | sort -g | head -n 1)
	hi=$(tr ' ' '\n' <<<"$v" | grep . | sort -g | tail -n 1)
	ratio=-
	[[ -z $base ]] || ratio=$(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
	printf '%-34s %9s %17s %9s  %s\n' "$row" "$m" "($lo-$hi)" "$ratio" "${waits[$row]}"
done
echo "bench-guest-redirect: per run, in order: $logs/serial.log (BENCH lines), sinks: $logs/sink-*.log"
exit $bad
