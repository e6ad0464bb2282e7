# shellcheck shell=sh
# The guest half of tests/guest/linux_vsock_test.sh (busybox sh, run as
# /test.sh in both guests): the kernel's own vsock_test (/bin/vsock_test),
# as server in CID 3 or client in CID 4, over the guest's virtio-vsock
# driver and `vmio vsock`; its TCP control channel runs on the virtio-net
# link between the two QEMUs. The host passes the role on the kernel
# command line, which hands unknown NAME=VALUE words to /init's environment:
#   VT_ROLE  server|client     VT_CID   our CID (from the backend)
#   VT_IP    our address       VT_PEER  the other guest's CID
#   VT_SERVER the server's address (client)   VT_SKIP  case ids, a,b,c
# Prints vsock_test's own output, one "N - name...ok|skipped" line a case,
# for the host, and "STEP role PASS|FAIL why".
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
need_vsock
cid=$($T cid)
[ "$cid" = "$VT_CID" ] || { fail "$VT_ROLE" "local CID is '$cid', expected $VT_CID"; exit 1; }
if ! { ip addr add "$VT_IP/24" dev eth0 && ip link set eth0 up; }; then
	fail "$VT_ROLE" "no eth0 (virtio_net) to set $VT_IP on"
	exit 1
fi
skips=
for n in $(echo "${VT_SKIP:-}" | tr , ' '); do skips="$skips --skip=$n"; done
port=1234
# Each side gives up on its own long before the host's limit.
limit=300

if [ "$VT_ROLE" = server ]; then
	/bin/vsock_test --list | sed 's/^/LIST /'
	# shellcheck disable=SC2086 # one word per option
	timeout $limit /bin/vsock_test --mode=server --control-port=$port --peer-cid="$VT_PEER" $skips
	rc=$?
else
	# The server guest may still be booting: wait for its address, then
	# retry while its control socket does not listen yet (vsock_test
	# exits at once then, before any test ran).
	i=0
	until ping -c 1 -W 1 "$VT_SERVER" >/dev/null 2>&1 || [ $i -ge 120 ]; do i=$((i + 1)); done
	i=0
	while :; do
		# shellcheck disable=SC2086 # one word per option
		{ timeout $limit /bin/vsock_test --mode=client --control-host="$VT_SERVER" \
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
if [ "$rc" -eq 0 ]; then pass "$VT_ROLE"; else fail "$VT_ROLE" "vsock_test exited $rc"; fi
exit $fails
