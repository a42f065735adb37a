#!/usr/bin/env bash
# order_time.sh - how long spritefs takes to build one epoch order, and what
# else waits meanwhile (docs/ARCHITECTURE.md, "Order builders").
#
#   bench/order_time.sh SPRITEFS MKHOSTILE SAMPLES...
#
# For each SAMPLES: a sparse store of that many 1x1x1 samples (tests/mkhostile;
# its sheets are holes, so every view read ends in EIO, after its order is
# built), mounted with -o orders= for two orders. Prints the first read of
# seed 5's view (the order's build), the same read again (built), and, while
# seed 6's order is being built, the time of a dataset.json read and of seed
# 7's first read (another order: built beside seed 6's, or after it when
# builds queue). Times in seconds, from date +%s%N around each command.
set -u
[[ $# -ge 3 ]] || { echo "usage: order_time.sh SPRITEFS MKHOSTILE SAMPLES..." >&2; exit 2; }
SPRITEFS=$1 MKHOSTILE=$2
shift 2
T=$(mktemp -d "${TMPDIR:-/tmp}/order-time.XXXXXX")
PID=""
cleanup() {
	grep -qs " $T/mnt " /proc/mounts && fusermount3 -u "$T/mnt"
	[[ -n $PID ]] && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
now() { date +%s%N; }
secs() { echo "scale=3; ($2 - $1) / 1000000000" | bc; }
first() { # SEED: the path of batch 0 of its epoch 0
	local d="$T/mnt/train/epochs/$1/0"
	echo "$d/$(ls "$d" | head -1)"
}
mkdir -p "$T/mnt"
printf "%12s %10s %10s %14s %14s\n" samples build again dataset.json other-seed
for n in "$@"; do
	"$MKHOSTILE" "$T/s.sprites" "$n" >/dev/null || exit 1
	mib=$(((2 * 12 * n >> 20) + 4))
	"$SPRITEFS" -f -o orders=${mib}M,cache=64M "$T/s.sprites" "$T/mnt" >"$T/log" 2>&1 &
	PID=$!
	for _ in $(seq 100); do grep -qs " $T/mnt " /proc/mounts && break; sleep 0.1; done
	f5=$(first 5) f6=$(first 6) f7=$(first 7)
	t0=$(now); head -c 1 "$f5" >/dev/null 2>&1; t1=$(now)
	head -c 1 "$f5" >/dev/null 2>&1; t2=$(now)
	(head -c 1 "$f6" >/dev/null 2>&1) &
	bg=$!
	sleep 0.05
	t3=$(now); cat "$T/mnt/dataset.json" >/dev/null; t4=$(now)
	head -c 1 "$f7" >/dev/null 2>&1; t5=$(now)
	wait "$bg"
	printf "%12s %10s %10s %14s %14s\n" "$n" "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")" \
		"$(secs "$t3" "$t4")" "$(secs "$t4" "$t5")"
	fusermount3 -u "$T/mnt"
	wait "$PID"
	PID=""
done
