# bench_lib.sh - sourced by the tests that run spritefs-bench end to end
# (bench_quick.sh, bench_larger.sh): a scratch folder $OUT, and on every
# exit path the bench run $BPID (set it once started) stopped, its mounts
# taken down and its folders removed.
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
