# shellcheck shell=sh
# The guest half of tests/guest/trickle_test.sh (busybox sh, run as /test.sh).
# The host runs `vmio vsock --tx-buffer-size 1048576` and a sink on
# <uds-path>_5101 before QEMU.
#   g2h-1m      guest -> host, 4 MiB with the host's credit (1 MiB) above
#               this socket's own buffer (256 KiB): Linux keeps no more than
#               its own buffer in flight, so vmio must time its credit
#               updates on that (the host checks every byte)
#   trickle-stream, trickle-seqpacket
#               listeners on 6101 (stream) and 6102 (seqpacket) that accept,
#               read nothing for 4 s, then read all 2000 pieces of 300
#               bytes the host wrote meanwhile, checking every byte, and for
#               seqpacket every message's length (trickle-engine.h)
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
need_vsock

out=$($T connect 2 5101 --mode source 4M --timeout 30); rc=$?
echo "G2H1M $out"
if [ $rc -eq 0 ] && echo "$out" | grep -q 'result=ok'; then pass g2h-1m
else fail g2h-1m "exit $rc (a stall at 262144 bytes: credit updates timed on the host's buffer alone)"; fi

$T trickle-listen 6101 --timeout 60 >/tmp/stream.out 2>&1 &
stream=$!
$T trickle-listen 6102 --seqpacket --timeout 60 >/tmp/seq.out 2>&1 &
seq=$!
wait_listening /tmp/stream.out /tmp/seq.out
echo "TRICKLE-READY"
for c in stream:$stream seq:$seq; do
	kind=${c%:*}
	wait "${c#*:}"; rc=$?
	out=$(grep -v listening "/tmp/$kind.out")
	echo "TRICKLE-GUEST $out"
	step=trickle-$kind
	[ "$kind" = seq ] && step=trickle-seqpacket
	if [ $rc -eq 0 ] && echo "$out" | grep -q 'result=ok'; then pass "$step"
	else fail "$step" "exit $rc"; fi
done

echo "trickle guest: $fails failed"
exit $fails
