# shellcheck shell=sh
# Sourced in the guest (busybox sh) by the guest halves of the guest tests,
# vsock-guest.sh and redirect-guest.sh; the host scripts pass it in as
# /lib/guest-steps.sh. Every step prints "STEP name PASS|FAIL why" for the
# host script, which greps them from the serial console.
T=/bin/vsock-tool
fails=0
pass() { echo "STEP $1 PASS"; }
fail() { echo "STEP $1 FAIL $2"; fails=$((fails + 1)); }
# The value of key=VALUE in a result line.
field() { echo "$2" | sed -n "s/.* $1=\([^ ]*\).*/\1/p" | head -n1; }

# Nothing vsock can run without the virtio-vsock driver bound to the device.
need_vsock() {
	[ -c /dev/vsock ] || { echo "STEP setup FAIL no /dev/vsock (driver not loaded?)"; exit 1; }
	[ -e "$(echo /sys/bus/virtio/drivers/vmw_vsock_virtio_transport/virtio*)" ] ||
		{ echo "STEP setup FAIL vmw_vsock_virtio_transport bound no device"; exit 1; }
}

# Waits (up to 5 s) until each log file says its service is listening.
wait_listening() { # file...
	i=0
	for f in "$@"; do
		while ! grep -q listening "$f" 2>/dev/null && [ $i -le 100 ]; do
			i=$((i + 1))
			usleep 50000
		done
	done
}

# Waits (up to 20 s in all) until each log file says its writer connected,
# or gave its result (a failure at once).
wait_connected() { # file...
	i=0
	for f in "$@"; do
		while ! grep -q -e connected -e result= "$f" 2>/dev/null && [ $i -le 400 ]; do
			i=$((i + 1))
			usleep 50000
		done
	done
}

# A source run against a half-close service: the service read to EOF, then
# replied with the count and checksum of what it got, which must be ours.
check_reply() { # step, exit status, output, bytes sent
	want="got $4 fnv $($T fnv "$4")"
	reply=$(echo "$3" | sed -n 's/.* reply="\([^"]*\)\..*/\1/p')
	if [ "$2" -ne 0 ]; then fail "$1" "exit $2"
	elif [ "$reply" != "$want" ]; then fail "$1" "reply '$reply', expected '$want'"
	else pass "$1"; fi
}

# With RING=packed on the kernel command line (the host's --packed):
# every device bound to driver negotiated VIRTIO_F_RING_PACKED, feature
# bit 34, the 35th character of its features file.
check_ring() { # driver
	# What each device negotiated, for the host (in_order=on: the host
	# compares bits 34 and 35 with what vmio was told).
	for d in /sys/bus/virtio/drivers/"$1"/virtio*; do
		[ -e "$d/features" ] && echo "FEATURES ${d##*/} $(cat "$d/features")"
	done
	[ "${RING:-split}" = packed ] || return 0
	for d in /sys/bus/virtio/drivers/"$1"/virtio*; do
		f=$(cat "$d/features" 2>/dev/null)
		if [ "$(echo "$f" | cut -c35)" = 1 ]; then pass ring-packed
		else fail ring-packed "${d##*/}: features $f without RING_PACKED"; fi
	done
}

# The guest's only NIC, bound to virtio_net, up with ADDR (e.g.
# 10.0.88.2/24), and lo up; sets nic. Exits the script if there is none.
setup_nic() { # addr
	nic=
	for d in /sys/bus/virtio/drivers/virtio_net/*/net/*; do
		[ -e "$d" ] && nic=${d##*/}
	done
	[ -n "$nic" ] || { echo "STEP setup FAIL virtio_net bound no device"; exit 1; }
	ip link set lo up
	if ! { ip addr add "$1" dev "$nic" && ip link set "$nic" up; }; then
		echo "STEP setup FAIL cannot configure $nic"
		exit 1
	fi
}

# The kernel's log: dmesg_mark keeps what boot logged and empties it;
# check_dmesg then passes step "dmesg" unless a line since mentions vsock
# or virtio or is a warning or worse (-r gives each line's level, <0> to
# <4>), or boot logged a warning about vsock or virtio. Two warnings are
# about the host, not the guest's devices: under emulation on a loaded
# host a timer interrupt can take milliseconds ("hrtimer: interrupt took
# N ns") and the clocks drift apart ("clocksource: ... unstable"); they
# are shown, not failed.
dmesg_mark() {
	dmesg -r >/tmp/boot-dmesg.out 2>&1
	dmesg -c >/dev/null 2>&1 || true
}
check_dmesg() {
	dmesg -r >/tmp/dmesg.out 2>&1
	grep -e 'hrtimer: interrupt took' -e 'clocksource:' /tmp/dmesg.out |
		sed 's/^/DMESG (the host is loaded) /'
	bad=$({ grep -v -e 'hrtimer: interrupt took' -e 'clocksource:' /tmp/dmesg.out |
			grep -i -e vsock -e virtio -e '^<[0-4]>'
		grep '^<[0-4]>' /tmp/boot-dmesg.out | grep -i -e vsock -e virtio; } | head -n 5)
	if [ -z "$bad" ]; then pass dmesg
	else
		echo "$bad" | sed 's/^/DMESG /'
		fail dmesg "the kernel logged: $(echo "$bad" | head -n 1)"
	fi
}
