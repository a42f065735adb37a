#!/usr/bin/env bash
# help_texts.sh - the option lists agree with the programs: every -o option in `spritefs -h`
# is in mount/fstab.example and in docs/FORMAT.md's table of options; `spritefs-bench --help`
# shows every option it lists in its synopsis and names every environment variable the
# program reads.
#   usage: help_texts.sh SPRITEFS BENCH_SCRIPT SOURCE_ROOT
set -uo pipefail
SPRITEFS=${1:?spritefs} BENCH=${2:?bench script} SRC=${3:?source root}
bad=0
fail() {
	echo "FAIL: $*"
	bad=1
}

opts=$("$SPRITEFS" -h | sed -n 's/^ *-o \([a-z_]*\)=.*/\1/p')
[[ $(wc -w <<<"$opts") -ge 10 ]] || fail "spritefs -h lists only: $opts"
fstab=$(sed -n '/^# Our options:/,/^# mount is always/p' "$SRC/mount/fstab.example")
for o in $opts; do
	grep -q "\b$o=" <<<"$fstab" || fail "mount/fstab.example does not list $o="
	grep -q "^| \`$o=" "$SRC/docs/FORMAT.md" || fail "docs/FORMAT.md's options table has no $o="
done
echo "spritefs -o options: $(echo $opts)"

help=$("$BENCH" --help) || fail "spritefs-bench --help exited non-zero"
synopsis=$(sed -n '1,/^  --/p' <<<"$help" | sed '$d')
for o in $(grep -oE '^  --[a-z-]+' <<<"$help"); do
	grep -q -- "\[$o\b" <<<"$synopsis" || fail "spritefs-bench --help: $o is not in the synopsis"
done
# the variables the bench reads: quoted names in its package (os.environ, the program table)
PKG=$(dirname "$BENCH")/sfsbench
vars=$(grep -ohE '"(SPRITEFS_[A-Z_]+|SPRITEFS|HNTRAIN|DEMO_[A-Z_]+)"' "$PKG"/*.py | tr -d '"' | sort -u)
[[ -n $vars ]] || fail "no environment variables found in $PKG"
for v in $vars; do
	grep -qE "(^|[ ,\$])$v([=,.)]|$| )" <<<"$help" || fail "spritefs-bench --help does not name \$$v"
done
echo "spritefs-bench environment: $(echo $vars)"
grep -q '^exit status' <<<"$help" || fail "spritefs-bench --help gives no exit status"
((bad)) && exit 1
echo PASS
