# The figures every bench script prints, sourced by scripts/bench*.sh:
# medians of interleaved runs and their ratios. A run that failed is
# recorded as "-" and left out.

median() {
	sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'
}

# The median of a space-separated list, dashes (failed runs) left out.
list_median() {
	tr ' ' '\n' <<<"$1" | grep . | grep -vx -- - | median || true
}

# The value of name=... in a line of key=value fields (the tools' output).
field() { # name line: the value of name=... in line
	awk -v k="$1=" '{for (i = 1; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1)}' <<<"$2"
}

ratio() { # a b: a/b to two places, or - when either is missing
	awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'
}

# A process's CPU time so far (user + system), in clock ticks; - if gone.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo -; }

# How often a process's threads went to sleep so far (voluntary context
# switches, summed over its threads: each is a wake-up to come); - if gone.
wakeups() {
	cat /proc/"$1"/task/*/status 2>/dev/null |
		awk '/^voluntary_ctxt_switches/ {s += $2; n++} END {if (n) print s; else print "-"}'
}

# Events a to b per MiB of bytes, to one place; - when a figure is missing.
per_mib() { # a b bytes [decimals, default 1]
	if [ "$1" = - ] || [ "$2" = - ] || [ -z "$3" ]; then
		echo -
		return
	fi
	awk -v n=$(($2 - $1)) -v b="$3" -v d="${4:-1}" 'BEGIN {printf "%.*f", d, n / (b / 1048576)}'
}

# CPU seconds per GiB: ticks a to b for bytes; - when a figure is missing.
s_per_gib() { # ticks_a ticks_b bytes
	if [ "$1" = - ] || [ "$2" = - ] || [ -z "$3" ]; then
		echo -
		return
	fi
	awk -v t=$(($2 - $1)) -v hz="$(getconf CLK_TCK)" -v b="$3" \
		'BEGIN {printf "%.3f", t / hz / (b / 1073741824)}'
}
