# shellcheck shell=sh
# The guest half of tests/guest/net_test.sh (busybox sh, run as /test.sh).
# The host has put `vmio net` on a TAP or (AF_XDP) on a veth end, the peer
# in a network namespace, 10.0.88.1/24 there, with TCP services on 7001
# (sink, checks 16 MiB of the pattern) and 7002 (echo). This script gives the guest's virtio-net NIC 10.0.88.2/24 and
# runs the guest's side of each scenario; every step prints
# "STEP name PASS|FAIL why". NT_QUEUES (kernel command line) is the number
# of queue pairs the host asked for.
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
host=10.0.88.1
queues=${NT_QUEUES:-1}

# The NIC: the only one, bound to virtio_net.
setup_nic 10.0.88.2/24
check_ring virtio_net
set -- /sys/class/net/"$nic"/queues/rx-*
n=$#
if [ "$n" -eq "$queues" ]; then pass queues; else fail queues "$nic has $n rx queues, expected $queues"; fi

# Guest to namespace. The first reply may wait for ARP and the link.
out=$(ping -c 3 -W 5 "$host" 2>&1); rc=$?
echo "$out" | tail -n 2
if [ $rc -eq 0 ]; then pass ping-g2h; else fail ping-g2h "ping $host exited $rc"; fi

# 16 MiB to the namespace's sink, which checks every byte.
out=$($T tcp-connect "$host" 7001 --mode source 16M --timeout 100); rc=$?
echo "G2H $out"
if [ $rc -eq 0 ] && echo "$out" | grep -q 'result=ok'; then pass tcp-g2h; else fail tcp-g2h "exit $rc"; fi

# 16 MiB there and back over 4 connections at once (4 flows: with several
# queue pairs, they spread over the queues); each checks what came back.
out=$($T tcp-connect "$host" 7002 --count 4 --mode source 4M --echo-check --timeout 100); rc=$?
echo "ECHO $out"
if [ $rc -eq 0 ] && echo "$out" | grep -q 'summary conns=4 ok=4'; then pass tcp-echo
else fail tcp-echo "exit $rc"; fi

# Namespace to guest: our sink, then the marker the host waits for before
# it pings us and connects.
$T tcp-listen 7101 --count 1 --expect 16M --timeout 100 >/tmp/h2g.out 2>&1 &
h2g=$!
wait_listening /tmp/h2g.out
echo "NET-H2G-READY"
wait $h2g; rc=$?
echo "H2G $(grep -v listening /tmp/h2g.out)"
if [ $rc -eq 0 ]; then pass tcp-h2g; else fail tcp-h2g "exit $rc"; fi

# Which queues carried frames: the driver's per-queue counters, wherever
# this kernel reports them (6.1: ethtool -S; 6.10 and later: netdev
# netlink qstats), and which of the two that was.
$T nic-queues "$nic" | sed 's/^/NIC /'
echo "net guest: $fails failed"
exit $fails
