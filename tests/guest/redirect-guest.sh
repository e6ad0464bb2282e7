# shellcheck shell=sh
# The guest half of tests/guest/redirect_test.sh (busybox sh, run as /test.sh).
# `vmio redirect` runs here, in the guest, between the guest kernel's own
# AF_VSOCK sockets and unix sockets served by vsock-tool; the host has
# started `vmio vsock --guest-cid 3` and a half-close service on
# <uds-path>_6000. The 6.1 kernel has no vsock sockmap: the relay is the
# default engine's (splice).
# Ports: 6000 host service, 6099 nothing listens, 5000 ours.
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
need_vsock
V=/bin/vmio
MIB8=8388608

# vmio is dynamically linked: run-guest.sh brought what ldd listed.
if $V redirect --help >/dev/null 2>/tmp/vmio.err; then pass vmio
else
	fail vmio "vmio does not run in the guest: $(cat /tmp/vmio.err)"
	echo "redirect guest: $fails failed"
	exit "$fails"
fi

# Guest to host with a half-close: a unix client sends 8 MiB through
# UNIX-LISTEN -> VSOCK-CONNECT:2:6000 and shuts down its write side; the
# host service reads to EOF, checks every byte, and only then replies; the
# client reads the reply back through the relay. Without fork the relay
# exits once that one connection is done, 0 if it ended cleanly.
$V redirect --stats UNIX-LISTEN:/tmp/in.sock VSOCK-CONNECT:2:6000 >/tmp/g2h.log 2>&1 &
r=$!
out=$($T unix-connect /tmp/in.sock --mode source $MIB8 --retry 10 --timeout 100); rc=$?
echo "G2H $out"
wait $r; rrc=$?
echo "G2H-RELAY exit=$rrc $(tr '\n' ' ' </tmp/g2h.log)"
if [ $rrc -ne 0 ]; then fail g2h "vmio redirect exited $rrc: $(tail -n 2 /tmp/g2h.log)"
else check_reply g2h $rc "$out" $MIB8; fi

# A vsock connect the host refuses (nothing on <uds-path>_6099): the
# non-blocking connect fails with ECONNRESET, the relay says so and closes
# the unix side, and exits 1 (its one connection failed).
$V redirect UNIX-LISTEN:/tmp/rst.sock VSOCK-CONNECT:2:6099 >/tmp/rst.log 2>&1 &
r=$!
out=$($T unix-connect /tmp/rst.sock --mode source 4096 --retry 10 --timeout 20); rc=$?
echo "G2H-RST $out"
wait $r; rrc=$?
echo "G2H-RST-RELAY exit=$rrc $(tr '\n' ' ' </tmp/rst.log)"
if [ $rrc -ne 1 ]; then fail g2h-rst "vmio redirect exited $rrc, expected 1"
elif ! grep -q 'cannot connect to VSOCK-CONNECT:2:6099: Connection reset by peer' /tmp/rst.log; then
	fail g2h-rst "no 'cannot connect ... Connection reset by peer' in: $(cat /tmp/rst.log)"
elif [ $rc -eq 2 ] || [ "$(field recvd "$out")" != 0 ]; then
	fail g2h-rst "the unix client was not simply closed (exit $rc)"
else pass g2h-rst; fi

# Host to guest: VSOCK-LISTEN:5000,fork (reuseaddr and backlog apply to a
# vsock listener as to TCP's) in front of a unix echo server; the host
# connects twice at once through the backend's uds-path (CONNECT 5000)
# and checks what comes back, byte for byte. The marker tells the host
# script both are listening.
$T unix-listen /tmp/sink.sock --mode echo --count 2 --timeout 100 >/tmp/sink.out 2>&1 &
s=$!
$V redirect -v --stats VSOCK-LISTEN:5000,fork,reuseaddr,backlog=16 UNIX-CONNECT:/tmp/sink.sock >/tmp/h2g.log 2>&1 &
r=$!
wait_listening /tmp/sink.out /tmp/h2g.log
echo "REDIRECT-H2G-READY"
wait $s; src=$?
echo "H2G-SINK $(grep -v listening /tmp/sink.out | tr '\n' ' ')"
# The echo server is done when its side ends; the relay may still be
# flushing the last bytes to the host. Each relayed connection prints its
# stats line when both directions are through: stop it after two.
i=0
while [ "$(grep -c '^vmio redirect: connection [0-9]*: ' /tmp/h2g.log)" -lt 2 ] && [ $i -lt 200 ]; do
	i=$((i + 1))
	usleep 50000
done
kill -TERM $r
wait $r; rrc=$?
echo "H2G-RELAY exit=$rrc $(grep -E 'engine|^vmio redirect: ' /tmp/h2g.log | tr '\n' ' ')"
if [ $src -ne 0 ]; then fail h2g "the unix echo server exited $src"
elif [ "$(grep -c '^vmio redirect: connection [0-9]*: ' /tmp/h2g.log)" -ne 2 ]; then
	fail h2g "the relay did not finish two connections: $(tail -n 3 /tmp/h2g.log)"
elif [ $rrc -ne 0 ]; then fail h2g "vmio redirect exited $rrc after SIGTERM, expected 0"
else pass h2g; fi

echo "redirect guest: $fails failed"
exit "$fails"
