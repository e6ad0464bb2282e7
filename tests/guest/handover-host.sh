# shellcheck shell=bash
# shellcheck disable=SC2154 # client, ctl, start_path: the caller's (below)
# Sourced, after vsock-host.sh, by the guest tests that replace vmio under
# a running guest (handover_test.sh, net_handover_test.sh): what a package
# upgrade does to the path vmio was started from, and how the test tells
# that a reload handed over. The caller sets client (the vmio that runs
# `stats` and `reload`), ctl (vmio's --control socket) and start_path (the
# path vmio is started from), and keeps stale (a count, below) at 0.

# What dpkg does: the new file beside the path, renamed over it.
install_at_start() { # file (mode from it)
	cp -p "$1" "$start_path.dpkg-new"
	mv -f "$start_path.dpkg-new" "$start_path"
}
# The pid that answers --control; empty when none does.
serving_pid() { "$client" stats --json "$ctl" 2>/dev/null | sed -n 's/^{"device":"[a-z]*","pid":\([0-9]*\),.*/\1/p'; }
# A pid that is gone, or a zombie (the first vmio is the test's child).
gone() { [[ ! -e /proc/$1 ]] || [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) == Z ]]; }
# Waits up to $2 s (tenths) for grep -q $1 in log file $3.
wait_log() { # pattern, seconds, file
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		grep -q -e "$1" "$3" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
# After a reload that exited 0. The successor serves --control once the
# reload has answered; an answer from the old pid after that is counted in
# stale (reported), and must stop within 5 s. The successor must run the
# file installed at start_path (its inode), and the old process exit
# within 5 s. Sets new_pid; returns 1 (after bad) when no successor
# answers, the other checks only call bad.
took_over() { # what (for messages), old pid, inode installed
	local what=$1 old=$2 ino=$3
	new_pid=$(serving_pid)
	if [[ $new_pid == "$old" ]]; then
		stale=$((stale + 1))
		for _ in $(seq 50); do
			new_pid=$(serving_pid)
			[[ $new_pid == "$old" ]] || break
			sleep 0.1
		done
	fi
	if [[ -z $new_pid || $new_pid == "$old" ]]; then
		bad "$what exited 0 but the control socket is served by pid '$new_pid' (before: $old)"
		return 1
	fi
	[[ $(stat -Lc %i "/proc/$new_pid/exe" 2>/dev/null) == "$ino" ]] ||
		bad "$what: pid $new_pid does not run the file installed at $start_path"
	for _ in $(seq 50); do gone "$old" && break; sleep 0.1; done
	gone "$old" || bad "$what: the old vmio $old still runs 5 s after its successor $new_pid took over"
	return 0
}
