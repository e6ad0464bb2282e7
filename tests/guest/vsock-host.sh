# shellcheck shell=bash
# Sourced by the host halves of the guest tests that boot the guest with
# `vmio vsock` serving its vhost-user-vsock-pci device (vsock_test.sh,
# redirect_test.sh): options, the backend, the boot, host services on
# <uds-path>_PORT, and the verdicts every such test gives the same way.
# net_test.sh uses it too: it sets dev=net (the vmio device; default vsock)
# before sourcing, and after vh_setup dev_qemu (QEMU's options for the
# device, instead of vhost-user-vsock-pci on $sock), vmio_wrap (a command
# vmio runs under: ip netns exec NS) and a vh_cleanup_hook function.
# The caller sets `name` (message and log prefix) before sourcing, then:
#   vh_setup "$@"        options, checks, the image, logs, a cleanup trap;
#                        --platform NAME (6.1, 6.12, 6.12-bpo, 7, 7-q11: the guest
#                        kernel and QEMU, scripts/guest/platform.sh) sets
#                        image (ROOT/NAME), qemu, qemu_major, qemu_minor
#                        and kernel_release for the caller
#   vh_service PORT ...  a uds-peer service, before the guest boots
#   vh_spawn PORT CMD... any such service, logged as host-PORT
#   vh_start_vmio [ARGS] `vmio vsock --guest-cid 3` (or vmio $dev ARGS), listening on
#                        each socket in socks
#   vh_start_supervised ARGS  vmio $dev ARGS under fdstore-supervisor.py
#   vh_stop_supervised K the supervisor's verdicts after K kills, SIGTERM
#   vh_boot SCRIPT ...   the guest in the background (more run-guest options,
#                        then -- and more QEMU options), on $sock, logging
#                        its console to $serial; sets gpid
#   vh_wait_marker M     waits for line M on the serial console
#   vh_finish_guest      waits for the guest; judges its exit and STEP lines
#                        (with who=NAME: NAME in its messages)
#   vh_expect_steps S... each guest step must have run
#   vh_wait_services     each host service must exit 0
#   vh_stop_vmio_stats A Z  SIGTERM to vmio; its --stats keys A above 0, Z at 0
#   vh_conclude          failures and logs, or PASS; exits
#   vh_net_setup ARGS    for net tests: vh_setup, hpeer, a network namespace
#   vh_net_doc B C [PY]  vmio's document (vmio stats --json) as key value
# A test with two guests sets sock and serial before each vh_boot, keeps
# the first gpid in pids, and sets gpid and serial back before finishing it.
# Exit status of the test: 0 when every scenario passed; 1 with
# "$name: FAIL: ..." lines otherwise. Logs: ROOT/NAME/logs/$name.*.log,
# where --packed and --in-order add _packed and _in_order to name.

: "${name:?set name before sourcing vsock-host.sh}"
dev=${dev:-vsock}
vmio_wrap=()
dev_qemu=()
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
image=$top/build/guest # the guest root; after vh_setup, the platform's image
platform=6.1           # --platform (scripts/guest/platform.sh)
vmio=$top/build/vmio
tool=$top/build/tests/guest/vsock-tool
peer=$top/build/tests/guest/uds-peer
# One boot (~5 s under TCG) plus the transfers; the whole run is bounded.
limit=${VMIO_GUEST_TIMEOUT:-200}

failures=()
fail() { echo "$name: FAIL: $*" >&2; exit 1; }
bad() { echo "$name: FAIL: $*" >&2; failures+=("$*"); }
# The value of key=VALUE in a result line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2" | head -n1; }

pids=()
vpid=
gpid=
tmp=
ns= # vh_net_setup's network namespace
packed=   # --packed: the devices on packed rings (QEMU packed=on)
in_order= # --in-order: vhost-user-vsock-pci with in_order=on (QEMU 10)
# shellcheck disable=SC2317 # called from the EXIT trap
vh_cleanup() {
	# Whatever ended the script: no backend, QEMU or peer left behind
	# (run-guest.sh kills its own QEMU when it is killed).
	local p
	for p in $gpid "${pids[@]}" $vpid; do
		kill "$p" 2>/dev/null || true
	done
	for p in $gpid "${pids[@]}" $vpid; do
		wait "$p" 2>/dev/null || true
	done
	! declare -F vh_cleanup_hook >/dev/null || vh_cleanup_hook
	[[ -z $tmp ]] || rm -rf "$tmp"
}

vh_setup() {
	while (($#)); do
		case $1 in
		--image) image=$2; shift 2 ;;
		--vmio) vmio=$2; shift 2 ;;
		--vsock-tool) tool=$2; shift 2 ;;
		--uds-peer) peer=$2; shift 2 ;;
		--packed) packed=1; shift ;;
		--in-order) in_order=1; shift ;;
		--platform) platform=$2; shift 2 ;;
		*) echo "usage: $0 [--platform 6.1|6.12|6.12-bpo|7|7-q11] [--packed] [--in-order] [--image ROOT] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]" >&2; exit 2 ;;
		esac
	done
	# A ring variant's messages and logs go by a name of its own: the
	# packed run of a test must not overwrite the split run's logs.
	name+=${packed:+_packed}${in_order:+_in_order}
	local b
	for b in "$vmio" "$tool" "$peer"; do
		[[ -x $b ]] || fail "$b is missing: build with 'ninja -C build'"
	done
	"$vmio" "$dev" --help >/dev/null 2>&1 || fail "'$vmio $dev --help' failed: this vmio has no $dev device"

	# shellcheck source=scripts/guest/platform.sh
	. "$top/scripts/guest/platform.sh"
	platform_check "$platform" || fail "--platform $platform"
	start=$SECONDS
	image=$("$top/scripts/guest/build-image.sh" --platform "$platform" "$image") ||
		fail "building the guest image for platform $platform failed"
	qemu=$(guest_qemu "$image" 2>&1) || fail "$qemu"
	read -r qemu_major qemu_minor <<<"$(qemu_version "$qemu")"
	[[ -n ${qemu_minor:-} ]] || fail "cannot tell the version of $qemu: $("$qemu" --version 2>&1 | head -n 2)"
	kernel_release=$(cat "$image/kernel-release")
	# Each platform's logs in its image directory (build/guest/6.12/logs).
	echo "$name: platform $platform: Linux $kernel_release, QEMU $qemu_major.$qemu_minor ($qemu)"
	logs=$image/logs
	mkdir -p "$logs"
	serial=$logs/$name.serial.log
	vlog=$logs/$name.vmio.log
	rm -f "$logs/$name".*.log

	# Unix socket paths are limited to 108 bytes: keep them in a short /tmp dir.
	tmp=$(mktemp -d "/tmp/vmio-$name.XXXXXX")
	sock=$tmp/vhost.sock
	uds=$tmp/vm.vsock
	socks=("$sock")
	trap vh_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# Started before the guest boots: the guest connects as soon as it is up.
declare -A hpid=()
vh_spawn() { # port, command...
	local port=$1
	shift
	"$@" >"$logs/$name.host-$port.log" 2>&1 &
	hpid[$port]=$!
	pids+=("$!")
}
vh_service() { # port, uds-peer options...
	local port=$1
	shift
	vh_spawn "$port" "$peer" listen "${uds}_$port" --timeout "$limit" "$@"
}

vh_start_vmio() { # [vmio $dev options, instead of one vsock VM with CID 3]
	# QEMU 7.2 does not retry a vhost-user socket: the backend must
	# listen before QEMU starts.
	(($#)) || set -- --guest-cid 3 --socket "$sock" --uds-path "$uds"
	# VMIO_GUEST_VMIO_DEBUG=1: -v -v, every vhost-user message in the log
	# with its payload (how docs/qemu-11.md compares QEMU 10 and 11).
	"${vmio_wrap[@]}" "$vmio" "$dev" "$@" -v ${VMIO_GUEST_VMIO_DEBUG:+-v} >"$vlog" 2>&1 &
	vpid=$!
	local s
	for s in "${socks[@]}"; do
		for _ in $(seq 100); do
			[[ -S $s ]] && break
			kill -0 "$vpid" 2>/dev/null || fail "vmio $dev exited at start: $(cat "$vlog")"
			sleep 0.05
		done
		[[ -S $s ]] || fail "vmio $dev did not create $s within 5 s (log: $vlog)"
	done
}

# vmio $dev under tests/guest/fdstore-supervisor.py (systemd's fd store and
# Restart=, without systemd), inside vmio_wrap; vpid is the supervisor's
# pid, its lines go to sup_out (default logs/NAME.supervisor.log), every
# vmio's to vlog. Returns once the first vmio said READY=1 and listens.
vh_start_supervised() { # vmio $dev options
	sup_out=${sup_out:-$logs/$name.supervisor.log}
	"${vmio_wrap[@]}" python3 "$top/tests/guest/fdstore-supervisor.py" --notify "$tmp/notify" \
		--log "$vlog" -- "$vmio" "$dev" "$@" -v >"$sup_out" 2>&1 &
	vpid=$!
	for _ in $(seq 100); do
		grep -q 'supervisor: ready' "$sup_out" && [[ -S $sock ]] && break
		kill -0 "$vpid" 2>/dev/null || break
		sleep 0.05
	done
	grep -q 'supervisor: ready' "$sup_out" || fail "vmio did not say READY=1 within 5 s: $(cat "$sup_out" "$vlog")"
}

# The end of a run under vh_start_supervised with KILLS SIGKILLs: the
# supervisor started vmio KILLS+1 times and saw each SIGKILL, and the store
# kept as many fds at every kill (sets kept, that count); then SIGTERM,
# on which vmio must exit 0. Sets vcpu, vh_conclude's figure, to the CPU
# time of every vmio of the run, not the supervisor's.
vh_stop_supervised() { # kills
	local starts kills
	starts=$(grep -c 'supervisor: started' "$sup_out" || true)
	kills=$(grep -c 'supervisor: died .*status=-9 ' "$sup_out" || true)
	((starts == $1 + 1 && kills == $1)) ||
		bad "the supervisor started vmio $starts times and saw $kills SIGKILLs (wanted $(($1 + 1)) and $1)"
	kept=$(sed -n 's/^supervisor: died .*status=-9 .*kept=\([0-9]*\) .*/\1/p' "$sup_out" | sort -u | tr '\n' ' ')
	kept=${kept% }
	[[ $kept =~ ^[0-9]+$ ]] || bad "the store's size changed from kill to kill: ${kept:-none}"
	if kill -0 "$vpid" 2>/dev/null; then
		kill -TERM "$vpid"
		wait "$vpid" || bad "vmio under the supervisor exited $? on SIGTERM"
		vpid=
	fi
	grep -q '^supervisor: exit status=0$' "$sup_out" || bad "vmio did not exit 0 on SIGTERM: $(tail -n 2 "$sup_out")"
	vcpu=$(sed -n 's/^supervisor: died .* cpu_s=\([0-9.]*\) .*/\1/p' "$sup_out" | awk '{ s += $1 } END { printf "%.2f", s }')
}

serials=()
vh_boot() { # guest script, more run-guest.sh options... [-- QEMU options...]
	local script=$1 opts=() devq=("${dev_qemu[@]}")
	shift
	# shellcheck disable=SC2054 # QEMU's commas
	((${#devq[@]})) || devq=(-chardev "socket,id=vs,path=$sock" -device "vhost-user-vsock-pci,chardev=vs${packed:+,packed=on}${in_order:+,in_order=on}")
	# The guest checks what its driver negotiated (check_ring).
	[[ -z $packed ]] || opts+=(--append RING=packed)
	while (($#)) && [[ $1 != -- ]]; do
		opts+=("$1")
		shift
	done
	(($#)) && shift
	serials+=("$serial")
	"$top/scripts/guest/run-guest.sh" --name "$name" --image "$image" --no-build \
		--script "$script" --file "$tool:/bin/vsock-tool" \
		--file "$top/tests/guest/guest-steps.sh:/lib/guest-steps.sh" "${opts[@]}" \
		--timeout "$limit" --log "$serial" -- "$@" \
		"${devq[@]}" \
		>/dev/null 2>"${serial%.serial.log}.run-guest.log" &
	gpid=$!
}

# Returns 0 once the guest printed a line starting with the marker, 1 if
# the guest ended first or never did within the limit.
vh_wait_marker() { # marker
	for _ in $(seq $((limit * 5))); do
		grep -q "^$1" "$serial" 2>/dev/null && return 0
		kill -0 "$gpid" 2>/dev/null || break
		sleep 0.2
	done
	grep -q "^$1" "$serial" 2>/dev/null
}

# Sets con (the serial console) and vcpu (vmio's CPU seconds).
vh_finish_guest() {
	local grc=0 line who=${who:+$who: }
	wait "$gpid" || grc=$?
	gpid=
	kill -0 "$vpid" 2>/dev/null || bad "vmio $dev is no longer running after the guest test (log: $vlog)"
	# vmio's CPU time over the run (utime + stime, in clock ticks): for
	# the report, a busy loop (an always-armed EPOLLOUT) would show here.
	vcpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$vpid/stat" 2>/dev/null || echo "?")
	con=$(tr -d '\r' <"$serial")
	case $grc in
	0) ;;
	124) bad "${who}the guest did not finish within ${limit}s" ;;
	125) bad "${who}the guest did not run its test (QEMU failed or the guest crashed): $(tail -n 3 "${serial%.serial.log}.run-guest.log")" ;;
	*) bad "${who}the guest script reported $grc failed step(s)" ;;
	esac
	while read -r line; do
		bad "${who}guest: ${line#STEP }"
	done < <(grep '^STEP .* FAIL' <<<"$con" || true)
}

vh_expect_steps() { # step...
	local s
	for s in "$@"; do
		grep -q "^STEP $s " <<<"$con" || bad "guest step $s did not run"
	done
}

# The host services exit once their connections are done; give stragglers
# a moment, then judge them by their own result lines.
vh_wait_services() {
	local port rc
	for port in "${!hpid[@]}"; do
		for _ in $(seq 50); do kill -0 "${hpid[$port]}" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "${hpid[$port]}" 2>/dev/null; then
			bad "host service $port still waiting: $(tail -n 2 "$logs/$name.host-$port.log")"
			continue
		fi
		rc=0
		wait "${hpid[$port]}" || rc=$?
		((rc == 0)) || bad "host service $port exited $rc: $(grep -v listening "$logs/$name.host-$port.log" | tail -n 3)"
	done
}

# Stops vmio (SIGTERM) if it runs and sets stats to the --stats line it
# printed on exit; every key of the first list must be above 0, every key
# of the second 0.
vh_stop_vmio_stats() { # "keys above 0" "keys at 0"
	local k v
	if [[ -n $vpid ]] && kill -0 "$vpid" 2>/dev/null; then
		kill -TERM "$vpid"
		wait "$vpid" || bad "vmio $dev exited $? on SIGTERM"
		vpid=
	fi
	stats=$(sed -n "s/^.*vmio $dev: stats: //p" "$vlog" | tail -n1)
	if [[ -z $stats ]]; then
		bad "stats: vmio $dev printed no stats line (log: $vlog)"
		return 0
	fi
	for k in $1; do
		v=$(field "$k" " $stats")
		((${v:-0} > 0)) || bad "stats: $k is 0: $stats"
	done
	for k in $2; do
		v=$(field "$k" " $stats")
		[[ $v == 0 ]] || bad "stats: $k is not 0 in a clean run: $stats"
	done
}

# The setup of the net tests that stream with handover-peer
# (net_handover_test.sh, net_migrate_test.sh): root and the commands they
# run, vh_setup with ARGS, hpeer (--handover-peer's, or the one beside
# vsock-tool), and a network namespace of the test's own, ns, which vmio
# runs in (vmio_wrap) and nsx runs a command in. The caller's
# vh_cleanup_hook, defined before, deletes it.
vh_net_setup() { # vh_setup's options
	((EUID == 0)) || fail "needs root: it creates a network namespace and TAP interfaces"
	local c
	for c in ip ss busybox python3; do
		command -v "$c" >/dev/null || fail "'$c' is missing (packages iproute2, busybox-static, python3)"
	done
	vh_setup "$@"
	hpeer=${hpeer:-$(dirname "$tool")/handover-peer}
	[[ -x $hpeer ]] || fail "$hpeer is missing: build with 'ninja -C build'"
	ns=vmio-$name-$$
	ip netns add "$ns" || fail "cannot create network namespace $ns"
	ip -n "$ns" link set lo up
	vmio_wrap=(ip netns exec "$ns")
}
nsx() { ip netns exec "$ns" "$@"; }

# The net tests' figures: the document of the vmio BIN serving control
# socket CTL (vmio stats --json) as "key value" lines, the session's
# (its first device's) and then whatever the python lines PY print, with
# d the document and v that device. Nothing when it cannot be read.
vh_net_doc() { # BIN CTL [PY]
	"$1" stats --json "$2" 2>/dev/null | python3 -c "import json, sys
d = json.load(sys.stdin)
v = d['devices'][0]
print('sessions', v['sessions'])
print('session_ends', sum(v['session_ends'].values()))
print('protocol_errors', v['protocol_errors'])
print('connected', 1 if v['connected'] else 0)
print('features', v['features'])
${3:-}" 2>/dev/null || true
}

# The last result line of the host peer logged as host-PORT.
hl() { { grep -v listening "$logs/$name.host-$1.log" 2>/dev/null || true; } | { grep -E 'conn=|summary|result=' || true; } | tail -n 1; }

vh_row() { # scenario, result line
	printf '  %-17s %-5s %7s ms %8s MB/s\n' "$1" "$(grep -q 'result=ok' <<<"$2" && echo ok || echo FAIL)" \
		"$(field ms "$2")" "$(field MBps "$2")"
}

vh_conclude() {
	if ((${#failures[@]})); then
		echo "$name: ${#failures[@]} failure(s); logs: $logs/$name.*.log" >&2
		local s
		for s in "${serials[@]}"; do
			echo "--- serial console ${s##*/} (last 40 lines) ---" >&2
			tail -n 40 "$s" | tr -d '\r' >&2
		done
		echo "--- vmio -v (last 30 lines) ---" >&2
		tail -n 30 "$vlog" >&2
		exit 1
	fi
	echo "$name: vmio $dev used ${vcpu} s of CPU over the whole run"
	echo "$name: PASS in $((SECONDS - start))s"
	exit 0
}
