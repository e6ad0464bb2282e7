# shellcheck shell=bash
# What the bench scripts do with the servers they start, sourced by
# scripts/bench*.sh: wait (bounded) for their socket files before anything
# connects, and stop them.

# wait_sockets PID PATH...: returns 0 once every PATH is a socket, 1 if PID
# exits first or 10 s pass (polled every 50 ms: a file appearing is no
# event a shell can wait on).
wait_sockets() {
	local pid=$1 p
	shift
	for _ in $(seq 200); do
		for p; do
			[ -S "$p" ] || break
		done
		# p is the first missing path, or the last one when none is.
		[ -S "$p" ] && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# stop_procs PID...: SIGTERM and reap each; one already gone is no error.
stop_procs() {
	local p
	for p; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}
