# shellcheck shell=sh
# The guest half of tests/guest/linux_vsock_test.sh (busybox sh, run as
# /test.sh in both guests): the kernel's own vsock tests (/bin/vsock_diag_test,
# then /bin/vsock_test), as server in CID 3 or client in CID 4, over the
# guest's virtio-vsock driver and `vmio vsock`; their TCP control channel
# runs on the virtio-net link between the two QEMUs. The host passes the
# role on the kernel command line, which hands unknown NAME=VALUE words to
# /init's environment:
#   VT_ROLE  server|client     VT_CID   our CID (from the backend)
#   VT_IP    our address       VT_PEER  the other guest's CID
#   VT_SERVER the server's address (client)
#   VT_SKIP_<suite>  case ids to skip, a,b,c (e.g. VT_SKIP_vsock_test)
# Prints each suite's own output, one "N - name...ok|skipped" line a case,
# between "SUITE-BEGIN <suite>" and "SUITE-END <suite> <exit status>" for
# the host (the server first lists the cases as "LIST <suite> N<TAB>name"),
# and "STEP <suite> PASS|FAIL why".
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
need_vsock
check_ring vmw_vsock_virtio_transport
cid=$($T cid)
[ "$cid" = "$VT_CID" ] || { fail "$VT_ROLE" "local CID is '$cid', expected $VT_CID"; exit 1; }
if ! { ip addr add "$VT_IP/24" dev eth0 && ip link set eth0 up; }; then
	fail "$VT_ROLE" "no eth0 (virtio_net) to set $VT_IP on"
	exit 1
fi
port=1234
# Each run gives up on its own long before the host's limit.
limit=150

if [ "$VT_ROLE" = client ]; then
	# The server guest may still be booting: wait for its address.
	i=0
	until ping -c 1 -W 1 "$VT_SERVER" >/dev/null 2>&1 || [ $i -ge 120 ]; do i=$((i + 1)); done
fi

run_suite() { # suite
	suite=$1
	skips=
	for n in $(eval "echo \${VT_SKIP_$suite:-}" | tr , ' '); do skips="$skips --skip=$n"; done
	echo "SUITE-BEGIN $suite"
	if [ "$VT_ROLE" = server ]; then
		"/bin/$suite" --list | sed "s/^/LIST $suite /"
		# shellcheck disable=SC2086 # one word per option
		timeout $limit "/bin/$suite" --mode=server --control-port=$port --peer-cid="$VT_PEER" $skips 2>&1
		rc=$?
	else
		# Retry while the server's control socket does not listen yet
		# (the suite exits at once then, before any case ran).
		i=0
		while :; do
			# shellcheck disable=SC2086 # one word per option
			{ timeout $limit "/bin/$suite" --mode=client --control-host="$VT_SERVER" \
				--control-port=$port --peer-cid="$VT_PEER" $skips 2>&1; echo $? >/tmp/rc; } |
				tee /tmp/out
			rc=$(cat /tmp/rc)
			i=$((i + 1))
			if ! grep -q 'Control socket initialization failed' /tmp/out || [ $i -ge 120 ]; then
				break
			fi
			sleep 1
		done
	fi
	echo "SUITE-END $suite $rc"
	if [ "$rc" -eq 0 ]; then pass "$suite"; else fail "$suite" "$VT_ROLE exited $rc"; fi
}

# vsock_diag_test first: its first case expects no vsock socket at all,
# and vsock_test's closed sockets may linger a moment.
run_suite vsock_diag_test
run_suite vsock_test
exit $fails
