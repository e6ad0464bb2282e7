# shellcheck shell=sh
# The guest half of tests/guest/crash_test.sh (busybox sh, run as /test.sh).
# The host runs `vmio vsock --fd-store` under fdstore-supervisor.py, its
# echo service on <uds-path>_5301 and crash-host.py, which kills vmio.
#   crash-guest  /bin/crash-guest (crash-guest.c): a stream to the host's
#                5301 and an idle connection from the host on 6301, each
#                end of either printed as "CRASH ...-end n=K how=..." for
#                the host, the stream opened again at once; a connection
#                to 6302 ends it. Passes when every answer was right and
#                every reconnection came within its bound.
#   dmesg        no kernel line about vsock or virtio, and none at warning
#                level or worse, since the first connection
# shellcheck source=tests/guest/guest-steps.sh
. /lib/guest-steps.sh
need_vsock
TO=${CRASH_TIMEOUT:-360}

dmesg_mark
/bin/crash-guest 5301 6301 6302 "$TO"
rc=$?
if [ $rc -eq 0 ]; then pass crash-guest
else fail crash-guest "exit $rc"; fi

check_dmesg

echo "crash guest: $fails failed"
exit $fails
