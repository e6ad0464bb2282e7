# shellcheck shell=sh
# The guest half of tests/guest/net_handover_test.sh (busybox sh, run as
# /test.sh), in both its modes (hand-over, crash). The host serves the NIC
# with `vmio net --tap`, the peer in a network namespace at 10.0.88.1/24,
# where handover-peer receives on 7101 before QEMU starts. This script
# opens both streams, prints NET-HANDOVER-READY, and keeps them running
# while the host replaces vmio again and again; the host then connects to
# 7109 here (the stop signal), and the guest's writer finishes. With
# NH_TOTAL (net_migrate_test.sh: the guest moved to another QEMU under
# its streams) both streams are NH_TOTAL bytes long and end by
# themselves: no stop signal. NH_CHANNELS (net_migrate_test.sh's two
# pairs on one vCPU) sets the NIC's combined channels first. Steps:
#   ping   the path works before the streams
#   g2h    guest -> namespace 7101, paced at NH_RATE B/s, checked byte for
#          byte there; the writer checks the receiver's count and checksum
#   h2g    namespace -> here 7102, paced, checked here (handover-peer recv)
#   dmesg  no kernel line about virtio, none at warning level or worse,
#          since the link came up (guest-steps.sh check_dmesg)
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
H=/bin/handover-peer
host=10.0.88.1
TO=${NH_TIMEOUT:-400}
RATE=${NH_RATE:-262144}
TOTAL=${NH_TOTAL:-}

setup_nic 10.0.88.2/24
if [ -n "${NH_CHANNELS:-}" ]; then
	out=$($T nic-channels "$nic" "$NH_CHANNELS" 2>&1) || fail channels "$out"
	echo "$out"
fi
# The first reply may wait for ARP and the link.
out=$(ping -c 3 -W 5 "$host" 2>&1); rc=$?
echo "$out" | tail -n 2
if [ $rc -eq 0 ]; then pass ping; else fail ping "ping $host exited $rc"; fi
# What the link's coming up logged is judged apart (warnings about virtio
# only); what comes after must be silent.
dmesg_mark

$H recv tcp-listen:7102 --timeout "$TO" >/tmp/h2g.out 2>&1 &
h2g=$!
if [ -z "$TOTAL" ]; then
	$T tcp-listen 7109 --count 1 --timeout "$TO" >/tmp/stop.out 2>&1 &
	stop=$!
	wait_listening /tmp/h2g.out /tmp/stop.out
else
	wait_listening /tmp/h2g.out
fi
$H send "tcp:$host:7101" --rate "$RATE" ${TOTAL:+--total "$TOTAL"} --timeout "$TO" >/tmp/g2h.out 2>&1 &
g2h=$!
wait_connected /tmp/g2h.out
echo "NET-HANDOVER-READY"

# The stop signal: the host connects once it is done replacing vmio.
if [ -z "$TOTAL" ]; then
	wait $stop
	echo "NET-HANDOVER-STOP $(grep -v listening /tmp/stop.out)"
	kill -USR1 $g2h 2>/dev/null
fi
for c in g2h:$g2h h2g:$h2g; do
	step=${c%:*}
	wait "${c#*:}"; rc=$?
	out=$(grep 'result=' "/tmp/$step.out")
	echo "NH-$step $out"
	if [ $rc -eq 0 ] && echo "$out" | grep -q 'result=ok'; then pass "$step"
	else fail "$step" "exit $rc: $(tail -n 2 "/tmp/$step.out" | tr '\n' ' ')"; fi
done
check_dmesg
echo "net handover guest: $fails failed"
exit $fails
