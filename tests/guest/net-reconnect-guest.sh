# shellcheck shell=sh
# The guest half of tests/guest/net_reconnect_test.sh (busybox sh, run as
# /test.sh). The host serves the NIC with `vmio net --tap`, the peer in a
# network namespace at 10.0.88.1/24 with a sink on 7001 that checks 64 MiB
# of the pattern; while this guest sends them, the host kills vmio and
# starts it again. Steps ("STEP name PASS|FAIL why"):
#   ping         the path works before the transfer
#   tcp-g2h      64 MiB to the sink, across the restart (our TCP resends
#                what was lost while no backend ran)
#   ping-after   a new flow through the restarted backend
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
host=10.0.88.1

setup_nic 10.0.88.2/24

# The first reply may wait for ARP and the link.
out=$(ping -c 2 -W 5 "$host" 2>&1); rc=$?
echo "$out" | tail -n 2
if [ $rc -eq 0 ]; then pass ping; else fail ping "ping $host exited $rc"; fi

# The marker tells the host the transfer is starting; it kills vmio once
# the sink holds part of it. The limit leaves room for the outage and for
# TCP's backed-off retransmission timer.
echo "RECONNECT-G2H-START"
out=$($T tcp-connect "$host" 7001 --mode source 64M --timeout 150); rc=$?
echo "G2H $out"
if [ $rc -eq 0 ] && echo "$out" | grep -q 'result=ok'; then pass tcp-g2h; else fail tcp-g2h "exit $rc"; fi

out=$(ping -c 2 -W 5 "$host" 2>&1); rc=$?
echo "$out" | tail -n 2
if [ $rc -eq 0 ]; then pass ping-after; else fail ping-after "ping $host exited $rc"; fi
echo "net reconnect guest: $fails failed"
exit $fails
