#!/usr/bin/env bash
# man_pages.sh - the man pages keep up with --help: every long option
# (--name), every spritefs -o option (-o name=) and every environment
# variable (NAME_WITH_UNDERSCORE) that a program's --help prints appears in
# its man page as man renders it, and man -l renders each page without a
# groff warning (--warnings=w: all of them). Generic, so an option added to
# a --help without its man page fails here. Skips (77) without man-db.
# usage: man_pages.sh SPRITEFS SPRITEFS_PACK HNTRAIN SPRITEFS_BENCH SRCDIR
set -u
spritefs=$1 pack=$2 hntrain=$3 bench=$4 src=$5
command -v man >/dev/null && man --version 2>/dev/null | grep -q "man" ||
	{ echo "SKIP: no man (man-db)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/man-pages.XXXXXX")
trap 'rm -rf "$T"' EXIT
bad=0
fail() { echo "FAIL: $*" >&2; bad=1; }

check() { # PROGRAM PAGE
	local prog=$1 page=$2 name
	name=$(basename "$page" .1)
	"$prog" --help >"$T/$name.help" 2>&1 || fail "$prog --help exited $?"
	[[ -s $T/$name.help ]] || fail "$prog --help printed nothing"
	# rendered wide (no line breaks inside an option), ASCII hyphens
	LC_ALL=C MANWIDTH=250 man --warnings=w -l "$page" >"$T/$name.txt" 2>"$T/$name.warn" ||
		fail "man -l $page exited $?"
	[[ -s $T/$name.warn ]] && fail "man -l $page warns: $(head -3 "$T/$name.warn")"
	[[ $(wc -l <"$T/$name.txt") -gt 30 ]] || fail "$page renders to almost nothing"
	for sec in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" EXAMPLES; do
		grep -q "^$sec" "$T/$name.txt" || fail "$page: no $sec section"
	done
	local n=0 opt was=$bad
	# --long options
	for opt in $(grep -oE -- '(^|[^a-zA-Z0-9-])--[a-z][a-z0-9-]*' "$T/$name.help" |
		sed 's/^[^-]*//' | sort -u); do
		n=$((n + 1))
		grep -qE -- "(^|[^a-zA-Z0-9-])$opt([^a-zA-Z0-9-]|$)" "$T/$name.txt" ||
			fail "$page: $prog --help lists $opt, the man page does not"
	done
	# -o name[=value] options (spritefs)
	for opt in $(grep -oE -- '-o [a-z_]+' "$T/$name.help" | sed 's/^-o //' | sort -u); do
		n=$((n + 1))
		grep -qE -- "(^|[^a-z_])$opt([^a-z_]|$)" "$T/$name.txt" ||
			fail "$page: $prog --help lists -o $opt, the man page does not"
	done
	# environment variables
	for opt in $(grep -oE '\$?\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b' "$T/$name.help" | tr -d '$' | sort -u); do
		n=$((n + 1))
		grep -q -- "$opt" "$T/$name.txt" ||
			fail "$page: $prog --help names $opt, the man page does not"
	done
	((n > 0)) || fail "$prog --help: no option found to check"
	((bad == was)) && echo "$page: $n options and variables of --help present; renders without warnings"
}
check "$spritefs" "$src/fs/spritefs.1"
check "$pack" "$src/pack/spritefs-pack.1"
check "$hntrain" "$src/trainer/hntrain.1"
check "$bench" "$src/bench/spritefs-bench.1"
# every page is installed (meson install_man) from its meson.build
for page in fs/spritefs.1 pack/spritefs-pack.1 trainer/hntrain.1 bench/spritefs-bench.1; do
	grep -q "install_man('$(basename "$page")'\|'$(basename "$page")'" "$src/$(dirname "$page")/meson.build" ||
		fail "$page is not installed by $(dirname "$page")/meson.build"
done
((bad == 0)) || exit 1
echo "PASS"
