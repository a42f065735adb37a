# bench_lib.sh - sourced by the tests that run spritefs-bench end to end
# (bench_quick.sh, bench_larger.sh, bench_accel.sh, bench_data.sh,
# bench_review.sh), with the test's arguments BENCH_SCRIPT BUILD_DIR: it
# skips (77) without root, /dev/fuse, or Debian's python3 with the modules
# in $BENCH_PY_MODULES (set before sourcing), then gives a scratch folder
# $OUT, and on every exit path the bench run $BPID (set it once started)
# stopped, its mounts taken down and its folders removed.
BENCH=${1:?bench script}
export SPRITEFS_BUILD=${2:?build dir}
PY=/usr/bin/python3
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (mounts, drop_caches)"; exit 77; }
[[ -e /dev/fuse ]] || { echo "SKIP: no /dev/fuse"; exit 77; }
for m in ${BENCH_PY_MODULES:-}; do
	[[ -x $PY ]] && $PY -c "import $m" 2>/dev/null || { echo "SKIP: no $PY with $m"; exit 77; }
done
[[ -x $PY ]] || { echo "SKIP: no $PY"; exit 77; }
OUT=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
BPID=""
leftovers() { # mounts or folders the bench run left behind
	[[ -n $BPID ]] || return 0
	grep -F "spritefs-bench.$BPID" /proc/mounts || true
	ls -d "/dev/shm/spritefs-bench.$BPID" "/var/tmp/spritefs-bench.$BPID" 2>/dev/null || true
}
cleanup() {
	local rc=$?
	if [[ -n $BPID ]] && kill -0 "$BPID" 2>/dev/null; then
		kill "$BPID" 2>/dev/null
		wait "$BPID" 2>/dev/null
	fi
	if [[ -n $BPID ]]; then
		grep -F "spritefs-bench.$BPID" /proc/mounts | awk '{print $2}' | while read -r m; do
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
		done
		rm -rf "/dev/shm/spritefs-bench.$BPID" "/var/tmp/spritefs-bench.$BPID"
	fi
	rm -rf "$OUT"
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
	echo "FAIL: $*"
	exit 1
}
