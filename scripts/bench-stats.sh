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
