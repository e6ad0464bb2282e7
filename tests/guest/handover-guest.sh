# shellcheck shell=sh
# The guest half of tests/guest/handover_test.sh (busybox sh, run as /test.sh).
# The host runs `vmio vsock` with this guest (CID 3) and a sibling VM (CID 4,
# handover-sibling) in one group, and its services on <uds-path>_5201 and
# _5203 before QEMU. This script opens every connection, prints
# HANDOVER-READY, and holds them while the host hands vmio over 20 times;
# the host then connects to port 6209 here (the stop signal), and the
# guest's writers finish. Every stream is checked at its receiver, byte for
# byte, and the writer checks the receiver's count and checksum:
#   g2h        guest -> host <uds>_5201, paced (handover-peer send)
#   idle       guest -> host <uds>_5203: nothing until the stop, then 64 KiB
#              and the host's reply
#   held       guest -> host <uds>_5206 as fast as credit allows, to a host
#              reader of 4 KiB every 100 ms: vmio holds guest bytes (its
#              --tx-buffer-size) at every reload
#   sibling    guest -> CID 4 port 7000 (the sibling VM), 64 KiB after the
#              reloads; with SIBLING=across on the kernel command line,
#              opened before them and paced through them
#   h2g        host CONNECT 6202 -> here, paced (handover-peer recv)
#   seqpacket  host CONNECT 6204 on <uds>.seqpacket -> an echo here
#              (vsock-tool seq-listen): every message checked by the host
#   hybrid     host CONNECT 6205 written half before the first hand-over,
#              finished after some: then a paced stream, checked here
#   dmesg      no kernel line about vsock or virtio, and none at warning
#              level or worse, since the connections opened
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
need_vsock
H=/bin/handover-peer
TO=${HANDOVER_TIMEOUT:-400}
RATE=32768

# The boot's kernel log is judged apart (vsock or virtio at warning level
# or worse); then emptied, so that the end sees only what came after.
dmesg_mark
$H recv vsock-listen:6202 --timeout "$TO" >/tmp/h2g.out 2>&1 &
h2g=$!
$T seq-listen 6204 --timeout "$TO" >/tmp/seq.out 2>&1 &
seq=$!
$H recv vsock-listen:6205 --timeout "$TO" >/tmp/hyb.out 2>&1 &
hyb=$!
$T listen 6209 --count 1 --timeout "$TO" >/tmp/stop.out 2>&1 &
stop=$!
wait_listening /tmp/h2g.out /tmp/seq.out /tmp/hyb.out /tmp/stop.out

$H send vsock:2:5201 --rate $RATE --timeout "$TO" >/tmp/g2h.out 2>&1 &
g2h=$!
$H send vsock:2:5203 --rate 0 --final 64K --timeout "$TO" >/tmp/idle.out 2>&1 &
idle=$!
$H send vsock:2:5206 --rate 64M --timeout "$TO" >/tmp/held.out 2>&1 &
held=$!
# SIBLING=across (the host's VMIO_HANDOVER_SIBLING_ACROSS=1): the sibling
# stream runs through the reloads; otherwise it opens after them.
sib=
sibfiles=
if [ "${SIBLING:-after}" = across ]; then
	$H send vsock:4:7000 --rate $((RATE / 2)) --timeout "$TO" >/tmp/sib.out 2>&1 &
	sib=$!
	sibfiles=/tmp/sib.out
fi
# shellcheck disable=SC2086 # sibfiles: none or one
wait_connected /tmp/g2h.out /tmp/idle.out /tmp/held.out $sibfiles
echo "HANDOVER-READY"

# The stop signal: the host connects to 6209 once it is done handing
# over (bounded by $TO).
wait $stop
echo "HANDOVER-STOP $(grep -v listening /tmp/stop.out)"
if [ -z "$sib" ]; then
	# The sibling connection, after the reloads: 64 KiB and the reply.
	$H send vsock:4:7000 --rate 0 --final 64K --timeout 60 >/tmp/sib.out 2>&1 &
	sib=$!
	wait_connected /tmp/sib.out
fi
kill -USR1 $g2h $idle $held $sib 2>/dev/null
# The host's slow reader speeds up now: the held stream drains.
echo "HANDOVER-STOPPED"
for c in g2h:$g2h idle:$idle held:$held sibling:$sib; do
	step=${c%:*}
	wait "${c#*:}"; rc=$?
	f=/tmp/$step.out
	[ "$step" = sibling ] && f=/tmp/sib.out
	out=$(grep 'result=' "$f")
	echo "HO-$step $out"
	if [ $rc -eq 0 ] && echo "$out" | grep -q 'result=ok'; then pass "$step"
	else fail "$step" "exit $rc: $(tail -n 2 "$f" | tr '\n' ' ')"; fi
done
# The host's writers end theirs after the stop too.
for c in h2g:$h2g seqpacket:$seq hybrid:$hyb; do
	step=${c%:*}
	wait "${c#*:}"; rc=$?
	case $step in
	h2g) f=/tmp/h2g.out ;;
	seqpacket) f=/tmp/seq.out ;;
	*) f=/tmp/hyb.out ;;
	esac
	out=$(grep 'result=' "$f")
	echo "HO-$step $out"
	if [ $rc -eq 0 ] && echo "$out" | grep -q 'result=ok'; then pass "$step"
	else fail "$step" "exit $rc: $(tail -n 2 "$f" | tr '\n' ' ')"; fi
done

# The kernel's log since the connections opened.
check_dmesg

echo "handover guest: $fails failed"
exit $fails
