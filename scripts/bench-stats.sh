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

ratio() { # a b: a/b to two places, or - when either is missing
	awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'
}

# A process's CPU time so far (user + system), in clock ticks; - if gone.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo -; }

# CPU seconds per GiB: ticks a to b for bytes; - when a figure is missing.
s_per_gib() { # ticks_a ticks_b bytes
	if [ "$1" = - ] || [ "$2" = - ] || [ -z "$3" ]; then
		echo -
		return
	fi
	awk -v t=$(($2 - $1)) -v hz="$(getconf CLK_TCK)" -v b="$3" \
		'BEGIN {printf "%.3f", t / hz / (b / 1073741824)}'
}
