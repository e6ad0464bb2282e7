#!/bin/bash
# Guest test of issue 36 for `vmio net --tap`: one boot of the guest on
# `vmio net --tap vmtap0 --control C` (QEMU's virtio-net-pci on -netdev
# vhost-user, as net_test.sh, the peer in a network namespace of the
# test's own at 10.0.88.1/24 on the TAP vmio created, the guest
# 10.0.88.2/24), TCP streams both ways between the namespace and the
# guest (tests/guest/net-handover-guest.sh), and vmio replaced under them
# again and again. Two modes, one idea (the guest must not notice):
#   (default)  20 `vmio reload C` (VMIO_HANDOVERS), alternating between
#              two builds as handover_test.sh does, each swap what a
#              package upgrade does (the file copied beside the path vmio
#              was started from and renamed over it). The two builds are
#              the tip and a copy of it (another inode): the commit in
#              handover-prev.commit (6dae97e) predates net's hand-over
#              (ca18cca), and its vmio net refuses a reload ("this command
#              cannot hand over (yet)").
#   --crash    `vmio net --fd-store` under tests/guest/fdstore-supervisor.py
#              (systemd's fd store and Restart=, RestartSec=500ms, without
#              systemd), killed with SIGKILL 10 times (VMIO_CRASH_KILLS);
#              the next vmio takes the session back from the store.
# QEMU's chardev has no reconnect=: a vhost-user disconnect would end the
# device for good, and QEMU would log it. --backend xdp (or xdp-copy):
# `vmio net --xdp xa` in a namespace of its own instead of the TAP, xa's
# veth peer xb (10.0.88.1/24) in the test's, as net_test.sh sets them up;
# the XSKs are not handed over but opened anew by each new vmio, so the
# frames that reach xa in between go to its host stack (TCP sends them
# again).
#
# Checked, at each replacement:
#   - the reload exits 0, the pid serving --control changes to a process
#     running the file installed, the old one exits (handover-host.sh);
#     or, for a kill, the supervisor starts vmio again and the new pid
#     serves --control (after vmio's document said, before the kill, the
#     store had everything: fd_store.owed 0, writes > 0)
#   - vmio's document (vmio stats --json): one session, still connected,
#     no session ended, no protocol error
#   - the TAP is the same interface (its ifindex; --backend tap)
#   - both streams move again: the namespace receives more from the guest,
#     and the guest acknowledges more from the namespace (ss), within 20 s
# and over the run: both streams byte for byte at their receivers
# (handover-peer: the pattern, and the writer checks the receiver's count
# and checksum), the guest's kernel log clean (check_dmesg), QEMU's log
# without a vhost-user line, a disconnect or a reconnect; with --crash
# the supervisor started vmio kills+1 times, saw each SIGKILL, and the
# store kept as many fds at every kill.
# Reported: the reload (or restart) times, the time until both streams
# moved again, and the longest gap each receiver saw between two reads
# (the writers pace NH_RATE, 256 KiB/s).
#
# usage: tests/guest/net_handover_test.sh [--crash] [--backend tap|xdp|xdp-copy] [--platform NAME]
#          [--image ROOT] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
#          [--handover-peer BIN]
# Needs root (a network namespace, a TAP). Exit 0 when everything passed;
# 1 with "net_handover_test: FAIL: ..." (net_crash_test) lines otherwise.
# Logs: ROOT/NAME/logs/net_handover_test.*.log (net_crash_test.*).
set -euo pipefail

crash=
hpeer=''
backend=tap
args=()
while (($#)); do
	case $1 in
	--crash) crash=1; shift ;;
	--handover-peer) hpeer=$2; shift 2 ;;
	--backend) backend=$2; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
case $backend in
tap | xdp | xdp-copy) ;;
*) echo "net_handover_test: --backend is tap, xdp or xdp-copy, not '$backend'" >&2; exit 2 ;;
esac
name=net_handover_test
[[ -z $crash ]] || name=net_crash_test
[[ $backend == tap ]] || name=${name}_${backend//-/_}
dev=net
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
# shellcheck source=tests/guest/handover-host.sh
. "$(dirname "$0")/handover-host.sh"
# The boot (10 s), the replacements (a few seconds each under TCG) and
# the streams' end.
limit=${VMIO_GUEST_TIMEOUT:-400}
vmio_pids=()
# shellcheck disable=SC2317 # called from vh_cleanup
vh_cleanup_hook() {
	local p
	for p in "${vmio_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
	[[ -z ${vns:-} ]] || ip netns del "$vns" 2>/dev/null || true
}
vh_net_setup "${args[@]}"
# The device's side: the TAP vmio creates in ns, or xa in vmio's own
# namespace vns with its peer xb in ns (net_test.sh says why xb's tx
# checksumming is off).
peer_if=vmtap0
port=(--tap vmtap0)
if [[ $backend != tap ]]; then
	command -v ethtool >/dev/null || fail "'ethtool' is missing (package ethtool)"
	vns=$ns-v
	ip netns add "$vns" || fail "cannot create network namespace $vns"
	ip -n "$vns" link set lo up
	vmio_wrap=(ip netns exec "$vns")
	{ ip -n "$vns" link add xa type veth peer name xb netns "$ns" &&
		ip -n "$vns" link set xa up; } ||
		fail "cannot create the veth pair xa ($vns) / xb ($ns)"
	nsx ethtool -K xb tx off >/dev/null || fail "cannot turn off xb's tx checksum offload"
	peer_if=xb
	port=(--xdp xa)
	[[ $backend == xdp ]] || port+=(--xdp-copy)
fi
if [[ -n $crash ]]; then
	COUNT=${VMIO_CRASH_KILLS:-10}
else
	COUNT=${VMIO_HANDOVERS:-20}
fi
RATE=262144
ctl=$tmp/control.sock
client=$vmio # runs stats and reload
stale=0


# --- vmio's figures ---------------------------------------------------------
# "key value" lines from vmio's document: the session's counters and the
# fd store's.
net_doc() {
	vh_net_doc "$client" "$ctl" '
print("pid", d["pid"])
fs = v.get("fd_store")
if fs:
    print("fd_store_owed", fs["owed"])
    print("fd_store_writes", fs["writes"])'
}
dval() { sed -n "s/^$2 //p" <<<"$1"; } # document, key
# Bytes the namespace received from the guest (7101), and bytes of the
# namespace's stream the guest acknowledged (7102), from the namespace's
# sockets.
flow() {
	local g h
	g=$(nsx ss -tinH state established '( sport = :7101 )' 2>/dev/null | sed -n 's/.*bytes_received:\([0-9]*\).*/\1/p' | head -n1)
	h=$(nsx ss -tinH state established '( dport = :7102 )' 2>/dev/null | sed -n 's/.*bytes_acked:\([0-9]*\).*/\1/p' | head -n1)
	echo "${g:-0} ${h:-0}"
}
ifindex() { nsx cat /sys/class/net/vmtap0/ifindex 2>/dev/null || echo gone; }
declare -a resume_ms=()
# After vmio was replaced: the figures, the TAP, and both streams moving
# again (20 s, in tenths: TCP's retransmission timer backs off while no
# vmio runs).
check_replaced() { # what
	local doc g0 h0 g h t0 k
	doc=$(net_doc)
	[[ $(dval "$doc" sessions) == 1 && $(dval "$doc" session_ends) == 0 &&
		$(dval "$doc" protocol_errors) == 0 && $(dval "$doc" connected) == 1 ]] ||
		bad "$1: vmio's document: $(tr '\n' ' ' <<<"$doc") (wanted sessions 1, session_ends 0, protocol_errors 0, connected 1)"
	[[ $backend != tap || $(ifindex) == "$tap_ifindex" ]] || bad "$1: vmtap0's ifindex is $(ifindex), not $tap_ifindex"
	read -r g0 h0 < <(flow)
	t0=$(date +%s%N)
	for ((k = 0; k < 200; k++)); do
		read -r g h < <(flow)
		((g > g0 && h > h0)) && break
		sleep 0.1
	done
	if ((g > g0 && h > h0)); then
		resume_ms+=("$((($(date +%s%N) - t0) / 1000000))")
	else
		bad "$1: the streams did not move within 20 s (namespace received $g0 -> $g, guest acknowledged $h0 -> $h)"
	fi
}
# Until vmio's document says the store holds what it is now (5 s).
kept_now() {
	local doc
	for _ in $(seq 50); do
		doc=$(net_doc)
		[[ $(dval "$doc" fd_store_owed) == 0 && $(dval "$doc" fd_store_writes) -gt 0 ]] && return 0
		sleep 0.1
	done
	return 1
}
median_worst() { # values...
	local sorted
	sorted=$(printf '%s\n' "$@" | sort -n)
	echo "median $(sed -n "$((($# + 1) / 2))p" <<<"$sorted") ms, worst $(tail -n1 <<<"$sorted") ms"
}

# --- the namespace's receiver, vmio and its TAP, QEMU ------------------------
# Spawned with ip netns exec itself, not nsx: the pid vh_spawn keeps must
# be handover-peer's (ip execs it), which takes SIGUSR1; a subshell
# running nsx would die of it.
vh_spawn 7101 ip netns exec "$ns" "$hpeer" recv tcp-listen:7101 --timeout "$limit"
if [[ -n $crash ]]; then
	vh_start_supervised --fd-store --socket "$sock" "${port[@]}" --control "$ctl"
else
	bindir=$tmp/bin
	mkdir -p "$bindir"
	cp "$vmio" "$bindir/vmio-a"
	cp "$vmio" "$bindir/vmio-b"
	builds=("$bindir/vmio-a" "$bindir/vmio-b") # reload i installs builds[i % 2]
	start_path=$bindir/vmio
	install_at_start "${builds[0]}"
	vmio=$start_path
	vh_start_vmio --socket "$sock" "${port[@]}" --control "$ctl"
	vmio_pids+=("$vpid")
fi
first_pid=$vpid
{ nsx ip addr add 10.0.88.1/24 dev "$peer_if" && nsx ip link set "$peer_if" up; } ||
	fail "cannot configure $peer_if in $ns: $(nsx ip link 2>&1)"
tap_ifindex=$(ifindex)
# No reconnect= on the chardev (see above). vectors=0: see net_test.sh.
# shellcheck disable=SC2054 # QEMU's commas
dev_qemu=(-chardev "socket,id=c,path=$sock" -netdev "vhost-user,chardev=c,id=n"
	-device "virtio-net-pci,netdev=n,mac=52:54:00:00:88:02,vectors=0${packed:+,packed=on}")
vh_boot "$top/tests/guest/net-handover-guest.sh" --file "$hpeer:/bin/handover-peer" \
	--append "NH_RATE=$RATE NH_TIMEOUT=$limit"

ready=
declare -a swap_ms=()
done_count=0
if vh_wait_marker NET-HANDOVER-READY; then
	ready=1
	vh_spawn 7102 ip netns exec "$ns" "$hpeer" send tcp:10.0.88.2:7102 --rate $RATE --timeout "$limit"
	wait_log first-byte 30 "$logs/$name.host-7101.log" ||
		bad "g2h: the namespace never received a byte: $(tail -n 2 "$logs/$name.host-7101.log")"
	wait_log connected 30 "$logs/$name.host-7102.log" ||
		bad "h2g: the namespace never connected to the guest: $(tail -n 2 "$logs/$name.host-7102.log")"
	check_replaced "before the first replacement"
else
	bad "the guest never printed NET-HANDOVER-READY (serial log: $serial)"
fi

# --- the replacements ------------------------------------------------------
if [[ -n $ready && ${#failures[@]} -eq 0 ]]; then
	pid=$(serving_pid)
	[[ $pid == "$first_pid" || -n $crash ]] || bad "the control socket is served by pid $pid, not vmio's $first_pid"
	sup_out=${sup_out:-}
	for ((i = 1; i <= COUNT; i++)); do
		if [[ -n $crash ]]; then
			what="kill $i"
			kept_now || { bad "$what: vmio's store never caught up before it: $(net_doc | tr '\n' ' ')"; break; }
			t0=$(date +%s%N)
			kill -KILL "$pid"
			# The supervisor's next start (RestartSec=500ms), then its
			# READY=1 and its --control.
			wait_log "^supervisor: started pid=[0-9]* n=$((i + 1)) " 10 "$sup_out" ||
				{ bad "$what: the supervisor did not start vmio again within 10 s: $(tail -n 2 "$sup_out")"; break; }
			new=$(sed -n "s/^supervisor: started pid=\([0-9]*\) n=$((i + 1)) .*/\1/p" "$sup_out")
			wait_log "^supervisor: ready pid=$new " 10 "$sup_out" ||
				{ bad "$what: vmio $new did not say READY=1 within 10 s: $(tail -n 3 "$vlog")"; break; }
			for _ in $(seq 50); do [[ $(serving_pid) == "$new" ]] && break; sleep 0.1; done
			[[ $(serving_pid) == "$new" ]] || { bad "$what: the new vmio $new does not serve --control"; break; }
			swap_ms+=("$((($(date +%s%N) - t0) / 1000000))")
			pid=$new
		else
			what="reload $i"
			install_at_start "${builds[i % 2]}"
			ino=$(stat -c %i "$start_path")
			t0=$(date +%s%N)
			rc=0
			out=$("$client" reload --timeout 30000 "$ctl" 2>&1) || rc=$?
			swap_ms+=("$((($(date +%s%N) - t0) / 1000000))")
			((rc == 0)) || { bad "$what: exit $rc: $out"; break; }
			took_over "$what" "$pid" "$ino" || break
			pid=$new_pid
			vmio_pids+=("$pid")
			vpid=$pid # what vh_cleanup stops, and whose CPU time is reported
		fi
		check_replaced "$what"
		done_count=$i
		((${#failures[@]} == 0)) || break
	done
fi

# --- the end: the namespace's writer, then the guest's ----------------------
if [[ -n $ready ]]; then
	# The last figures while the guest still runs (its power-off ends
	# the session).
	doc=$(net_doc)
	[[ $(dval "$doc" sessions) == 1 && $(dval "$doc" session_ends) == 0 ]] ||
		bad "after the replacements, vmio's document: $(tr '\n' ' ' <<<"$doc")"
	kill -USR1 "${hpid[7102]}" 2>/dev/null || true
	if ! nsx "$tool" tcp-connect 10.0.88.2 7109 --mode source 1 --retry 10 --timeout 30 \
		>"$logs/$name.host-7109.log" 2>&1; then
		bad "the stop connection failed: $(tail -n 1 "$logs/$name.host-7109.log")"
		# The guest would wait for it until its limit: the path is
		# broken, end the guest now (run-guest.sh stops its QEMU).
		kill "$gpid" 2>/dev/null || true
	fi
fi
vh_finish_guest
[[ -z $ready ]] || vh_expect_steps ping g2h h2g dmesg
vh_wait_services
if [[ -n $ready ]]; then
	((done_count == COUNT)) || bad "$done_count of $COUNT replacements done"
	for port in 7101 7102; do
		[[ $(hl $port) == *result=ok* ]] || bad "host-$port: $(tail -n 2 "$logs/$name.host-$port.log")"
	done
fi
# QEMU's log (run-guest.sh's own lines aside): nothing about its
# vhost-user device going or coming back.
qsaid=$(grep -v "^$name: " "${serial%.serial.log}.run-guest.log" 2>/dev/null |
	grep -iE 'vhost|disconnect|reconnect' | head -n 3 || true)
[[ -z $qsaid ]] || bad "QEMU logged: $qsaid"
if [[ -n $crash ]]; then
	vh_stop_supervised "$done_count"
else
	# The first vmio is this script's child: reaped once it has handed
	# over; the last one is stopped here, and must go.
	[[ $first_pid == "$vpid" ]] || wait "$first_pid" 2>/dev/null || true
	kill -TERM "$vpid" 2>/dev/null || true
	for _ in $(seq 50); do gone "$vpid" && break; sleep 0.1; done
	gone "$vpid" || bad "the last vmio $vpid did not exit within 5 s of SIGTERM"
fi

# --- report ---------------------------------------------------------------
gap() { sed -n 's/.* max_gap_ms=\([0-9]*\).*/\1/p' <<<"$1"; }
h2g_guest=$(grep '^NH-h2g ' <<<"$con" || true)
g2h_guest=$(grep '^NH-g2h ' <<<"$con" || true)
echo "$name: results (TCG guest, Linux $kernel_release, QEMU $qemu_major.$qemu_minor):"
if ((${#swap_ms[@]})); then
	if [[ -n $crash ]]; then
		echo "  kills: $done_count of $COUNT; kill -9 to the new vmio serving --control: $(median_worst "${swap_ms[@]}")"
		echo "  the store: $kept fds kept at each kill"
	else
		echo "  reloads: $done_count of $COUNT (the tip and its copy, alternating); 'vmio reload': $(median_worst "${swap_ms[@]}")"
		echo "  the old pid still answering --control right after a reload's exit 0: $stale time(s)"
	fi
fi
((${#resume_ms[@]} == 0)) || echo "  from the new vmio serving to both streams moving: $(median_worst "${resume_ms[@]}")"
echo "  longest gap between two reads (writers paced at $RATE B/s):"
echo "    g2h  namespace  $(gap "$(hl 7101)") ms   $(hl 7101 | sed -n 's/.* \(recvd=[0-9]*\) .*/\1/p'); the guest's writer blocked at most $(field max_block_ms "$g2h_guest") ms"
echo "    h2g  guest      $(gap "$h2g_guest") ms   $(sed -n 's/.* \(recvd=[0-9]*\) .*/\1/p' <<<"$h2g_guest"); the namespace's writer blocked at most $(field max_block_ms "$(hl 7102)") ms"
vh_conclude
