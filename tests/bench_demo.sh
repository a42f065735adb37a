#!/usr/bin/env bash
# bench_demo.sh - README's first command past its install step: `spritefs-bench demo` (what
# `./run demo` runs) with one epoch and without its --quick comparison (bench_quick runs that):
# the default data set mounts, the look at the mount prints dataset.json and numpy's view, hntrain
# trains through it with an epoch row (compute, data wait, test accuracy above chance) and the
# weights hash, stats.json is shown, and the mount is gone afterwards.
#   usage: bench_demo.sh BENCH_SCRIPT BUILD_DIR
set -uo pipefail
BENCH=${1:?bench script}
export SPRITEFS_BUILD=${2:?build dir}

[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (the default data set's cache store)"; exit 77; }
[[ -e /dev/fuse ]] || { echo "SKIP: no /dev/fuse"; exit 77; }
[[ -d /usr/share/datasets/fashion-mnist ]] || { echo "SKIP: no Fashion-MNIST (dataset-fashion-mnist)"; exit 77; }

OUT=$(mktemp -d /tmp/bench_demo.XXXXXX)
trap 'grep -o "/tmp/spritefs-demo\.[^ ]*" /proc/mounts | while read -r m; do fusermount3 -u "$m" 2>/dev/null; done; rm -rf "$OUT"' EXIT
fail() {
	echo "FAIL: $*"
	tail -30 "$OUT/demo.log"
	exit 1
}
before=$(grep -c "spritefs-demo\." /proc/mounts)
DEMO_EPOCHS=1 DEMO_SKIP_BENCH=1 timeout 600 "$BENCH" demo >"$OUT/demo.log" 2>&1 || fail "demo exited $?"
grep -q '"splits"' "$OUT/demo.log" || fail "no dataset.json shown"
grep -q "^images (60000, 28, 28) uint8 labels (60000,)" "$OUT/demo.log" || fail "no numpy view of train/images.npy"
row=$(grep -E '^ +1 \| ' "$OUT/demo.log") || fail "no epoch row"
acc=$(awk -F'|' '{gsub(/[ %]/, "", $6); print $6}' <<<"$row")
awk -v a="$acc" 'BEGIN { exit !(a > 50) }' || fail "test accuracy $acc% after an epoch of the CNN"
grep -qE "^final weights xxh3: [0-9a-f]{16}$" "$OUT/demo.log" || fail "no weights hash"
grep -q '"cache_budget"' "$OUT/demo.log" || fail "stats.json not shown"
after=$(grep -c "spritefs-demo\." /proc/mounts)
((after == before)) || fail "the demo left its mount behind"
echo "demo: epoch row '$row'"
echo PASS
