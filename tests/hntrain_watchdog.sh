#!/usr/bin/env bash
# hntrain_watchdog.sh - hntrain's data watchdog over a spritefs mount.
# The daemon stopped (SIGSTOP) mid-run: hntrain exits non-zero within the
# watchdog's time (HNTRAIN_DATA_TIMEOUT=2 here), naming the mount and the
# daemon's pid; the daemon, continued, still serves and unmounts. The
# daemon killed mid-run: hntrain says it is gone and how to recover
# (fusermount3 -u, mount again), and does not fall back to gathering. Two
# ranks over a stopped daemon end after HNTRAIN_DIST_TIMEOUT (3 s here).
source "$(dirname "$0")/hntrain_common.sh"
if [[ -z ${SPRITEFS:-} ]]; then
	echo "SKIP: spritefs not built"
	exit 77
fi
if [[ ! -c /dev/fuse ]] || ! command -v fusermount3 >/dev/null; then
	echo "SKIP: no /dev/fuse or fusermount3"
	exit 77
fi
# a stopped daemon is continued in every path, so that cleanup can end it
trap 'for p in "${HN_PIDS[@]}"; do kill -CONT "$p" 2>/dev/null; done; hn_cleanup' EXIT

"$MKSTORE" "$TMP/s.sprites" --count-train 20000 --count-test 500 --sheet 256 >/dev/null ||
	fail "mkstore"
# views of batch 32: every training batch is an O_DIRECT read of a view file,
# which the daemon serves (the page cache cannot answer for it)
run=(--data "$TMP/mnt" --model mlp --batch 32 --epochs 500 --seed 1 --threads 1)

# started HNTRAIN_PID: a run that has read some training batches
start_run() {
	"$HNTRAIN" "${run[@]}" >"$TMP/out" 2>"$TMP/err" &
	HNTRAIN_PID=$!
	local before
	before=$(stat_field "$TMP/mnt" bytes_served)
	for _ in $(seq 100); do
		sleep 0.1
		kill -0 "$HNTRAIN_PID" 2>/dev/null || { cat "$TMP/err" >&2; fail "hntrain ended early"; }
		[[ $(stat_field "$TMP/mnt" bytes_served) -gt $((before + (4 << 20))) ]] && return 0
	done
	fail "hntrain read no views in 10 s"
}

# said_within SECONDS PATTERN: wait (from t0) until $TMP/err matches; prints the seconds taken
said_within() {
	local now
	while :; do
		now=$(echo "$(date +%s.%N) - $t0" | bc)
		grep -q -- "$2" "$TMP/err" && { echo "$now"; return 0; }
		(($(echo "$now > $1" | bc))) && return 1
		sleep 0.05
	done
}

# ---- a stopped daemon --------------------------------------------------
# The message comes within the watchdog's time. A read the daemon has
# already taken cannot be abandoned (the kernel waits for its answer even
# through SIGKILL), so hntrain may only end once the daemon is continued.
mount_store "$TMP/s.sprites" "$TMP/mnt" -o batch=32
DPID=${HN_PIDS[-1]}
export HNTRAIN_DATA_TIMEOUT=2
start_run
kill -STOP "$DPID"
t0=$(date +%s.%N)
took=$(said_within 20 "no data for [0-9]* s") || { kill -CONT "$DPID"; cat "$TMP/err" >&2; fail "no watchdog message in 20 s"; }
kill -CONT "$DPID"
rc=0
timeout 60 tail --pid="$HNTRAIN_PID" -f /dev/null || true
wait "$HNTRAIN_PID" || rc=$?
echo "stopped daemon: said after $took s, hntrain exit $rc: $(grep -m1 'no data' "$TMP/err")"
[[ $rc -ne 0 && $rc -lt 128 ]] || { cat "$TMP/err" >&2; fail "hntrain exit $rc, not an error"; }
(($(echo "$took < 5" | bc))) || fail "hntrain took $took s to say so (watchdog 2 s)"
grep -q "serving $TMP/mnt (pid $DPID)" "$TMP/err" || fail "the message does not name the mount and pid"
# continued, the daemon serves and unmounts cleanly
cmp -s <(head -c 1000 "$TMP/mnt/train/images.npy") <(head -c 1000 "$TMP/mnt/train/images.npy") ||
	fail "the continued daemon does not serve"
fusermount3 -u "$TMP/mnt" || fail "unmount after SIGCONT"
wait "$DPID" || fail "the daemon exited non-zero after SIGCONT and unmount"

# ---- two ranks: HNTRAIN_DIST_TIMEOUT bounds their reads too ---------------
if command -v mpirun >/dev/null && "$HNTRAIN" -V | grep -q "^ranks: MPI"; then
	source "$(dirname "$0")/mpi_env.sh"
	mount_store "$TMP/s.sprites" "$TMP/mnt" -o batch=32
	DPID=${HN_PIDS[-1]}
	before=$(stat_field "$TMP/mnt" bytes_served)
	HNTRAIN_DATA_TIMEOUT=1000 HNTRAIN_DIST_TIMEOUT=3 timeout 120 "${MPIRUN[@]}" -np 2 \
		"$HNTRAIN" "${run[@]}" >"$TMP/out" 2>"$TMP/err" &
	MPI_PID=$!
	for _ in $(seq 300); do
		sleep 0.1
		[[ $(stat_field "$TMP/mnt" bytes_served) -gt $((before + (4 << 20))) ]] && break
	done
	kill -STOP "$DPID"
	t0=$(date +%s.%N)
	took=$(said_within 30 "limit 3 s: HNTRAIN_DIST_TIMEOUT") ||
		{ kill -CONT "$DPID"; cat "$TMP/err" >&2; fail "no rank named the limit in 30 s"; }
	kill -CONT "$DPID"
	rc=0
	wait "$MPI_PID" || rc=$?
	echo "2 ranks, stopped daemon: said after $took s, mpirun exit $rc: $(grep -m1 'no data' "$TMP/err")"
	[[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$TMP/err" >&2; fail "mpirun exit $rc"; }
	(($(echo "$took < 8" | bc))) || fail "2 ranks took $took s to say so (HNTRAIN_DIST_TIMEOUT=3)"
	fusermount3 -u "$TMP/mnt" || fail "unmount after SIGCONT"
	wait "$DPID" || fail "the daemon exited non-zero after SIGCONT and unmount"
else
	echo "no mpirun, or hntrain built without MPI: the two-rank case is not run"
fi

# ---- a daemon that is gone -------------------------------------------------
unset HNTRAIN_DATA_TIMEOUT
mount_store "$TMP/s.sprites" "$TMP/mnt" -o batch=32
DPID=${HN_PIDS[-1]}
start_run
kill -KILL "$DPID"
rc=0
timeout 60 tail --pid="$HNTRAIN_PID" -f /dev/null || true
wait "$HNTRAIN_PID" || rc=$?
echo "killed daemon: hntrain exit $rc: $(grep -m1 'gone' "$TMP/err")"
[[ $rc -ne 0 && $rc -lt 128 ]] || { cat "$TMP/err" >&2; fail "hntrain exit $rc, not an error"; }
grep -q "the spritefs daemon serving $TMP/mnt is gone" "$TMP/err" ||
	{ cat "$TMP/err" >&2; fail "no 'gone' message"; }
grep -q "fusermount3 -u $TMP/mnt\`, then mount again" "$TMP/err" || fail "no way out named"
grep -qi "gathering" "$TMP/err" && fail "fell back to gathering"
fusermount3 -u "$TMP/mnt" || fail "unmount of the dead mount"
echo PASS
