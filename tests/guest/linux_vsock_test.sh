#!/bin/bash
# The Linux kernel's own vsock test suite (tools/testing/vsock/vsock_test,
# built from Debian's linux-source-6.1 by scripts/guest/build-vsock-test.sh)
# through `vmio vsock`: two sibling guests of ONE backend,
#   vmio vsock --vm guest-cid=3,... --vm guest-cid=4,...   (same group)
# the server in CID 3 and the client in CID 4. Every vsock connection of
# the suite goes guest 4 -> vmio -> guest 3 (sibling routing) and back;
# the suite's TCP control channel runs on a virtio-net link between the two
# QEMUs (-netdev socket, listen on one side, connect on the other).
#
# usage: tests/guest/linux_vsock_test.sh [--image DIR] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# Prints one line a case (ok, FAIL, or skipped with the reason) and a
# summary; exit 0 when every case that is not skipped below passed on both
# sides. Logs: DIR/logs/linux_vsock_test.*.log.
set -euo pipefail

name=linux_vsock_test
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
# Two guests boot at once on two cores beside the backend, under TCG.
limit=${VMIO_GUEST_TIMEOUT:-400}

# Cases skipped on purpose, by vsock_test id, each with its reason (they
# are reported as skipped, never silently): none so far.
declare -A skip_why=()

vh_setup "$@"
ktest=$("$top/scripts/guest/build-vsock-test.sh" "$image") || fail "building vsock_test failed"

sock3=$tmp/vhost3.sock
sock4=$tmp/vhost4.sock
# shellcheck disable=SC2034 # vh_start_vmio waits for each
socks=("$sock3" "$sock4")
vh_start_vmio --vm "guest-cid=3,socket=$sock3,uds-path=$tmp/vm3.vsock" \
	--vm "guest-cid=4,socket=$sock4,uds-path=$tmp/vm4.vsock"

# Local TCP ports in use ("PORT STATE", both in hex, as the kernel lists
# them; 0A is LISTEN), from /proc: no iproute2 needed.
tcp_ports() { awk 'FNR > 1 { split($2, a, ":"); print a[2], $4 }' /proc/net/tcp /proc/net/tcp6; }
# A free local TCP port for the QEMUs' link (used by nobody now).
for _ in $(seq 50); do
	port=$((20000 + RANDOM % 30000))
	tcp_ports | grep -q "^$(printf %04X "$port") " || break
done
listening() { tcp_ports | grep -q "^$(printf %04X "$port") 0A$"; }
skip_list=$(IFS=,; echo "${!skip_why[*]}")
guest_env() { # role, cid, ip, peer cid
	echo "VT_ROLE=$1 VT_CID=$2 VT_IP=$3 VT_PEER=$4 VT_SERVER=10.0.77.3 VT_SKIP=$skip_list"
}
ktest_files=(--file "$ktest:/bin/vsock_test")
guest=$top/tests/guest/linux-vsock-guest.sh

# The server first: its QEMU listens for the link at start-up, and the
# client's QEMU, which connects, fails if nobody listens yet.
sock=$sock3
serial=$logs/$name.server.serial.log
vh_boot "$guest" "${ktest_files[@]}" --append "$(guest_env server 3 10.0.77.3 4)" -- \
	-netdev "socket,id=n,listen=127.0.0.1:$port" -device virtio-net-pci,netdev=n,mac=52:54:00:00:77:03
server_pid=$gpid
pids+=("$gpid")
for _ in $(seq 100); do
	listening && break
	kill -0 "$server_pid" 2>/dev/null || break
	sleep 0.1
done
listening || bad "the server's QEMU never listened on 127.0.0.1:$port"

sock=$sock4
serial=$logs/$name.client.serial.log
vh_boot "$guest" "${ktest_files[@]}" --append "$(guest_env client 4 10.0.77.4 3)" -- \
	-netdev "socket,id=n,connect=127.0.0.1:$port" -device virtio-net-pci,netdev=n,mac=52:54:00:00:77:04

# --- verdicts -------------------------------------------------------------
declare -A side_con=()
who=client vh_finish_guest
side_con[client]=$con
gpid=$server_pid
serial=$logs/$name.server.serial.log
who=server vh_finish_guest
side_con[server]=$con
vh_expect_steps server

# The cases, as the server's vsock_test --list printed them ("ID<TAB>name").
mapfile -t cases < <(sed -n 's/^LIST \([0-9]\{1,\}\)\t/\1 /p' <<<"${side_con[server]}")
((${#cases[@]})) || bad "the server guest listed no vsock_test cases"
npass=0 nskip=0 nfail=0
echo "$name: vsock_test (Linux $(cat "$image/kernel-release" 2>/dev/null), from linux-source-6.1) between CID 4 (client) and CID 3 (server) through vmio:"
for c in "${cases[@]}"; do
	id=${c%% *}
	cname=${c#* }
	# vsock_test prints "ID - NAME..." then "ok" or "skipped" once the
	# case is over, on each side.
	res=
	for side in client server; do
		line=$(grep -F -- "$id - $cname..." <<<"${side_con[$side]}" | tail -n1 || true)
		r=${line#*"$id - $cname..."}
		case $r in
		ok) ;;
		skipped) [[ $res == FAIL* ]] || res=skipped ;;
		# vsock_test stops at its first failing case: the rest never ran.
		*) [[ $res == FAIL* ]] || res="FAIL ($side: ${r:-did not run})" ;;
		esac
	done
	if [[ -n ${skip_why[$id]:-} ]]; then
		if [[ $res == skipped ]]; then
			res="skipped: ${skip_why[$id]}"
			nskip=$((nskip + 1))
		else
			[[ -n $res ]] || res="FAIL (ran, though asked to skip it)"
			nfail=$((nfail + 1))
		fi
	elif [[ -z $res ]]; then
		res=ok
		npass=$((npass + 1))
	else
		[[ $res == skipped ]] && res="FAIL (skipped unasked)"
		nfail=$((nfail + 1))
	fi
	[[ $res == FAIL* ]] && bad "vsock_test case $id ($cname): $res"
	printf '  %2s  %-40s %s\n' "$id" "$cname" "$res"
done
echo "$name: vsock_test: ${#cases[@]} cases: $npass passed, $nfail failed, $nskip skipped"

vh_conclude
