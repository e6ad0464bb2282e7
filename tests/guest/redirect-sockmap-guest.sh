# shellcheck shell=sh
# The guest half of tests/guest/redirect_sockmap_test.sh (busybox sh, run
# as /test.sh): the seed's shape, a unix datagram sender -> `vmio redirect
# UNIX-RECV:... VSOCK-CONNECT:2:PORT` -> vsock -> a host sink, with the
# kernel moving the datagrams (the sockmap engine) on Linux 6.4 and later,
# and the message engine on older kernels, which must say why.
#   xfer   32 MiB of 64 KiB datagrams, every byte checked by the host sink
#          on <uds-path>_7001; the engine that runs is the one -v and
#          --control name
#   stall  the same into the sink on <uds-path>_7002, which stops reading
#          for 3 s after 2 MiB: the sender must be held back (its send
#          takes the stall), the kernel must hold no more of its data than
#          its own send buffer (SIOCOUTQ), the guest's MemAvailable must
#          not fall by more than 8 MiB, and every byte must arrive
#   refused (kernels before 6.4) vmio told to try sockmap anyway: the
#          kernel refuses the vsock socket, and the message engine goes on
#          with the same connection (8 MiB into <uds-path>_7003)
#   answer ANSWER_BYTES (kernel command line; 256 MiB unless set) into the
#          sink on <uds-path>_7004, which writes 16 bytes back on the same
#          connection for each 64 KiB it reads, while the host runs two
#          CPU-bound neighbours. vmio does not relay that way (UNIX-RECV
#          has no peer to send to): the answer stays in its vsock socket,
#          which is in its sockmap. `vmio-redirect-bench take` reads it
#          from a copy of that socket (pidfd_getfd) as a level-triggered
#          relay would, checking every byte and counting the recvs that
#          refused what poll called readable. vmio must exit 0 with every
#          byte forwarded, and use at most a tenth of the step's time in
#          CPU with the sockmap engine: its only work is a 10 ms tick, and
#          a spin would take most of the guest's one vCPU. The message
#          engine (before 6.4) copies every byte itself: at most 60%
#          there (measured: 36% on 6.1).
#   lock   (sockmap kernels) sockmap-recv-lock against host echo services
#          on 7005 and 7006, with and without a sockmap: whether this
#          kernel's blocking recv on a vsock socket in a sockmap holds the
#          socket's lock while it sleeps (docs/known-kernel-issues.md).
#          Reported, not judged: vmio never makes that call.
# Sender and sink are vmio-redirect-bench (send, sink): one pattern.
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
need_vsock
V=/bin/vmio
B=/bin/vmio-redirect-bench
MIB32=33554432

# The engine this kernel must run: vsock joins a sockmap from Linux 6.4.
kver=$(uname -r)
maj=${kver%%.*}
min=${kver#*.}
min=${min%%[!0-9]*}
if [ "$maj" -gt 6 ] || { [ "$maj" -eq 6 ] && [ "$min" -ge 4 ]; }; then
	want=sockmap
else
	want=message
fi
echo "SOCKMAP-GUEST kernel=$kver engine=$want"

if ! $V redirect --help >/dev/null 2>/tmp/vmio.err; then
	fail vmio "vmio does not run in the guest: $(cat /tmp/vmio.err)"
	echo "redirect sockmap guest: $fails failed"
	exit "$fails"
fi

mem_avail() { sed -n 's/^MemAvailable: *\([0-9]*\) kB$/\1/p' /proc/meminfo; }

# UNIX-RECV's socket file appears once the relay is ready (for sockmap:
# ADDRESS2 connected and both sockets in the map).
wait_socket() { # path
	i=0
	while [ ! -S "$1" ] && [ $i -lt 200 ]; do
		i=$((i + 1))
		usleep 50000
	done
	[ -S "$1" ]
}

# The engines --control names (the listener's, then each connection's),
# space-separated.
engines() { # control socket
	$V stats --json "$1" 2>/dev/null | grep -o '"engine":"[a-z]*"' |
		sed 's/.*:"\(.*\)"/\1/' | tr '\n' ' '
}

# What -v must have said about the engine.
check_engine() { # step, relay log, engines from --control
	if [ "$(echo "$3" | tr ' ' '\n' | grep -c .)" -lt 2 ] ||
		[ -n "$(echo "$3" | tr ' ' '\n' | grep . | grep -v "^$want$")" ]; then
		fail "$1" "--control names engines '$3', expected $want for the listener and the connection"
		return 1
	fi
	if [ $want = sockmap ]; then
		grep -q 'engine sockmap, ADDRESS2 send buffer [0-9]* bytes, vsock buffer 4194304 bytes' "$2" ||
			{ fail "$1" "-v did not say 'engine sockmap ... vsock buffer 4194304': $(grep engine "$2")"; return 1; }
	else
		grep -q 'engine message (--engine auto: sockmap is not available: forwarding into vsock needs Linux 6.4, this is ' "$2" ||
			{ fail "$1" "-v did not say why the sockmap engine does not run: $(grep -i engine "$2")"; return 1; }
	fi
	return 0
}

# Waits (up to 30 s) for the relay to exit after its sender finished, and
# sets rrc to its status. One that does not exit is a failure of its own:
# what it holds (--control) and its log go to the console, and it is
# killed, so that the next step still runs.
wait_relay() { # pid, control socket, relay log
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 300 ]; do
		i=$((i + 1))
		usleep 100000
	done
	if kill -0 "$1" 2>/dev/null; then
		echo "RELAY-STUCK $2: $($V stats --json "$2" 2>&1)"
		sed 's/^/RELAY-STUCK log: /' "$3"
		# Its descriptors, what each epoll instance watches, and where
		# each thread sleeps.
		for f in /proc/"$1"/fd/*; do
			echo "RELAY-STUCK fd ${f##*/} -> $(readlink "$f") $(grep -h '^tfd' /proc/"$1"/fdinfo/"${f##*/}" | tr '\n' ' ')"
		done
		for t in /proc/"$1"/task/*; do
			echo "RELAY-STUCK task ${t##*/} $(cat "$t"/wchan 2>/dev/null) $(tr '\n' ' ' <"$t"/stack 2>/dev/null)"
		done
		sed 's/^/RELAY-STUCK unix: /' /proc/net/unix
		kill -9 "$1"
		wait "$1"
		rrc=124
		return
	fi
	wait "$1"; rrc=$?
}

# --- xfer -----------------------------------------------------------------
$V redirect -v --stats --control /tmp/ctl1.sock UNIX-RECV:/tmp/in1.sock \
	VSOCK-CONNECT:2:7001 >/tmp/r1.log 2>&1 &
r=$!
wait_socket /tmp/in1.sock
eng=$(engines /tmp/ctl1.sock)
out=$($B send --to udg:/tmp/in1.sock --bytes $MIB32 --timeout 60 2>&1); rc=$?
wait_relay $r /tmp/ctl1.sock /tmp/r1.log
echo "SOCKMAP-XFER $out"
echo "SOCKMAP-XFER-RELAY exit=$rrc engines=$eng $(grep -E 'engine|not available|^vmio redirect: connection' /tmp/r1.log | tr '\n' ' ')"
if [ $rc -ne 0 ]; then fail xfer "the sender failed: $out"
elif [ $rrc -eq 124 ]; then fail xfer "vmio redirect did not exit within 30 s of its sender's end (RELAY-STUCK lines above)"
	elif [ $rrc -ne 0 ]; then fail xfer "vmio redirect exited $rrc: $(tail -n 2 /tmp/r1.log)"
elif check_engine xfer /tmp/r1.log "$eng"; then pass xfer; fi

# --- stall ----------------------------------------------------------------
$V redirect -v --stats --control /tmp/ctl2.sock UNIX-RECV:/tmp/in2.sock \
	VSOCK-CONNECT:2:7002 >/tmp/r2.log 2>&1 &
r=$!
wait_socket /tmp/in2.sock
eng=$(engines /tmp/ctl2.sock)
# The relay settles first (its own allocations are not the queue).
sleep 1
base=$(mem_avail)
# MemAvailable four times a second, the stall's 3 s included.
(while :; do mem_avail; usleep 250000; done) >/tmp/mem2.log 2>&1 &
m=$!
out=$($B send --to udg:/tmp/in2.sock --bytes $MIB32 --timeout 60 2>&1); rc=$?
kill $m
wait_relay $r /tmp/ctl2.sock /tmp/r2.log
low=$(sort -n /tmp/mem2.log | head -n 1)
drop=$((base - ${low:-$base}))
sndbuf=$(cat /proc/sys/net/core/wmem_default)
outq=$(field outq_max "$out")
secs=$(field time "$out")
echo "SOCKMAP-STALL $out mem_drop_kib=$drop sndbuf=$sndbuf"
echo "SOCKMAP-STALL-RELAY exit=$rrc engines=$eng $(grep -E 'engine|not available|^vmio redirect: connection' /tmp/r2.log | tr '\n' ' ')"
# A 64 KiB datagram costs 66560 bytes of send memory here; the sender may
# go one over its buffer (the kernel checks before it allocates).
if [ $rc -ne 0 ]; then fail stall "the sender failed: $out"
elif [ $rrc -eq 124 ]; then fail stall "vmio redirect did not exit within 30 s of its sender's end (RELAY-STUCK lines above)"
	elif [ $rrc -ne 0 ]; then fail stall "vmio redirect exited $rrc: $(tail -n 2 /tmp/r2.log)"
elif [ "${secs%%.*}" -lt 2 ]; then
	fail stall "the sender was not held back: its 32 MiB took ${secs} s, with the host reading nothing for 3 s"
elif [ "${outq:-0}" -gt $((sndbuf + 2 * 66560)) ]; then
	fail stall "the kernel held ${outq} bytes of the sender's, beyond its send buffer of $sndbuf"
elif [ "$drop" -gt 8192 ]; then
	fail stall "MemAvailable fell by $drop KiB while the host stalled"
elif check_engine stall /tmp/r2.log "$eng"; then pass stall; fi

# --- refused (kernels before 6.4) -----------------------------------------
# Told to try whatever the version says, vmio meets the kernel's own
# refusal of the connected vsock socket (EOPNOTSUPP), as on a kernel whose
# version hides what it can do, and goes on with the message engine on
# that same connection: the host sink takes one connection only.
if [ $want = message ]; then
	VMIO_REDIRECT_SOCKMAP_ANY_KERNEL=1 $V redirect -v --control /tmp/ctl3.sock \
		UNIX-RECV:/tmp/in3.sock VSOCK-CONNECT:2:7003 >/tmp/r3.log 2>&1 &
	r=$!
	wait_socket /tmp/in3.sock
	eng=$(engines /tmp/ctl3.sock)
	out=$($B send --to udg:/tmp/in3.sock --bytes 8388608 --timeout 60 2>&1); rc=$?
	wait_relay $r /tmp/ctl3.sock /tmp/r3.log
	echo "SOCKMAP-REFUSED $out"
	echo "SOCKMAP-REFUSED-RELAY exit=$rrc engines=$eng $(grep -E 'engine|not available|^vmio redirect: connection' /tmp/r3.log | tr '\n' ' ')"
	if [ $rc -ne 0 ]; then fail refused "the sender failed: $out"
	elif [ $rrc -eq 124 ]; then fail refused "vmio redirect did not exit within 30 s of its sender's end (RELAY-STUCK lines above)"
	elif [ $rrc -ne 0 ]; then fail refused "vmio redirect exited $rrc: $(tail -n 2 /tmp/r3.log)"
	elif ! grep -q 'engine message (--engine auto: the kernel does not take ADDRESS2 into a sockmap: Operation not supported)' /tmp/r3.log; then
		fail refused "-v did not say the kernel refused the socket: $(grep -i engine /tmp/r3.log)"
	elif [ "$eng" != "message message " ]; then
		fail refused "--control names engines '$eng', expected message twice"
	else pass refused; fi
fi

# --- answer -----------------------------------------------------------------
# vmio's CPU ticks (utime + stime) and the clock in ticks (/proc/uptime).
cpu_ticks() { # pid
	# shellcheck disable=SC2046 # the fields of /proc/PID/stat
	# Nothing once it has gone (it may between kill -0 and the read).
	set -- $(cat /proc/"$1"/stat 2>/dev/null)
	[ $# -ge 15 ] && echo $((${14} + ${15}))
}
uptime_ticks() { read -r up _ </proc/uptime; echo "${up%.*}${up#*.}"; }
abytes=${ANSWER_BYTES:-268435456}
# The most of the step's time vmio may spend in CPU, in percent.
cpu_max=10
[ $want = sockmap ] || cpu_max=60
rbytes=$((abytes / 4096))
$V redirect -v --stats --control /tmp/ctl4.sock UNIX-RECV:/tmp/in4.sock \
	VSOCK-CONNECT:2:7004 >/tmp/r4.log 2>&1 &
r=$!
wait_socket /tmp/in4.sock
eng=$(engines /tmp/ctl4.sock)
# The host starts its neighbours on this line.
echo "SOCKMAP-ANSWER-BEGIN"
t0=$(uptime_ticks)
(while kill -0 $r 2>/dev/null; do cpu_ticks $r; usleep 200000; done) >/tmp/cpu4.log 2>&1 &
cs=$!
$B take --pid $r --bytes $rbytes --timeout 60 >/tmp/take4.log 2>&1 &
tk=$!
out=$($B send --to udg:/tmp/in4.sock --bytes "$abytes" --timeout 60 2>&1); rc=$?
wait_relay $r /tmp/ctl4.sock /tmp/r4.log
t1=$(uptime_ticks)
wait $tk; trc=$?
wait $cs
took=$(cat /tmp/take4.log)
# The last reading: the sampler writes only numbers, but keep it so.
vcpu=$(grep -E '^[0-9]+$' /tmp/cpu4.log | tail -n 1)
wall=$((t1 - t0))
echo "SOCKMAP-ANSWER $out vmio_cpu_ticks=${vcpu:-?} wall_ticks=$wall cpu_max_pct=$cpu_max"
echo "SOCKMAP-ANSWER-TAKE $took"
echo "SOCKMAP-ANSWER-RELAY exit=$rrc engines=$eng $(grep -E 'engine|not available|^vmio redirect: connection' /tmp/r4.log | tr '\n' ' ')"
if [ $rc -ne 0 ]; then fail answer "the sender failed: $out"
elif [ $rrc -eq 124 ]; then fail answer "vmio redirect did not exit within 30 s of its sender's end (RELAY-STUCK lines above)"
elif [ $rrc -ne 0 ]; then fail answer "vmio redirect exited $rrc: $(tail -n 2 /tmp/r4.log)"
elif [ $trc -ne 0 ]; then fail answer "the host's answer did not all arrive intact in vmio's socket: $took"
elif [ -z "$vcpu" ] || [ $((vcpu * 100)) -gt $((wall * cpu_max)) ]; then
	fail answer "vmio used ${vcpu:-?} of $wall ticks of CPU: more than $cpu_max%"
elif check_engine answer /tmp/r4.log "$eng"; then pass answer; fi

# --- lock (sockmap kernels) ----------------------------------------------------
if [ $want = sockmap ]; then
	echo "SOCKMAP-LOCK $(/bin/sockmap-recv-lock 7005 2>&1)"
	echo "SOCKMAP-LOCK $(/bin/sockmap-recv-lock 7006 --no-sockmap 2>&1)"
fi

echo "redirect sockmap guest: $fails failed"
exit "$fails"
