#!/bin/bash
# The package on a booted systemd: a Debian root of the release asked for
# (12, bookworm, by default; 13, trixie, with --release trixie),
# debootstrapped once and cached in BUILD/sysroot/CODENAME by
# scripts/system/build-root.sh, gets the .deb of this tree built for that
# release (scripts/system/build-deb.sh, rebuilt when a file changed: on the
# host for the host's release, in that release's build root for another)
# in an overlay of its own, boots with systemd-nspawn, and each unit the package
# ships is started, given a real session by a client, read with
# `vmio stats`, broken, restarted and stopped, as an administrator would.
# The clients, copied into the overlay: the build's vmio-vsock-bench (a
# guest driver and a host program; it links to nothing but libc, so a
# newer release's glibc runs it), the release's own dpdk-testpmd as vmio
# net's VMM (build-root.sh installs it in the root, with its libraries), and
# tests/system/sockets.py (a vhost-user GET_FEATURES, a collector, a
# sender).
#
# usage: tests/system/systemd_test.sh [--build DIR] [--release CODENAME]
#   DIR is the meson build tree the tools come from (default build);
#   CODENAME the Debian release of the root (default bookworm).
# Prints one TAP line per check (ok N NAME / not ok N NAME, then what the
# check saw as # lines), and the times taken; exits 1 if any failed.
# Needs root, systemd-nspawn, debootstrap and the network to the Debian
# archive on the first run: what is missing fails the test with its
# reason, nothing is skipped.
#
# Environment:
#   VMIO_SYSTEM_DEB           a vmio .deb to install instead of building
#                             the tree's (a released one, or one at hand)
#   VMIO_SYSTEM_PREV          the commit whose package the upgrade check
#                             starts from (default HEAD~1: on main, main
#                             before the last merge), built with
#                             build-deb.sh --commit
#   VMIO_SYSTEM_PREV_DEB      that package, at hand, instead
#   VMIO_SYSTEM_BOOT_TIMEOUT  seconds the boot may take (default 120)
set -uo pipefail
export LC_ALL=C.UTF-8

top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/tests/system
build=$top/build
release=bookworm
while (($#)); do
	case $1 in
	--build) build=$2; shift 2 ;;
	--release) release=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--release CODENAME]" >&2; exit 2 ;;
	esac
done
cache=$build/sysroot/$release
run=$cache/run # this run's overlay and logs, kept until the next run

# What the units provide, each in one place (issue 26).
control_path=/run/vmio/DEVICE/NAME/control.sock # every unit's --control socket
vmm_group=vmio  # the group whose members may connect to the units' sockets
vmm_user=vmm    # a VMM that is not root, created in the root by this test
outsider=outsider # a user not in the group, created likewise
limit=30 # seconds any one command in the root may take
boot_limit=${VMIO_SYSTEM_BOOT_TIMEOUT:-120}

bail() { echo "Bail out! $*"; exit 1; }
control() { # device name
	local p=${control_path/DEVICE/$1}
	echo "${p/NAME/$2}"
}

[[ $(id -u) -eq 0 ]] || bail "systemd_test needs root: it mounts an overlay and boots a container"
for tool in systemd-nspawn nsenter debootstrap dpkg-buildpackage python3 mount; do
	command -v "$tool" >/dev/null ||
		bail "'$tool' is missing: run scripts/deps.sh (as root; systemd-nspawn is in systemd-container)"
done
[[ -x $build/vmio-vsock-bench ]] || bail "$build/vmio-vsock-bench is not built (ninja -C $build)"
testpmd=/usr/local/bin/dpdk-testpmd # in the root, the release's own (build-root.sh)
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
	bail "the kernel has no overlayfs: the root is booted through one"

# shellcheck source=scripts/system/container.sh
. "$top/scripts/system/container.sh"
me=systemd_test
# shellcheck source=scripts/system/cache.sh
. "$top/scripts/system/cache.sh" "$cache" # safe_rm

# The cache before it was one per release (build/sysroot/{base,debs,...},
# Debian 12's): its .debs move to build/sysroot/bookworm/debs, so that
# nothing is downloaded again; the rest is rebuilt.
old=$build/sysroot
if [[ $release == bookworm && -d $old/debs && ! -e $cache/debs ]]; then
	mv "$old/debs" "$cache/debs"
	safe_rm "$old/base" "$old/deb" "$old/run"
	rm -f "$old/stamp"
fi

t0=$SECONDS
base=$("$top/scripts/system/build-root.sh" --release "$release" "$cache") ||
	bail "no $release root (build-root.sh said why above)"
t_root=$((SECONDS - t0))
t0=$SECONDS
if [[ -n ${VMIO_SYSTEM_DEB:-} ]]; then
	deb=$VMIO_SYSTEM_DEB
	[[ -f $deb ]] || bail "VMIO_SYSTEM_DEB=$deb: no such file"
else
	deb=$("$top/scripts/system/build-deb.sh" --release "$release" "$cache") ||
		bail "no package for $release (build-deb.sh said why above)"
fi
prev=${VMIO_SYSTEM_PREV:-HEAD~1}
if [[ -n ${VMIO_SYSTEM_PREV_DEB:-} ]]; then
	deb_prev=$VMIO_SYSTEM_PREV_DEB
	prev=$(basename "$deb_prev")
	[[ -f $deb_prev ]] || bail "VMIO_SYSTEM_PREV_DEB=$deb_prev: no such file"
else
	deb_prev=$("$top/scripts/system/build-deb.sh" --release "$release" --commit "$prev" "$cache") ||
		bail "no package of $prev for $release, which the upgrade check starts from (build-deb.sh said why above)"
	short=$(git -C "$top" rev-parse --short "$prev")
	[[ $short == "$prev" ]] || prev="$prev ($short)"
fi
t_deb=$((SECONDS - t0))

# --- this run's root: an overlay on the cached one -----------------------
root=$run/root
cleanup() {
	container_poweroff 20 >/dev/null 2>&1
	mountpoint -q "$root" && umount "$root"
}
trap cleanup EXIT
mountpoint -q "$root" && umount "$root"
safe_rm "$run"
mkdir -p "$run/upper" "$run/work" "$root"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$run/upper,workdir=$run/work" "$root" ||
	bail "cannot mount an overlay on $base"
tools=/usr/local/lib/vmio-test
mkdir -p "$root$tools"
cp "$build/vmio-vsock-bench" "$here/sockets.py" "$root$tools/"
[[ -x $root$testpmd ]] || bail "the root has no $testpmd (build-root.sh installs it)"
cp "$deb" "$root/root/vmio.deb"
cp "$deb_prev" "$root/root/vmio-prev.deb"

t0=$SECONDS
container_boot "$root" "$run/console.log" || bail "the root did not boot (console: $run/console.log)"
t_boot=$((SECONDS - t0))
t0=$SECONDS

# --- the checks ----------------------------------------------------------
n=0
failed=0
failures=()
in_root() { container_run timeout "$limit" "$@"; }
# Runs check NAME (the function of that name) and prints its TAP line and
# what it printed.
check() { # name
	local name=$1 out rc start
	n=$((n + 1))
	start=$EPOCHREALTIME
	out=$("$name" 2>&1)
	rc=$?
	out+=$'\n'"($(python3 -c "print(f'{$EPOCHREALTIME - $start:.1f}')") s)"
	if ((rc == 0)); then
		echo "ok $n $name"
	else
		echo "not ok $n $name"
		failed=$((failed + 1))
		failures+=("$name")
	fi
	[[ -z $out ]] || printf '# %s\n' "${out//$'\n'/$'\n'# }"
}
# Fails with what it was given unless the JSON document (stdin) passes
# the Python expression over it (`d`).
json_check() { # expression what
	python3 -c '
import json, sys
d = json.load(sys.stdin)
ok = eval(sys.argv[1])
print(sys.argv[2] + (": yes" if ok else ": NO"))
sys.exit(0 if ok else 1)' "$1" "$2"
}
# The unit's state after a command, to print when a check fails.
unit_state() { # unit
	in_root systemctl show -p ActiveState,SubState,Result,ExecMainStatus,MainPID "$1" | tr '\n' ' '
	echo
}
unit_log() { # unit
	in_root journalctl -b -u "$1" --no-pager -o short-monotonic -n 30
}
wait_socket() { # path: in the root, up to 5 s
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'for i in $(seq 100); do [ -S "$1" ] && exit 0; sleep 0.05; done; exit 1' sh "$1"
}

booted() {
	container_wait_booted "$boot_limit" || {
		in_root systemctl --failed --no-pager
		return 1
	}
}

install_package() {
	in_root dpkg -i /root/vmio.deb || return 1
	in_root systemctl cat vmio-vsock@.service >/dev/null || return 1
	# The administrator's copies of the examples, as README says.
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'set -e; ex=/usr/share/doc/vmio/examples
		for d in vsock net redirect; do mkdir -p /etc/vmio/$d; done
		cp $ex/vsock/vm1.yaml /etc/vmio/vsock/; cp $ex/net/vm1.conf /etc/vmio/net/
		cp $ex/redirect/syslog.conf /etc/vmio/redirect/' || return 1
	in_root useradd --system --no-create-home "$vmm_user" &&
		in_root useradd --system --no-create-home "$outsider"
}

vsock_sock=/run/vmio/vsock/vm1/vhost.sock
vsock_uds=/run/vmio/vsock/vm1/vm.vsock
vsock_unit=vmio-vsock@vm1.service
# Seconds of the guest's echo that must outlast three refused reloads, or
# an upgrade: 8 was too few on a loaded machine (10.2 s for the reloads
# on Debian 13's systemd, after vsock_crash's 50 restarts in the unit's
# journal that reload_fails reads), and 20 for an upgrade that reloads
# net first (15 s from the echo's start to vsock's reload, with testpmd
# started in between). An upper bound: echo_end ends it once the check
# is done.
echo_across=30
vsock_bench() { # user direction bytes
	in_root runuser -u "$1" -- "$tools/vmio-vsock-bench" --socket "$vsock_sock" \
		--uds-path "$vsock_uds" --direction "$2" --bytes "$3"
}

# `systemctl start` returns once the service is ready (Type=notify): the
# VMM may connect at once.
vsock_ready_on_start() {
	local type
	type=$(in_root systemctl show -P Type vmio-vsock@vm1.service)
	echo "Type=$type"
	[[ $type == notify ]] || return 1
	in_root systemctl start vmio-vsock@vm1.service || { unit_log vmio-vsock@vm1; return 1; }
	in_root test -S "$vsock_sock" && echo "$vsock_sock is there when systemctl start returns" && return 0
	echo "$vsock_sock is not there yet when systemctl start returns"
	unit_state vmio-vsock@vm1
	return 1
}

vsock_session() {
	in_root systemctl start vmio-vsock@vm1.service || return 1
	wait_socket "$vsock_sock" || { echo "no $vsock_sock"; unit_log vmio-vsock@vm1; return 1; }
	if ! vsock_bench root g2h 4M || ! vsock_bench root h2g 4M; then
		unit_log vmio-vsock@vm1
		return 1
	fi
}

vsock_stats() {
	local doc
	doc=$(in_root vmio stats --json "$(control vsock vm1)") || { unit_state vmio-vsock@vm1; return 1; }
	json_check 'd["vms"][0]["sessions"] >= 2' "sessions >= 2 (one per bench run)" <<<"$doc" &&
		json_check 'd["vms"][0]["totals"]["bytes_from_guest"] >= 4 << 20' "bytes_from_guest >= 4 MiB" <<<"$doc" &&
		json_check 'd["vms"][0]["totals"]["bytes_to_guest"] >= 4 << 20' "bytes_to_guest >= 4 MiB" <<<"$doc"
}

# A VMM in the group: its vhost-user session, a host program's
# connection into the guest (the hybrid vsock socket), and its stats.
vsock_nonroot() {
	in_root usermod -a -G "$vmm_group" "$vmm_user" || return 1
	in_root ls -ld /run/vmio /run/vmio/vsock /run/vmio/vsock/vm1 "$vsock_sock" "$vsock_uds"
	vsock_bench "$vmm_user" h2g 1M &&
		in_root runuser -u "$vmm_user" -- vmio stats --json "$(control vsock vm1)" >/dev/null &&
		echo "vmio stats as $vmm_user: read"
}

# A user outside the group may not connect to any of them.
outsider_denied() {
	local bad=0 out
	for sock in "$vsock_sock" "$vsock_uds"; do
		out=$(in_root runuser -u "$outsider" -- python3 "$tools/sockets.py" features "$sock" 2>&1)
		echo "$outsider on $sock: $out"
		[[ $out == *"Permission denied"* ]] || bad=1
	done
	out=$(in_root runuser -u "$outsider" -- vmio stats "$(control vsock vm1)" 2>&1)
	echo "$outsider: vmio stats: $out"
	[[ $out == *"Permission denied"* ]] || bad=1
	return $bad
}

vsock_restart() {
	local before after
	before=$(in_root systemctl show -P MainPID vmio-vsock@vm1.service)
	in_root systemctl restart vmio-vsock@vm1.service || { unit_log vmio-vsock@vm1; return 1; }
	after=$(in_root systemctl show -P MainPID vmio-vsock@vm1.service)
	echo "MainPID $before, then $after"
	[[ $after != 0 && $after != "$before" ]] || return 1
	wait_socket "$vsock_sock" || { echo "no $vsock_sock after the restart"; return 1; }
	vsock_bench root g2h 1M
}

# --- a crash: kill -9 under the fd store (issue 36) -------------------------
# vmio-vsock@vm1 (ExecStart= with --fd-store) killed with SIGKILL
# crash_kills times in a row, with one guest attached throughout:
# vmio-vsock-bench --crash-probe, the in-tree driver keeping one
# vhost-user session and a connection each way (g2h to the host program
# on vm.vsock_1234, h2g from it through vm.vsock, CONNECT 5000), round
# trips on both, each answer checked; on a reset it opens that way
# again. After each kill: a new MainPID (Restart=on-failure,
# RestartSec=500ms), both connections open at the kill reset on the
# guest's side (the probe counts them), a new connection each way
# answered within crash_limit_ms of the new process's start
# (ExecMainStartTimestampMonotonic, the probe's CLOCK_MONOTONIC), vmio's
# counters saying it sent those two RSTs (rsts_after_crash) and kept its
# session in the store again (fd_store.owed 0) before the next kill. At
# the end: the unit active, NRestarts the number of kills, the probe's
# totals. The unit's start limit (60 in 10 min) is reset before and
# after (reset-failed): the kills are 20 of those starts.
crash_kills=${VMIO_SYSTEM_CRASH_KILLS:-20}
crash_limit_ms=1000
# The answered_ns of the probe's first answer on WAY after its N-th reset.
probe_answer() { # way n
	sed -n "s/^crash-probe: answered way=$1 n=$2 .*answered_ns=\([0-9]*\).*/\1/p" "$run/probe.out" | head -n1
}
probe_gap() { # way n
	sed -n "s/^crash-probe: answered way=$1 n=$2 .*gap_ms=\([0-9.]*\).*/\1/p" "$run/probe.out" | head -n1
}
# Until vmio's document says: both connections open, RSTS sent after the
# crash, the session kept (nothing owed to the store); up to 5 s.
crash_settled() { # rsts
	local doc i
	for i in $(seq 50); do
		doc=$(in_root vmio stats --json "$(control vsock vm1)" 2>/dev/null) &&
			json_check "d['vms'][0]['connections_open'] == 2 and d['vms'][0]['rsts_after_crash'] == $1 and d['vms'][0]['fd_store']['owed'] == 0 and d['vms'][0]['fd_store']['writes'] > 0" \
				x <<<"$doc" >/dev/null && return 0
		sleep 0.1
	done
	echo "vmio's document, 5 s on: $(python3 -c 'import json, sys
v = json.load(sys.stdin)["vms"][0]
print({k: v.get(k) for k in ("connected", "connections_open", "rsts_after_crash", "fd_store")})' <<<"$doc" 2>&1)"
	return 1
}
# Starts the probe on vm1 in the background (probe: its pid here, ppid:
# in the root); returns once it has an answer each way (10 s).
probe_start() {
	local i
	container_run timeout 700 "$tools/vmio-vsock-bench" --socket "$vsock_sock" \
		--uds-path "$vsock_uds" --crash-probe 600 >"$run/probe.out" 2>&1 &
	probe=$!
	for i in $(seq 100); do
		[[ -n $(probe_answer g2h 0) && -n $(probe_answer h2g 0) ]] && break
		kill -0 "$probe" 2>/dev/null || break
		sleep 0.1
	done
	ppid=$(sed -n 's/^crash-probe: pid=\([0-9]*\)$/\1/p' "$run/probe.out")
	if [[ -z $(probe_answer g2h 0) || -z $(probe_answer h2g 0) || -z $ppid ]]; then
		echo "the probe opened no connection both ways within 10 s: $(cat "$run/probe.out")"
		kill "$probe" 2>/dev/null
		wait "$probe"
		return 1
	fi
}
# Until the probe has answers both ways after its Nth reset of each (10
# s); 1 if they did not come.
probe_answered() { # n
	local i
	for i in $(seq 100); do
		a_g=$(probe_answer g2h "$1")
		a_h=$(probe_answer h2g "$1")
		[[ -n $a_g && -n $a_h ]] && return 0
		kill -0 "$probe" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}
# Ends the probe (SIGTERM in the root; 10 s) and prints what it counted;
# 1 if it would not stop or had failed.
probe_stop() {
	local i bad=0
	# The root has no kill(1) (no procps): the shell's.
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'kill -TERM "$1"' sh "$ppid" || echo "cannot stop the probe ($ppid)"
	for i in $(seq 100); do
		kill -0 "$probe" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$probe" 2>/dev/null && { echo "the probe still runs 10 s after SIGTERM"; kill "$probe"; bad=1; }
	wait "$probe" || { echo "the probe failed"; bad=1; }
	echo "the probe: $(grep -v '^crash-probe: ' "$run/probe.out")"
	return $bad
}
vsock_crash() {
	local bad=0 k old new state start_us kill_ns a_g a_h t times=() n0 nr probe ppid props i
	in_root systemctl stop "$vsock_unit"
	in_root systemctl reset-failed "$vsock_unit" 2>/dev/null # once stopped it may be unloaded: nothing to reset
	in_root systemctl start "$vsock_unit" || { unit_log "$vsock_unit"; return 1; }
	in_root systemctl show -p FileDescriptorStoreMax -p RestartUSec -p StartLimitBurst "$vsock_unit" | tr "\n" " "; echo
	in_root systemctl show -P ExecStart "$vsock_unit" | grep -q -- '--fd-store' ||
		{ echo "ExecStart= has no --fd-store"; return 1; }
	wait_socket "$vsock_sock" || { echo "no $vsock_sock"; return 1; }
	n0=$(in_root systemctl show -P NRestarts "$vsock_unit")
	probe_start || return 1
	for ((k = 1; k <= crash_kills; k++)); do
		if ! crash_settled $((k == 1 ? 0 : 2)); then
			echo "kill $k: vmio had not settled ($((k == 1 ? 0 : 2)) RSTs after the crash, 2 connections, the session kept)"
			bad=1
			break
		fi
		old=$(unit_pid "$vsock_unit")
		# The kill's time on the clock systemd's Monotonic timestamps use.
		# shellcheck disable=SC2016 # python's
		kill_ns=$(in_root python3 -c 'import os, sys, time; os.kill(int(sys.argv[1]), 9); print(time.monotonic_ns())' "$old") ||
			{ echo "kill $k: cannot kill $old"; bad=1; break; }
		new=0 state=
		for i in $(seq 200); do
			props=$(in_root systemctl show -p MainPID -p ActiveState -p ExecMainStartTimestampMonotonic "$vsock_unit")
			new=$(sed -n 's/^MainPID=//p' <<<"$props")
			state=$(sed -n 's/^ActiveState=//p' <<<"$props")
			start_us=$(sed -n 's/^ExecMainStartTimestampMonotonic=//p' <<<"$props")
			[[ $new != 0 && $new != "$old" && $state == active ]] && break
			sleep 0.05
		done
		if [[ $new == 0 || $new == "$old" || $state != active ]]; then
			echo "kill $k: no new MainPID active within 10 s: $(unit_state "$vsock_unit")"
			bad=1
			break
		fi
		if ! probe_answered "$k"; then
			echo "kill $k: MainPID $old, then $new; no new connection both ways after its reset within 10 s: $(tail -n 3 "$run/probe.out")"
			bad=1
			break
		fi
		t=$(( (a_g > a_h ? a_g : a_h) / 1000 - start_us ))
		times+=("$t")
		printf 'kill %d: MainPID %s, then %s, started %d ms after the kill; new connections g2h %d ms, h2g %d ms after its start (longest pause the guest saw: %s ms)\n' \
			"$k" "$old" "$new" $(( (start_us * 1000 - kill_ns) / 1000000 )) $(( (a_g / 1000 - start_us) / 1000 )) \
			$(( (a_h / 1000 - start_us) / 1000 )) "$(probe_gap g2h "$k")"
		((t <= crash_limit_ms * 1000)) || { echo "kill $k: over ${crash_limit_ms} ms"; bad=1; }
	done
	# The last kill's RSTs, and the session kept again.
	((bad)) || crash_settled 2 || { echo "after the last kill: vmio had not settled"; bad=1; }
	probe_stop || bad=1
	grep -q "^vsock crash-probe resets=$((2 * crash_kills)) g2h_resets=$crash_kills h2g_resets=$crash_kills " "$run/probe.out" ||
		{ echo "the probe did not count one reset each way per kill ($crash_kills kills)"; bad=1; }
	nr=$(in_root systemctl show -P NRestarts "$vsock_unit")
	echo "NRestarts $n0 before the kills, $nr after; $(unit_state "$vsock_unit")"
	[[ $nr == "$crash_kills" && $n0 == 0 ]] || bad=1
	[[ $(in_root systemctl show -P ActiveState "$vsock_unit") == active ]] || bad=1
	if ((${#times[@]})); then
		python3 -c 'import statistics, sys
t = sorted(int(x) / 1000 for x in sys.argv[1:])
print(f"restart to a new connection both ways: median {statistics.median(t):.1f} ms, worst {t[-1]:.1f} ms over {len(t)} kills")' "${times[@]}"
	fi
	in_root systemctl reset-failed "$vsock_unit" # its start limit: the checks after start it again
	((bad)) && unit_log "$vsock_unit"
	return $bad
}

# A stop and a start (issue 36), the instance enabled as a host running
# VMs has it. systemd 254 and later keep the store of a stopped unit that
# stays loaded (FileDescriptorStorePreserve=yes, which the package built
# for such a release has; a stopped unit nothing refers to is unloaded,
# its store with it): the start takes the probe's session back as
# after a crash, one reset each way, new connections both ways, the
# session kept again. Before 254 (Debian 12's 252) the stop drops the
# store, as the unit's comment says: the vmio started next serves no
# session, and the probe's connections are never answered again.
vsock_stop_start() {
	local bad=0 version preserve probe ppid a_g a_h doc i
	version=$(in_root systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p')
	preserve=$(in_root systemctl show -P FileDescriptorStorePreserve "$vsock_unit" 2>/dev/null)
	echo "systemd $version; FileDescriptorStorePreserve=${preserve:-(none)}"
	if ((version >= 254)); then
		[[ $preserve == yes ]] || { echo "the unit does not preserve its store"; bad=1; }
	fi
	# A process of its own: vsock_crash's counted its RSTs.
	in_root systemctl stop "$vsock_unit"
	in_root systemctl enable "$vsock_unit" 2>&1 || { echo "systemctl enable failed"; return 1; }
	in_root systemctl start "$vsock_unit" || { unit_log "$vsock_unit"; return 1; }
	wait_socket "$vsock_sock" || { echo "no $vsock_sock"; return 1; }
	probe_start || return 1
	crash_settled 0 || { echo "the session was not kept before the stop"; bad=1; }
	in_root systemctl stop "$vsock_unit" || { echo "systemctl stop failed"; bad=1; }
	in_root systemctl start "$vsock_unit" || { echo "systemctl start failed"; unit_log "$vsock_unit"; bad=1; }
	if ((version >= 254)); then
		if probe_answered 1; then
			echo "new connections both ways after the start"
		else
			echo "no new connection both ways within 10 s of the start: $(tail -n 3 "$run/probe.out")"
			bad=1
		fi
		crash_settled 2 || bad=1
		probe_stop || bad=1
		grep -q "^vsock crash-probe resets=2 g2h_resets=1 h2g_resets=1 " "$run/probe.out" ||
			{ echo "the probe did not count one reset each way"; bad=1; }
	else
		for i in $(seq 50); do
			doc=$(in_root vmio stats --json "$(control vsock vm1)" 2>/dev/null) &&
				json_check "not d['vms'][0]['connected']" "the vmio started next serves no session (the store was dropped)" <<<"$doc" >/dev/null && break
			sleep 0.1
		done
		json_check "not d['vms'][0]['connected']" "the vmio started next serves no session (the store was dropped)" <<<"$doc" || bad=1
		# Its device is gone for good: it fails, as a guest's would.
		probe_stop >/dev/null
	fi
	in_root systemctl disable "$vsock_unit" 2>&1 || { echo "systemctl disable failed"; bad=1; }
	((bad)) && unit_log "$vsock_unit"
	return $bad
}

# testpmd sends frames for as long as it runs; vmio net writes them to the
# example's TAP, vmtap0, whose kernel counters (rx_packets: what the TAP
# received from vmio) are the proof. It runs in the background (its pid
# in the root in /run/testpmd.pid) until testpmd_stop, at most
# clients_limit seconds: a hand-over's checks run while it is attached.
# DPDK's virtio-user as a client (no server=1) never reconnects: frames
# that go on after a hand-over went through the session it had before.
testpmd_start() { # socket queues
	in_root rm -f /run/testpmd.pid
	# shellcheck disable=SC2016 # for the inner shell
	container_run sh -c 'echo $$ >/run/testpmd.pid
		exec timeout -s INT "$1" "$0" --no-pci --single-file-segments --lcores 0@0,1@0 --no-huge -m 256 \
			--file-prefix=vmio-system --log-level lib.eal:error \
			--vdev "net_virtio_user0,path=$2,queues=$3" -- --forward-mode=txonly \
			--stats-period 1 --total-num-mbufs 4096 --rxq=$3 --txq=$3 >/tmp/testpmd.log 2>&1' \
		"$testpmd" "$clients_limit" "$@" >"$run/testpmd.out" 2>&1 &
	testpmd_job=$!
	wait_path /run/testpmd.pid || { echo "testpmd did not start"; return 1; }
}
# Up to 10 s until vmtap0 has received at least N frames from vmio; fails
# at once if testpmd has gone. vmio makes the TAP down: it is set up here.
tap_rx_wait() { # minimum-frames
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'tap=/sys/class/net/vmtap0 got=0 pmd=$(cat /run/testpmd.pid)
		for i in $(seq 200); do
			[ -d $tap ] && ip link set vmtap0 up 2>/dev/null
			[ -r $tap/statistics/rx_packets ] && got=$(cat $tap/statistics/rx_packets)
			[ "$got" -ge "$1" ] && break
			[ -d /proc/$pmd ] || break
			sleep 0.05
		done
		echo "vmtap0 rx_packets=$got (wanted $1)"
		[ "$got" -ge "$1" ]' sh "$1"
}
tap_rx() { in_root cat /sys/class/net/vmtap0/statistics/rx_packets; }
testpmd_stop() {
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'kill -INT "$(cat /run/testpmd.pid)"' 2>/dev/null
	wait "$testpmd_job"
}
testpmd_txonly() { # socket queues minimum-frames
	local rc=0
	testpmd_start "$1" "$2" || return 1
	tap_rx_wait "$3" || rc=1
	testpmd_stop
	((rc == 0)) || in_root tail -n 20 /tmp/testpmd.log
	return $rc
}

net_sock=/run/vmio/net/vm1/vhost.sock
net_session() {
	in_root systemctl start vmio-net@vm1.service || { unit_log vmio-net@vm1; return 1; }
	wait_socket "$net_sock" || { echo "no $net_sock"; unit_log vmio-net@vm1; return 1; }
	testpmd_txonly "$net_sock" 2 1000 || { unit_log vmio-net@vm1; return 1; }
}

net_stats() {
	local doc
	doc=$(in_root vmio stats --json "$(control net vm1)") || { unit_state vmio-net@vm1; return 1; }
	json_check 'd["devices"][0]["sessions"] >= 1' "sessions >= 1" <<<"$doc" &&
		json_check 'sum(q["tx_frames"] for q in d["queue_pairs"]) >= 1000' "tx_frames >= 1000 over the queue pairs" <<<"$doc"
}

# Switching vmio-net@vm1 (running) to its socket unit: the socket must
# listen where the VMM connects once the service has gone.
net_accept_socket_after_service() {
	in_root systemctl start vmio-net-accept@vm1.socket || { unit_log vmio-net-accept@vm1.socket; return 1; }
	in_root systemctl is-active vmio-net@vm1.service && { echo "vmio-net@vm1 still runs"; return 1; }
	in_root test -S "$net_sock" && { echo "$net_sock listens"; return 0; }
	echo "$net_sock is gone while vmio-net-accept@vm1.socket is $(in_root systemctl is-active vmio-net-accept@vm1.socket)"
	return 1
}

net_accept_client() { # user
	# A socket unit left without its file by the check before would fail
	# this one too: restart it so that only the connection is checked.
	in_root systemctl restart vmio-net-accept@vm1.socket || return 1
	in_root runuser -u "$1" -- python3 "$tools/sockets.py" features "$net_sock" && return 0
	in_root ls -l "$net_sock"
	in_root journalctl -b --no-pager -o short-monotonic -n 20 -u 'vmio-net-accept@*.service'
	return 1
}
net_accept_connection() { net_accept_client root; }
net_accept_nonroot() { net_accept_client "$vmm_user"; }
# The connection's vmio net answers `vmio stats` on the device's control
# socket while the VMM is connected; once it has gone, so has that vmio
# (and its control socket), and no connection's service failed.
net_accept_stats() {
	local doc ctl failed
	ctl=$(control net vm1)
	doc=$(in_root python3 "$tools/sockets.py" features "$net_sock" \
		vmio stats --json "$ctl" | tail -n 1) || { echo "$doc"; return 1; }
	json_check 'd["devices"][0]["connected"] and d["devices"][0]["sessions"] == 1' \
		"connected, one session" <<<"$doc" || return 1
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'for i in $(seq 100); do [ -e "$1" ] || exit 0; sleep 0.05; done; exit 1' sh "$ctl" ||
		{ echo "$ctl still there 5 s after the VMM left"; return 1; }
	failed=$(in_root systemctl list-units --no-legend --state=failed 'vmio-net-accept@*.service')
	echo "failed connection services: ${failed:-none}"
	[[ -z $failed ]]
}

# vmio-net@vm1 started while the socket listens takes its place: the
# socket stops first, and the service's VMM connects.
net_service_after_socket() {
	in_root systemctl start vmio-net@vm1.service || { unit_log vmio-net@vm1; return 1; }
	echo "vmio-net-accept@vm1.socket: $(in_root systemctl is-active vmio-net-accept@vm1.socket)"
	in_root systemctl is-active --quiet vmio-net-accept@vm1.socket && return 1
	in_root python3 "$tools/sockets.py" features "$net_sock"
}

# The example relays datagrams on in.sock to a collector's stream socket;
# sockets.py is both the collector and the sender.
redirect_in=/run/vmio/redirect/syslog/in.sock
redirect_session() {
	local collector want got
	container_run timeout "$limit" python3 "$tools/sockets.py" collect /run/collector/in.sock 65536 \
		>"$run/collector.out" 2>&1 &
	collector=$!
	wait_socket /run/collector/in.sock || { echo "the collector does not listen"; return 1; }
	in_root systemctl start vmio-redirect@syslog.service || { unit_log vmio-redirect@syslog; return 1; }
	wait_socket "$redirect_in" || { echo "no $redirect_in"; unit_log vmio-redirect@syslog; return 1; }
	want=$(in_root python3 "$tools/sockets.py" send "$redirect_in" 65536) || return 1
	wait "$collector"
	got=$(cat "$run/collector.out")
	echo "sent: $want"
	echo "collected: $got"
	[[ $got == "$want" ]] || { unit_log vmio-redirect@syslog; return 1; }
}

# The relay's counters, and one engine named: the listener's is the one
# its connection runs.
redirect_stats() {
	local doc
	doc=$(in_root vmio stats --json "$(control redirect syslog)") || { unit_state vmio-redirect@syslog; return 1; }
	json_check 'sum(c["bytes_1to2"] for w in d["workers"] for c in w.get("connections", [])) >= 65536' \
		"bytes_1to2 >= 65536" <<<"$doc" &&
		json_check '{d["listener"][0]["engine"]} == {c["engine"] for w in d["workers"] for c in w.get("connections", [])}' \
			"listener and connections name one engine ($(python3 -c 'import json, sys
d = json.load(sys.stdin)
print(d["listener"][0]["engine"], [c["engine"] for w in d["workers"] for c in w.get("connections", [])])' <<<"$doc"))" <<<"$doc"
}

# The collector restarts (down for 2 s): the relay, which cannot reach
# it meanwhile, must be running again once it is back, and relay.
redirect_outlasts_collector() {
	local collector want got state
	in_root systemctl stop vmio-redirect@syslog.service
	in_root rm -f /run/collector/in.sock
	in_root systemctl start vmio-redirect@syslog.service
	echo "without its collector: $(unit_state vmio-redirect@syslog)"
	sleep 2 # the collector's downtime: what the unit must outlast
	container_run timeout "$limit" python3 "$tools/sockets.py" collect /run/collector/in.sock 1024 \
		>"$run/collector.out" 2>&1 &
	collector=$!
	wait_socket /run/collector/in.sock || { echo "the collector does not listen"; return 1; }
	# The next restart (RestartSec=, 5 s) finds the collector.
	local end=$((SECONDS + 12))
	while ((SECONDS < end)); do
		state=$(in_root systemctl show -P SubState vmio-redirect@syslog.service)
		[[ $state == running ]] && break
		sleep 0.1
	done
	echo "with it back: $(unit_state vmio-redirect@syslog)"
	[[ $state == running ]] || { kill "$collector" 2>/dev/null; wait "$collector"; return 1; }
	wait_socket "$redirect_in" && want=$(in_root python3 "$tools/sockets.py" send "$redirect_in" 1024)
	wait "$collector"
	got=$(cat "$run/collector.out")
	echo "sent: $want; collected: $got"
	[[ -n $want && $got == "$want" ]]
}

# --- reload: a hand-over under systemd (issue 36) --------------------------
# A relay whose ADDRESS2 echoes (sockets.py echo, a transient unit), so
# that a client checks every byte it gets back: a stream that stays open
# across the reload, and new connections one after another during it and
# after.
relay=vmio-redirect@stream.service
relay_in=/run/vmio/redirect/stream/in.sock
echo_sock=/run/echo/echo.sock
clients_limit=120 # seconds a stream or churn may last: the reload or upgrade it outlasts
wait_path() { # path: in the root, up to 5 s
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'for i in $(seq 100); do [ -e "$1" ] && exit 0; sleep 0.05; done; exit 1' sh "$1"
}
wait_gone() { # pid: in the root, up to 10 s
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'for i in $(seq 200); do [ -d "/proc/$1" ] || exit 0; sleep 0.05; done; exit 1' sh "$1"
}
unit_pid() { in_root systemctl show -P MainPID "$1"; } # unit
main_pid() { unit_pid "$relay"; }
exe_of() { in_root readlink "/proc/$1/exe"; } # pid
relay_start() {
	printf '%s\n' 'OPTIONS=' "ADDRESS1=\"UNIX-LISTEN:$relay_in,fork\"" \
		"ADDRESS2=\"UNIX-CONNECT:$echo_sock\"" >"$root/etc/vmio/redirect/stream.conf"
	if ! in_root systemctl is-active --quiet vmio-test-echo.service; then
		in_root systemd-run --quiet --unit=vmio-test-echo python3 "$tools/sockets.py" echo "$echo_sock" ||
			return 1
	fi
	wait_socket "$echo_sock" || { echo "the echo server does not listen"; return 1; }
	in_root systemctl start "$relay" || { unit_log "$relay"; return 1; }
	wait_socket "$relay_in" || { echo "no $relay_in"; unit_log "$relay"; return 1; }
}
# A stream and a churn of connections through the relay, in the
# background; returns once each has had bytes back.
clients_start() {
	in_root rm -f /run/echo/stream.ready /run/echo/stream.stop /run/echo/churn.ready /run/echo/churn.stop
	container_run timeout "$clients_limit" python3 "$tools/sockets.py" stream "$relay_in" \
		/run/echo/stream.ready /run/echo/stream.stop >"$run/stream.out" 2>&1 &
	stream_pid=$!
	container_run timeout "$clients_limit" python3 "$tools/sockets.py" churn "$relay_in" \
		/run/echo/churn.ready /run/echo/churn.stop >"$run/churn.out" 2>&1 &
	churn_pid=$!
	wait_path /run/echo/stream.ready && wait_path /run/echo/churn.ready && return 0
	echo "the clients got nothing back"
	clients_end
	return 1
}
# The churn makes one more connection once told to stop (one after
# whatever came before, a reload included), then the stream ends; fails
# unless both got every byte back.
clients_end() {
	local bad=0
	in_root touch /run/echo/churn.stop
	wait "$churn_pid" || bad=1
	echo "churn: $(cat "$run/churn.out")"
	in_root touch /run/echo/stream.stop
	wait "$stream_pid" || bad=1
	echo "stream: $(cat "$run/stream.out")"
	return $bad
}
# What serves a unit once it was handed over: the unit active, its
# MainPID (new_pid) a new process running the same binary path (no
# longer one an upgrade deleted), the same one that answers on --control.
successor_serves() { # unit device name old-pid old-exe
	local exe doc bad=0
	new_pid=$(unit_pid "$1")
	exe=$(exe_of "$new_pid")
	echo "MainPID $4 ($5), then $new_pid ($exe); $(unit_state "$1")"
	[[ $(in_root systemctl show -P ActiveState "$1") == active ]] || bad=1
	[[ $new_pid != 0 && $new_pid != "$4" ]] || { echo "MainPID did not change"; bad=1; }
	[[ $exe == "${5% (deleted)}" && $exe != *" (deleted)" ]] || { echo "not the binary at the start path"; bad=1; }
	doc=$(in_root vmio stats --json "$(control "$2" "$3")") &&
		json_check "d['pid'] == $new_pid" "the pid vmio stats names is the MainPID" <<<"$doc" || bad=1
	return $bad
}
# The relay once handed over: served by the successor; the old process
# drains its open stream, then exits.
handed_over() { # old-pid old-exe
	local bad=0
	successor_serves "$relay" redirect stream "$1" "$2" || bad=1
	if in_root test -d "/proc/$1"; then
		echo "$1 still runs while its stream is open"
	else
		echo "$1 exited before its stream ended"
		bad=1
	fi
	clients_end || bad=1
	wait_gone "$1" || { echo "$1 still runs 10 s after its last relay ended"; bad=1; }
	return $bad
}

redirect_reload() {
	local old exe
	relay_start || return 1
	old=$(main_pid)
	exe=$(exe_of "$old")
	clients_start || return 1
	if ! in_root systemctl reload "$relay"; then
		echo "systemctl reload $relay failed"
		unit_log "$relay"
		clients_end
		return 1
	fi
	handed_over "$old" "$exe" || { unit_log "$relay"; return 1; }
}

# A refused hand-over: systemctl reload fails, the journal says why, and
# the old process stays the unit's main process and serves.
reload_fails() { # unit reason-pattern
	local old rc=0 new lines
	old=$(unit_pid "$1")
	in_root systemctl reload "$1" && rc=1
	new=$(unit_pid "$1")
	echo "systemctl reload $([[ $rc == 0 ]] && echo failed || echo "returned 0"); MainPID $old, then $new; $(unit_state "$1")"
	[[ $new == "$old" && $(in_root systemctl show -P ActiveState "$1") == active ]] || rc=1
	# The unit's lines, and those its ExecReload= process logged before
	# its exec failed: journald may lose that short-lived process's
	# cgroup, and with it _SYSTEMD_UNIT, which -u matches, but systemd
	# names the unit in UNIT=. journald may also take a moment to write.
	for _ in $(seq 20); do
		lines=$({
			in_root journalctl -b --no-pager -o cat -u "$1"
			in_root journalctl -b --no-pager -o cat "UNIT=$1"
		} | grep -e "$2" | sort -u)
		[[ -z $lines ]] || break
		sleep 0.1
	done
	[[ -n $lines ]] || { lines="nothing matching: $2 (within 2 s)"; rc=1; }
	echo "the journal: $lines"
	return $rc
}
# Two reloads of the unit refused for want of a successor: one that exits
# at start, as a broken build would, at the start path (`vmio reload`,
# ExecReload=, still runs the real one, as any command but the unit's
# does); then no binary at all, so that ExecReload= cannot even start.
successor_broken() { # unit command
	local bad=0
	mv "$root/usr/bin/vmio" "$root/usr/bin/vmio.real" || return 1
	# shellcheck disable=SC2016 # the script's own
	printf '%s\n' '#!/bin/sh' "if [ \"\$1\" = $2 ]; then echo 'a successor that fails' >&2; exit 1; fi" \
		'exec /usr/bin/vmio.real "$@"' >"$root/usr/bin/vmio"
	chmod 755 "$root/usr/bin/vmio"
	reload_fails "$1" "hand-over failed: the successor exited with status 1 before taking over" || bad=1
	rm "$root/usr/bin/vmio"
	reload_fails "$1" "/usr/bin/vmio: No such file or directory" || bad=1
	mv "$root/usr/bin/vmio.real" "$root/usr/bin/vmio" || return 1
	return $bad
}
redirect_reload_refused() {
	local bad=0 out
	successor_broken "$relay" redirect || bad=1
	# The old process still serves, a new connection included.
	in_root touch /run/echo/churn.stop
	out=$(in_root python3 "$tools/sockets.py" churn "$relay_in" /run/echo/churn.ready /run/echo/churn.stop 2>&1) || bad=1
	echo "a connection after: $out"
	return $bad
}

# vmio-vsock@vm1 handed over by systemctl reload: the one VM of
# /etc/vmio/vsock/vm1.yaml keeps its vhost-user session and its guest's
# open connection. The guest is vmio-vsock-bench --echo (the in-tree
# vhost-user front end and guest vsock driver, and a host program that
# echoes): one connection's round trips, every answer checked against
# its request, for as many seconds as asked, in the background.
echo_start() { # seconds
	local doc
	container_run timeout "$clients_limit" "$tools/vmio-vsock-bench" --socket "$vsock_sock" \
		--uds-path "$vsock_uds" --echo --seconds "$1" >"$run/echo.out" 2>&1 &
	echo_pid=$!
	# Until vmio has its connection open: the hand-over must carry it.
	for _ in $(seq 50); do
		doc=$(in_root vmio stats --json "$(control vsock vm1)") &&
			json_check 'd["vms"][0]["connections_open"] >= 1' "the guest's connection is open" \
				<<<"$doc" >/dev/null && return 0
		kill -0 "$echo_pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "the guest opened no connection: $(cat "$run/echo.out")"
	wait "$echo_pid"
	return 1
}
# The guest's echo ended well: every round trip answered, byte for byte.
# It is told to end now (SIGUSR1, in the root: its pid is in echo.out),
# so that a check takes as long as what it spans, not echo_across.
echo_end() {
	local bad=0 epid
	epid=$(sed -n 's/^echo: pid=\([0-9]*\)$/\1/p' "$run/echo.out")
	# shellcheck disable=SC2016 # for the inner shell
	[[ -z $epid ]] || in_root sh -c 'kill -USR1 "$1" 2>/dev/null' sh "$epid" || true
	wait "$echo_pid" || bad=1
	echo "the guest's echo (one connection, open across it): $(cat "$run/echo.out")"
	grep -q 'round_trips=[1-9]' "$run/echo.out" || bad=1
	return $bad
}
# What serves vm1 once it was handed over: the unit active, its MainPID a
# new process running the installed binary, the one that answers on
# --control, carrying the guest's connection (its bytes keep counting in
# the new process); the old process gone, the sockets still there.
vsock_handed_over() { # old-pid old-exe
	local doc bytes p bad=0
	successor_serves "$vsock_unit" vsock vm1 "$1" "$2" || bad=1
	wait_gone "$1" || { echo "$1 still runs 10 s after the hand-over"; bad=1; }
	for p in "$vsock_sock" "$vsock_uds"; do
		in_root test -S "$p" || { echo "$p is gone"; bad=1; }
	done
	kill -0 "$echo_pid" 2>/dev/null || echo "(the guest's echo ended before these checks)"
	doc=$(in_root vmio stats --json "$(control vsock vm1)") || { echo "vmio stats failed"; return 1; }
	json_check 'd["vms"][0]["connected"] and d["vms"][0]["connections_open"] >= 1' \
		"the VM's front end connected, its connection open" <<<"$doc" || bad=1
	bytes=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["vms"][0]["totals"]["bytes_from_guest"])' <<<"$doc")
	sleep 0.3
	doc=$(in_root vmio stats --json "$(control vsock vm1)") &&
		json_check "d['vms'][0]['totals']['bytes_from_guest'] > $bytes" \
			"the new process carries the guest's bytes ($bytes, then more)" <<<"$doc" || bad=1
	echo_end || bad=1
	return $bad
}
vsock_reload() {
	local old exe
	in_root systemctl start "$vsock_unit" || { unit_log "$vsock_unit"; return 1; }
	wait_socket "$vsock_sock" || { echo "no $vsock_sock"; return 1; }
	old=$(unit_pid "$vsock_unit")
	exe=$(exe_of "$old")
	echo_start "$echo_across" || return 1
	if ! in_root systemctl reload "$vsock_unit"; then
		echo "systemctl reload $vsock_unit failed"
		unit_log "$vsock_unit"
		echo_end
		return 1
	fi
	vsock_handed_over "$old" "$exe" || { unit_log "$vsock_unit"; return 1; }
}
# As redirect_reload_refused, with the guest's connection open throughout;
# and a reload after the file's VM changed, which the new vmio refuses.
vsock_reload_refused() {
	local bad=0 yaml=$root/etc/vmio/vsock/vm1.yaml
	echo_start "$echo_across" || return 1
	successor_broken "$vsock_unit" vsock || bad=1
	cp "$yaml" "$run/vm1.yaml" && sed -i 's/guest_cid: 3/guest_cid: 4/' "$yaml" || return 1
	reload_fails "$vsock_unit" "the VM list changed" || bad=1
	cp "$run/vm1.yaml" "$yaml" || return 1
	kill -0 "$echo_pid" 2>/dev/null ||
		{ echo "the guest's echo ended before the last refused reload: give it more seconds"; bad=1; }
	echo_end || bad=1
	# The old process still serves: a new guest session and connection.
	vsock_bench root g2h 1M || bad=1
	return $bad
}

# vmio-net@vm1 (the example: --tap vmtap0, two queue pairs) handed over
# with testpmd attached and sending. What must come across, read from
# --control and the kernel: the session (testpmd never reconnects, so
# frames that go on after went through the one it had), the TAP (its
# ifindex: not made anew) and the counters (the successor's tx_frames
# start from the old process's, not from 0).
net_unit=vmio-net@vm1.service
net_tx() { # the frames vmio took from the guest, over every pair, as --control says
	in_root vmio stats --json "$(control net vm1)" |
		python3 -c 'import json, sys; print(sum(q["tx_frames"] for q in json.load(sys.stdin)["queue_pairs"]))'
}
net_ifindex() { in_root cat /sys/class/net/vmtap0/ifindex; }
# vmtap0's rx_packets, the device's tx_frames, vmtap0's rx_packets again,
# read in that order in one go. Every frame the TAP received, vmio took
# from the guest and counted first, so with the counters carried across
# a hand-over tx_frames is at least the first read; had they started
# again from 0, it would be short by what passed before the hand-over,
# less the frames that pass between the two TAP reads (the gap).
net_counts() {
	local out
	# shellcheck disable=SC2016 # for the inner shell
	out=$(in_root sh -c 'rx=/sys/class/net/vmtap0/statistics/rx_packets
		cat $rx && vmio stats --json "$1" && cat $rx' sh "$(control net vm1)") || return 1
	# The root's python3-minimal has no json module: the document is read
	# here.
	python3 -c 'import json, sys
lines = sys.stdin.read().strip().split("\n")
assert lines[0].isdigit() and lines[-1].isdigit(), lines
d = json.loads("\n".join(lines[1:-1]))
print(lines[0], sum(q["tx_frames"] for q in d["queue_pairs"]), lines[-1])' <<<"$out"
}
# Starts vmio-net@vm1 and testpmd on it; returns once vmtap0 has 1000
# frames, and ten times the gap of net_counts more (so that counters
# started again would show, whatever the rate), with net_old_pid,
# net_old_exe and net_old_ifindex set.
net_front_end() {
	local r0 r1 t r2
	in_root systemctl start "$net_unit" || { unit_log "$net_unit"; return 1; }
	wait_socket "$net_sock" || { echo "no $net_sock"; unit_log "$net_unit"; return 1; }
	net_old_pid=$(unit_pid "$net_unit")
	net_old_exe=$(exe_of "$net_old_pid")
	# The TAP's counter runs on across testpmd's sessions: 1000 of this one.
	r0=$(tap_rx 2>/dev/null) || r0=0
	testpmd_start "$net_sock" 2 || return 1
	if ! tap_rx_wait $((r0 + 1000)) || ! read -r r1 t r2 < <(net_counts) ||
		! echo "the gap: $((r2 - r1)) frames between two TAP reads" ||
		! tap_rx_wait $((r2 + 10 * (r2 - r1))); then
		testpmd_stop
		in_root tail -n 20 /tmp/testpmd.log
		return 1
	fi
	net_old_ifindex=$(net_ifindex)
}
# The device's counters went on from where they were (net_counts says
# why this shows it).
net_counters_carried() {
	local r1 t r2
	read -r r1 t r2 < <(net_counts) || { echo "vmio stats failed"; return 1; }
	echo "vmtap0 rx_packets $r1, then the device's tx_frames $t, then rx_packets $r2"
	((t >= r1)) || { echo "tx_frames is short of what vmtap0 received: counted again from 0"; return 1; }
}
# The guest's frames go on through whoever serves the unit now: 1000
# more reach vmtap0, and --control counts more than tx_before. Stops
# testpmd, which must not have gone before.
net_frames_go_on() { # tx-before
	local rx tx bad=0
	rx=$(tap_rx)
	tap_rx_wait $((rx + 1000)) || bad=1
	tx=$(net_tx)
	echo "tx_frames on --control: $1 before, $tx after"
	((tx > $1)) || { echo "the device counted no frame since"; bad=1; }
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c '[ -d "/proc/$(cat /run/testpmd.pid)" ]' || { echo "testpmd has gone"; bad=1; }
	testpmd_stop
	((bad == 0)) || in_root tail -n 20 /tmp/testpmd.log
	return $bad
}
# What serves vm1 once handed over: the successor, with the front end's
# session (connected, never ended: frames go on), the TAP and the
# counters of the old process, which has gone.
net_handed_over() { # tx-before
	local doc bad=0
	successor_serves "$net_unit" net vm1 "$net_old_pid" "$net_old_exe" || bad=1
	wait_gone "$net_old_pid" || { echo "$net_old_pid still runs 10 s after the hand-over"; bad=1; }
	doc=$(in_root vmio stats --json "$(control net vm1)") || { echo "vmio stats failed"; return 1; }
	json_check "d['devices'][0]['connected'] and sum(q['tx_frames'] for q in d['queue_pairs']) >= $1" \
		"the front end connected, tx_frames carried ($1 before)" <<<"$doc" || bad=1
	net_counters_carried || bad=1
	[[ $(net_ifindex) == "$net_old_ifindex" ]] ||
		{ echo "vmtap0 was made anew (ifindex $net_old_ifindex, then $(net_ifindex))"; bad=1; }
	net_frames_go_on "$1" || bad=1
	return $bad
}
net_reload() {
	local tx
	net_front_end || return 1
	tx=$(net_tx)
	if ! in_root systemctl reload "$net_unit"; then
		echo "systemctl reload $net_unit failed"
		unit_log "$net_unit"
		testpmd_stop
		return 1
	fi
	net_handed_over "$tx" || { unit_log "$net_unit"; return 1; }
}
# As redirect_reload_refused, with testpmd sending throughout: the old
# process is still the unit's, serves the same session and TAP, and
# counts on.
net_reload_refused() {
	local tx bad=0
	net_front_end || return 1
	successor_broken "$net_unit" net || bad=1
	tx=$(net_tx)
	in_root vmio stats --json "$(control net vm1)" |
		json_check "d['pid'] == $net_old_pid and d['devices'][0]['connected']" \
			"the old process ($net_old_pid) answers, its front end connected" || bad=1
	[[ $(net_ifindex) == "$net_old_ifindex" ]] || { echo "vmtap0 was made anew"; bad=1; }
	net_frames_go_on "$tx" || bad=1
	return $bad
}

# An upgrade (this build relabelled as a later version: dpkg unpacks its
# files anew and runs the postinst of an upgrade) reloads the running
# vmio-redirect@, vmio-vsock@ and vmio-net@ instances.
package_upgrade_reloads() {
	# shellcheck disable=SC2016 # for the inner shell
	in_root sh -c 'rm -rf /tmp/next && dpkg-deb -R /root/vmio.deb /tmp/next &&
		sed -i "s/^Version: .*/&+next1/" /tmp/next/DEBIAN/control &&
		dpkg-deb -b /tmp/next /root/vmio-next.deb >/dev/null' || return 1
	in_root systemctl stop vmio-redirect@syslog.service # a relay that cannot hand over (UNIX-RECV), its collector gone
	upgrade_hands_over /root/vmio-next.deb "the next version" yes yes
}
left_alone() { # unit pid-before
	local now
	now=$(in_root systemctl show -P MainPID "$1")
	echo "$1: MainPID $2, then $now, $(in_root systemctl is-active "$1")"
	[[ $now == "$2" ]] && in_root systemctl is-active --quiet "$1"
}

# The upgrade the issue asks for: from the package of the commit before
# (its vmio, its units, its postinst) to this tree's, whose postinst
# reloads the relay, vsock and net: each old vmio hands over to the new
# one (net's old unit had no ExecReload=: the postinst's daemon-reload
# gives it this one's first). A vmio vsock or net from before its
# hand-over (its --help has no --handover-timeout) answers that it
# cannot: then the reload fails, the postinst says so and the upgrade
# goes on, and that instance is left on the old vmio, serving.
package_upgrade_from_prev() {
	local vsock_can=no net_can=no
	echo "from $prev"
	# Each starts anew on the older vmio, under its units.
	in_root systemctl stop "$relay" "$vsock_unit" "$net_unit"
	in_root timeout 60 dpkg -i /root/vmio-prev.deb >"$run/downgrade.log" 2>&1 ||
		{ echo "dpkg -i of the package before failed: $(tail -n 20 "$run/downgrade.log")"; return 1; }
	in_root systemctl daemon-reload
	in_root sh -c 'vmio vsock --help | grep -q -- --handover-timeout' && vsock_can=yes
	in_root sh -c 'vmio net --help | grep -q -- --handover-timeout' && net_can=yes
	echo "its vmio vsock can hand over: $vsock_can; its vmio net: $net_can"
	upgrade_hands_over /root/vmio.deb "this tree's package" "$vsock_can" "$net_can"
}

# With vsock (a guest's echo open on it), net (testpmd sending) and a
# streaming relay running, installs deb (what: for messages): the relay
# is handed over, and vsock and net too if they can (yes: the old vmio
# hands over; no: it cannot, the postinst says so and it is left alone,
# serving).
upgrade_hands_over() { # deb what vsock-hands-over net-hands-over
	local old exe vsock vsock_exe tx bad=0
	# testpmd first: what it takes to start must not come out of the
	# guest echo's seconds, which have to outlast the upgrade.
	net_front_end || return 1
	tx=$(net_tx)
	in_root systemctl start "$vsock_unit" || { testpmd_stop; return 1; }
	vsock=$(unit_pid "$vsock_unit")
	vsock_exe=$(exe_of "$vsock")
	wait_socket "$vsock_sock" || { echo "no $vsock_sock"; testpmd_stop; return 1; }
	relay_start || { testpmd_stop; return 1; }
	old=$(main_pid)
	exe=$(exe_of "$old")
	clients_start || { testpmd_stop; return 1; }
	echo_start "$echo_across" || { clients_end; testpmd_stop; return 1; }
	if ! in_root timeout 60 dpkg -i "$1" >"$run/upgrade.log" 2>&1; then
		echo "dpkg -i of $2 failed: $(tail -n 20 "$run/upgrade.log")"
		clients_end
		echo_end
		testpmd_stop
		return 1
	fi
	# shellcheck disable=SC2016 # dpkg-query's format
	echo "installed: $(in_root dpkg-query -W -f='${Version}' vmio)"
	echo "ExecReload now: $(in_root systemctl show -P ExecReload "$relay" | grep -o 'argv\[\]=[^;]*')"
	echo "the old relay's binary now: $(exe_of "$old")"
	echo "what dpkg said: $(grep '^vmio: ' "$run/upgrade.log")"
	# vsock first, while the guest's echo runs; the relay's stream stays
	# open until handed_over ends it.
	if [[ $3 == yes ]]; then
		vsock_handed_over "$vsock" "$vsock_exe" || { unit_log "$vsock_unit"; bad=1; }
	else
		grep -q "^vmio: $vsock_unit runs a vmio from before vsock could hand over" "$run/upgrade.log" ||
			{ echo "the postinst did not say that $vsock_unit cannot hand over"; bad=1; }
		left_alone "$vsock_unit" "$vsock" || bad=1
		echo_end || bad=1
	fi
	if [[ $4 == yes ]]; then
		net_handed_over "$tx" || { unit_log "$net_unit"; bad=1; }
	else
		grep -q "^vmio: $net_unit runs the new vmio only from its next restart" "$run/upgrade.log" ||
			{ echo "the postinst did not say that $net_unit cannot hand over"; bad=1; }
		left_alone "$net_unit" "$net_old_pid" || bad=1
		net_frames_go_on "$tx" || bad=1
	fi
	handed_over "$old" "$exe" || { unit_log "$relay"; bad=1; }
	return $bad
}

# systemctl start of a unit whose config vmio refuses must fail, once:
# exit 2 is not restarted.
start_fails() { # unit
	if in_root systemctl start "$1"; then
		echo "systemctl start $1 returned 0"
		unit_state "$1"
		return 1
	fi
	echo "systemctl start $1 failed; $(unit_state "$1")"
	[[ $(in_root systemctl show -P ExecMainStatus "$1") == 2 &&
		$(in_root systemctl show -P NRestarts "$1") == 0 ]]
}
# What the unit's vmio logged: one line at err or above, matching the
# pattern, and no line with a severity prefix left in it or a "Try".
one_error_line() { # unit pattern
	local lines count
	# The service's own lines (_SYSTEMD_UNIT), not systemd's about it.
	lines=$(in_root journalctl -b --no-pager -o cat -p err "_SYSTEMD_UNIT=$1")
	count=$(grep -c . <<<"$lines")
	echo "$1 at err or above ($count): ${lines:-nothing}"
	if ((count == 1)) && grep -q -- "$2" <<<"$lines" &&
		! in_root journalctl -b --no-pager -o cat "_SYSTEMD_UNIT=$1" | grep -qE "^<[0-7]>|^Try '"; then
		return 0
	fi
	echo "wanted one line matching '$2'; all that $1 logged, by priority:"
	in_root journalctl -b --no-pager -o json "_SYSTEMD_UNIT=$1" |
		python3 -c 'import json, sys
for l in sys.stdin: e = json.loads(l); print(e["PRIORITY"], e["MESSAGE"])'
	return 1
}

bad_config_fails_start() {
	in_root sh -c 'printf "vms:\n  - guest_cid: 4\n    socket: /run/vmio/vsock/bad/vhost.sock\n    no_such_key: 1\n" >/etc/vmio/vsock/bad.yaml'
	start_fails vmio-vsock@bad.service
}
# The run of bad_config_fails_start: one cause, one line at err.
config_error_at_err() { one_error_line vmio-vsock@bad.service no_such_key; }

missing_config_fails_start() {
	start_fails vmio-vsock@missing.service && one_error_line vmio-vsock@missing.service missing.yaml
}

bad_options_fail_start() {
	in_root sh -c 'echo OPTIONS=\"--null --bogus\" >/etc/vmio/net/bad.conf'
	start_fails vmio-net@bad.service && one_error_line vmio-net@bad.service bogus
}

# The accept socket's file goes with it: nothing left that refuses VMMs.
net_accept_socket_removed_on_stop() {
	in_root systemctl stop vmio-net@vm1.service &&
		in_root systemctl start vmio-net-accept@vm1.socket &&
		in_root systemctl stop vmio-net-accept@vm1.socket || return 1
	in_root test -e "$net_sock" || { echo "$net_sock is gone"; return 0; }
	in_root ls -l "$net_sock"
	return 1
}

# Running services stop cleanly (exit 0 on SIGTERM) and take their
# sockets with them.
stop_units() {
	local u bad=0
	in_root systemctl start vmio-vsock@vm1.service vmio-net@vm1.service || return 1
	in_root systemctl stop vmio-vsock@vm1.service vmio-net@vm1.service || bad=1
	for u in vmio-vsock@vm1.service vmio-net@vm1.service; do
		state="$(in_root systemctl show -P ActiveState "$u") $(in_root systemctl show -P Result "$u")"
		echo "$u: $state"
		[[ $state == "inactive success" ]] || bad=1
	done
	for sock in "$vsock_sock" "$net_sock"; do
		in_root test -e "$sock" && { echo "$sock is left behind"; bad=1; }
	done
	return $bad
}

powered_off() {
	container_poweroff 30 && echo "powered off"
}

check booted
check install_package
if [[ " ${failures[*]} " == *" install_package "* ]]; then
	check powered_off
	bail "the package did not install: no unit can be checked"
fi
check vsock_ready_on_start
check vsock_session
check vsock_stats
check vsock_nonroot
check outsider_denied
check vsock_restart
check vsock_crash
check vsock_stop_start
check net_session
check net_stats
check net_accept_socket_after_service
check net_accept_connection
check net_accept_nonroot
check net_accept_stats
check net_service_after_socket
check net_accept_socket_removed_on_stop
check redirect_session
check redirect_stats
check redirect_outlasts_collector
check redirect_reload
check redirect_reload_refused
check vsock_reload
check vsock_reload_refused
check net_reload
check net_reload_refused
check package_upgrade_reloads
check package_upgrade_from_prev
check bad_config_fails_start
check config_error_at_err
check missing_config_fails_start
check bad_options_fail_start
check stop_units
t_checks=$((SECONDS - t0))
check powered_off
echo "1..$n"
# shellcheck disable=SC1091,SC2016 # the root's file; dpkg-query's format
echo "# release: $(. "$base/etc/os-release" && echo "$PRETTY_NAME"), $(cat "$base/etc/debian_version"); systemd $(chroot "$base" dpkg-query -W -f='${Version}' systemd); package $(basename "$deb"), upgraded from $prev"
echo "# times: root ${t_root} s, package ${t_deb} s, boot to systemd ${t_boot} s, checks ${t_checks} s"
echo "# failed: ${failures[*]:-none}"
((failed == 0))
