#!/bin/bash
# The Linux kernel's own vsock test suite (tools/testing/vsock: vsock_test
# and vsock_diag_test, built from Debian's linux-source-6.1, -6.12 or -7.X, as
# the platform's kernel, by scripts/guest/build-vsock-test.sh) through
# `vmio vsock`: two sibling guests of ONE backend,
#   vmio vsock --vm guest-cid=3,... --vm guest-cid=4,...   (same group)
# the server in CID 3 and the client in CID 4. Every vsock connection of
# the suites goes guest 4 -> vmio -> guest 3 (sibling routing) and back;
# the suites' TCP control channel runs on a virtio-net link between the two
# QEMUs (-netdev socket, listen on one side, connect on the other).
#
# usage: tests/guest/linux_vsock_test.sh [--platform NAME] [--packed] [--image ROOT] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# Prints one line a case (ok, FAIL, or skipped with the reason) and a
# summary line a suite; exit 0 when every case not skipped below passed on
# both sides. Logs: ROOT/NAME/logs/linux_vsock_test[_packed].*.log.
set -euo pipefail

name=linux_vsock_test
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
# Two guests boot at once on two cores beside the backend, under TCG.
limit=${VMIO_GUEST_TIMEOUT:-400}

# The suites, in the order the guests run them (vsock_diag_test first: its
# first case expects no vsock socket in the guest at all).
suites=(vsock_diag_test vsock_test)
# Cases skipped on purpose, as [suite:id]="reason" (they are reported as
# skipped with the reason, never silently): none so far.
declare -A skip_why=()

vh_setup "$@"
# The suite of the guest kernel's version (6.12's has more cases), built
# once for the platforms that share it, in the guest root.
ksrc=$(platform_linux_source "$platform" "$image") || fail "no linux-source package for platform $platform"
read -r ksrc ksuite <<<"$ksrc"
kdir=$("$top/scripts/guest/build-vsock-test.sh" --source "$ksrc" --suite "$ksuite" "$(dirname "$image")") ||
	fail "building vsock_test from $ksrc ($ksuite) failed"

sock3=$tmp/vhost3.sock
sock4=$tmp/vhost4.sock
# shellcheck disable=SC2034 # vh_start_vmio waits for each
socks=("$sock3" "$sock4")
vh_start_vmio --vm "guest-cid=3,socket=$sock3,uds-path=$tmp/vm3.vsock" \
	--vm "guest-cid=4,socket=$sock4,uds-path=$tmp/vm4.vsock"

# Local TCP ports in use ("PORT STATE", both in hex, as the kernel lists
# them; 0A is LISTEN), from /proc: no iproute2 needed.
tcp_ports() { awk 'FNR > 1 { split($2, a, ":"); print a[2], $4 }' /proc/net/tcp /proc/net/tcp6; }
# A free local TCP port for the QEMUs' link (used by nobody now; below
# Linux's ephemeral range, so no outgoing connection takes it meanwhile).
for _ in $(seq 50); do
	port=$((20000 + RANDOM % 12000))
	tcp_ports | grep -q "^$(printf %04X "$port") " || break
done
listening() { tcp_ports | grep -q "^$(printf %04X "$port") 0A$"; }
guest_env() { # role, cid, ip, peer cid
	local suite k ids
	printf 'VT_ROLE=%s VT_CID=%s VT_IP=%s VT_PEER=%s VT_SERVER=10.0.77.3' "$@"
	for suite in "${suites[@]}"; do
		ids=
		for k in "${!skip_why[@]}"; do
			[[ $k == "$suite:"* ]] && ids+=${ids:+,}${k#*:}
		done
		printf ' VT_SKIP_%s=%s' "$suite" "$ids"
	done
}
ktest_files=()
for suite in "${suites[@]}"; do
	ktest_files+=(--file "$kdir/$suite:/bin/$suite")
done
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
# pids held only the server guest, now waited for: nothing to kill later.
pids=()
vh_expect_steps "${suites[@]}"
[[ -z $packed ]] || vh_expect_steps ring-packed

# What a case printed from its "ID - NAME..." header (the argument, found
# on stdin) up to the next case's header or the suite's end: the rest of
# the header's line, then each line after it, trimmed of "\r", less the
# kernel's own console messages ("[   12.345678] ..."); nothing if the
# case never started.
case_block() { # header
	awk -v h="$1" '
		{ sub(/\r$/, "") }
		in_case && (/^[0-9]+ - .*\.\.\./ || /^All tests have been executed/ || /^SUITE-END /) { in_case = 0 }
		{ i = index($0, h) }
		i { in_case = 1; n = 0; lines[n++] = substr($0, i + length(h)); next }
		in_case && !/^\[ *[0-9]+\.[0-9]+\] / { lines[n++] = $0 }
		END { for (k = 0; k < n; k++) print lines[k] }'
}

echo "$name: the kernel's vsock tests (Linux $kernel_release, from $(sed -n 's/^package //p' "$kdir/stamp")) between CID 4 (client) and CID 3 (server) through vmio:"
summary=()
for suite in "${suites[@]}"; do
	# Each side's output of this suite, between its SUITE- markers.
	declare -A out=()
	for side in client server; do
		out[$side]=$(sed -n "/^SUITE-BEGIN $suite\$/,/^SUITE-END $suite /p" <<<"${side_con[$side]}")
	done
	# The cases, as the server's --list printed them ("ID<TAB>name").
	mapfile -t cases < <(sed -n "s/^LIST $suite \([0-9]\{1,\}\)\t/\1 /p" <<<"${out[server]}")
	((${#cases[@]})) || bad "$suite: the server guest listed no cases"
	npass=0 nskip=0 nfail=0
	echo " $suite:"
	for c in "${cases[@]}"; do
		id=${c%% *}
		cname=${c#* }
		why=${skip_why[$suite:$id]:-}
		# The suite prints "ID - NAME..." then "ok" or "skipped" once the
		# case is over, on each side; a case may print notes (to stderr,
		# interleaved on the console) in between, and the verdict then
		# stands on a line of its own (Linux 7's cases 29 and 33, e.g.
		# "Setup unsupported: sole virtio transport" then "ok"). The
		# verdict is the case's last line, the notes are reported beside it.
		res='' notes=''
		for side in client server; do
			block=$(case_block "$id - $cname..." <<<"${out[$side]}")
			r=$(tail -n1 <<<"$block")
			note=$(sed '$d' <<<"$block" | sed '/^$/d' | paste -sd'|' | sed 's/|/; /g')
			[[ -z $note ]] || notes+="${notes:+; }$side: $note"
			case $r in
			ok) ;;
			skipped) [[ $res == FAIL* ]] || res=skipped ;;
			# A suite stops at its first failing case: the rest never ran.
			*) [[ $res == FAIL* ]] || res="FAIL ($side: ${note:+$note; }${r:-did not run})" ;;
			esac
		done
		if [[ -n $why ]]; then
			if [[ $res == skipped ]]; then
				res="skipped: $why"
				nskip=$((nskip + 1))
			else
				[[ -n $res ]] || res="FAIL (ran, though asked to skip it)"
				nfail=$((nfail + 1))
			fi
		elif [[ -z $res ]]; then
			res="ok${notes:+ (said: $notes)}"
			npass=$((npass + 1))
		else
			[[ $res == skipped ]] && res="FAIL (skipped unasked)"
			nfail=$((nfail + 1))
		fi
		[[ $res == FAIL* ]] && bad "$suite case $id ($cname): $res"
		printf '  %2s  %-40s %s\n' "$id" "$cname" "$res"
	done
	summary+=("$suite: ${#cases[@]} cases: $npass passed, $nfail failed, $nskip skipped")
done
for line in "${summary[@]}"; do
	echo "$name: $line"
done

vh_conclude
