# shellcheck shell=bash
# Boots a root's systemd with systemd-nspawn and runs commands in it, on a
# host whose PID 1 need not be systemd: the container is not registered
# with machined (--register=no) and stays in the caller's cgroup
# (--keep-unit); commands enter it with nsenter. Sourced, not run.
#
#   container_boot ROOT LOG   boot ROOT (a directory), its console into LOG;
#                             returns once its systemd answers, or fails
#   container_wait_booted S   wait up to S seconds for the boot to finish
#                             (systemctl is-system-running --wait); prints
#                             the state, fails unless it is running
#   container_run CMD...      run CMD in the container as root, with a clean
#                             environment; its status is returned
#   container_poweroff S      power it off, waiting up to S seconds, then
#                             kill it; fails if it had to be killed
#
# The container has a network namespace of its own (loopback only), and
# the capabilities and system calls that vmio's TAP, AF_XDP and sockmap
# need beyond nspawn's defaults. nspawn shows only part of /sys; DPDK's
# EAL refuses to start without /sys/module (it looks for vfio there), so
# the host's is there, read-only.

container_nspawn= # systemd-nspawn's PID
container_leader= # the container's PID 1, as the host sees it

container_boot() { # root log
	local root=$1 log=$2 i pid
	systemd-nspawn --quiet --directory="$root" --boot \
		--register=no --keep-unit --link-journal=no \
		--machine=vmio-system --private-network \
		--capability=CAP_NET_ADMIN,CAP_BPF,CAP_IPC_LOCK \
		--system-call-filter='bpf perf_event_open' --bind-ro=/sys/module \
		--console=read-only </dev/null >"$log" 2>&1 &
	container_nspawn=$!
	container_leader=
	# nspawn is the subreaper of the container's PID 1: the child of it
	# that is PID 1 in a namespace of its own. Then systemd's private
	# socket is what systemctl talks to.
	for ((i = 0; i < 300; i++)); do
		kill -0 "$container_nspawn" 2>/dev/null || {
			echo "container: systemd-nspawn exited: $(tail -n 20 "$log")" >&2
			return 1
		}
		if [[ -z $container_leader ]]; then
			for pid in $(pgrep -P "$container_nspawn"); do
				grep -qE '^NSpid:.*[[:space:]]1$' "/proc/$pid/status" 2>/dev/null &&
					container_leader=$pid
			done
		fi
		if [[ -n $container_leader ]] && container_run test -S /run/systemd/private 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "container: no systemd answering in $root after 30 s: $(tail -n 20 "$log")" >&2
	return 1
}

container_run() { # command...
	nsenter --target "$container_leader" --all --root --wd \
		env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		LANG=C.UTF-8 HOME=/root TERM=dumb "$@"
}

container_wait_booted() { # seconds
	local state
	state=$(container_run timeout "$1" systemctl is-system-running --wait)
	echo "$state"
	[[ $state == running ]]
}

container_poweroff() { # seconds
	local i
	[[ -n $container_nspawn ]] || return 0
	container_run systemctl --no-block poweroff >/dev/null 2>&1 || true
	for ((i = 0; i < $1 * 10; i++)); do
		kill -0 "$container_nspawn" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$container_nspawn" 2>/dev/null; then
		kill -KILL "$container_nspawn" 2>/dev/null
		wait "$container_nspawn" 2>/dev/null
		container_nspawn=
		echo "container: not powered off after $1 s: killed" >&2
		return 1
	fi
	wait "$container_nspawn" 2>/dev/null
	container_nspawn=
}
