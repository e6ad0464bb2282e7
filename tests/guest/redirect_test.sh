#!/bin/bash
# Guest test of `vmio redirect` with vsock addresses: boots the Debian
# kernel + busybox guest once, its vhost-user-vsock-pci served by
# `vmio vsock --guest-cid 3` here, and runs `vmio redirect` INSIDE the
# guest (with the libraries ldd lists for it), between the guest kernel's
# AF_VSOCK sockets and unix sockets (tests/guest/vsock-tool's unix modes):
#   vmio       the dynamically linked vmio runs in the busybox guest
#   g2h        guest unix client -> UNIX-LISTEN -> VSOCK-CONNECT:2:6000 ->
#              host service: 8 MiB checked byte for byte on the host, then
#              a half-close: the host replies after EOF, the client reads it
#   g2h-rst    VSOCK-CONNECT to a host port nobody listens on: the relay's
#              non-blocking connect fails with ECONNRESET, it exits 1
#   h2g        host CONNECT 5000 (twice at once) -> VSOCK-LISTEN:5000,fork
#              -> guest unix echo server: 8 MiB each way per connection,
#              checked byte for byte on the host; SIGTERM then exits 0
#
# usage: tests/guest/redirect_test.sh [--platform NAME] [--image ROOT] [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
# (defaults: 6.1, build/guest, build/vmio, build/tests/guest/...). Exit 0 when
# every scenario passed; 1 with "redirect_test: FAIL: ..." lines otherwise.
# Logs: ROOT/NAME/logs/redirect_test.*.log (serial console, vmio vsock -v, host
# peers). The set-up and verdicts shared with vsock_test.sh: vsock-host.sh.
set -euo pipefail

name=redirect_test
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
vh_setup "$@"

# --- host service, then the backend, then QEMU ----------------------------
vh_service 6000 --count 1 --mode half-close --expect 8M
vh_start_vmio
vh_boot "$top/tests/guest/redirect-guest.sh" --exe "$vmio:/bin/vmio"

# --- host to guest, once the guest's relay listens ------------------------
ready=
if vh_wait_marker REDIRECT-H2G-READY; then
	ready=1
	# Retry: the backend closes a CONNECT the guest refuses, should the
	# relay's listen() follow the marker by a moment.
	"$peer" connect "$uds" 5000 --count 2 --mode source 8M --expect 8M --echo-check \
		--retry 10 --timeout 100 >"$logs/$name.host-5000.log" 2>&1 || true
else
	bad "the guest never printed REDIRECT-H2G-READY (serial log: $serial)"
fi

# --- verdicts -------------------------------------------------------------
vh_finish_guest
vh_expect_steps vmio g2h g2h-rst h2g
vh_wait_services

# The checksum of the pattern is computed here, independently of both ends.
fnv8=$("$peer" fnv 8M)
g2h_host=$(hl 6000)
[[ $g2h_host == *pattern=ok*result=ok* ]] || bad "g2h: host side: $(tail -n 2 "$logs/$name.host-6000.log")"
[[ $(field recv_fnv "$g2h_host") == "$fnv8" ]] || bad "g2h: host checksum '$(field recv_fnv "$g2h_host")' is not the pattern's $fnv8"
h2g_host=$(hl 5000)
if [[ -n $ready ]]; then
	[[ $h2g_host == *"summary conns=2 ok=2"*result=ok* ]] ||
		bad "h2g: host side: $(tail -n 3 "$logs/$name.host-5000.log")"
fi

# --- report ---------------------------------------------------------------
echo "$name: results (vmio redirect in a TCG guest, one vCPU):"
vh_row "g2h 8M+half-close" "$(grep '^G2H ' <<<"$con" || true)"
vh_row "g2h-rst" "$(grep -q '^STEP g2h-rst PASS' <<<"$con" && echo result=ok)"
vh_row "h2g 2x8M echo" "$h2g_host"
echo "$name: the guest's relays said:"
grep -E '^(G2H-RELAY|G2H-RST-RELAY|H2G-RELAY) ' <<<"$con" | sed 's/^/  /' || true

vh_conclude
