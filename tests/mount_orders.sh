#!/usr/bin/env bash
# mount_orders.sh - the epoch orders' memory is bounded whatever a store
# declares, and readers beyond the order slots wait instead of failing.
#
# 1. A sparse store declaring 2^32-1 samples (mkhostile: 3 MB on disk) is
#    refused at mount, under a memory limit of 4x the budget (a memory
#    cgroup, else RLIMIT_AS), with the budget that would do; the daemon is
#    not killed and leaves no mount.
# 2. A store that needs a given -o orders= mounts with it and says how many
#    orders it keeps.
# 3. 8 then 48 concurrent readers with distinct seeds (mount_check --only
#    epochs --direct: every byte of their views against the store's order)
#    over a mount that keeps 2 orders, under the same kind of limit: no
#    EBUSY, every byte right, the waits counted in stats.json, no refusal,
#    RSS within the limit.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

CG=""
limit_cleanup() {
	cleanup
	[[ -n $CG && -d $CG ]] && rmdir "$CG" 2>/dev/null
	true
}
trap limit_cleanup EXIT

# A memory cgroup (v2, else v1) for the daemon; sets CG, or leaves it empty.
make_cgroup() { # BYTES
	local d
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]] &&
		grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
		d=/sys/fs/cgroup/sfs-orders-$$
		mkdir "$d" 2>/dev/null && echo "$1" >"$d/memory.max" 2>/dev/null &&
			echo 0 >"$d/memory.swap.max" 2>/dev/null
	elif [[ -d /sys/fs/cgroup/memory ]]; then
		d=/sys/fs/cgroup/memory/sfs-orders-$$
		mkdir "$d" 2>/dev/null && echo "$1" >"$d/memory.limit_in_bytes" 2>/dev/null
	fi
	if [[ -n ${d:-} && -d $d ]]; then
		CG=$d
	fi
}

# limited LOG SOURCE MNT LIMIT [args]: spritefs -f in the cgroup, or under
# RLIMIT_AS; within $TMO (a timeout command) when set.
limited() {
	local log=$1 src=$2 mnt=$3 lim=$4
	shift 4
	if [[ -n $CG ]]; then
		bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$CG" \
			${TMO:-} "$SPRITEFS" -f "$@" "$src" "$mnt" >"$log" 2>&1
	else
		${TMO:-} prlimit --as="$lim" "$SPRITEFS" -f "$@" "$src" "$mnt" >"$log" 2>&1
	fi
}

oom_kills() {
	if [[ -z $CG ]]; then
		echo 0
	elif [[ -f $CG/memory.events ]]; then
		awk '$1 == "oom_kill" {print $2}' "$CG/memory.events"
	else
		awk '$1 == "oom_kill" {print $2} END {}' "$CG/memory.oom_control" | grep . || echo 0
	fi
}

# ---- 1. the hostile store, refused under a limit of 4x the budget --------
"$MKHOSTILE" "$T/hostile.sprites" >"$T/mkhostile.log" 2>&1 || fail "mkhostile"
echo "hostile store: $(du -k "$T/hostile.sprites" | cut -f1) KiB on disk, 2^32-1 samples"
budget=$(((64 + 64) << 20)) # cache + orders
make_cgroup $((4 * budget))
echo "memory limit: $((4 * budget >> 20)) MiB ($([[ -n $CG ]] && echo "cgroup $CG" || echo RLIMIT_AS))"
mkdir -p "$T/mnt"
MOUNTS+=("$T/mnt")
for opts in cache=64M,orders=64M cache=64M; do
	rc=0
	TMO="timeout 60" limited "$T/hostile.log" "$T/hostile.sprites" "$T/mnt" $((4 * budget)) \
		-o "$opts" || rc=$?
	[[ $rc -ne 124 ]] || fail "-o $opts: the hostile store was mounted (timed out)"
	[[ $rc -ne 137 && $rc -ne 139 ]] || fail "-o $opts: the daemon was killed (status $rc)"
	[[ $rc -eq 2 ]] || fail "-o $opts: exit $rc, not 2: $(cat "$T/hostile.log")"
	grep -q "4294967295 samples" "$T/hostile.log" || fail "-o $opts: message lacks the count"
	grep -q "orders=" "$T/hostile.log" || fail "-o $opts: message does not name -o orders="
	grep -q "serves splits of up to about [0-9]" "$T/hostile.log" ||
		fail "-o $opts: message lacks the samples that would work"
	is_mounted "$T/mnt" && fail "-o $opts: left a mount"
	echo "-o $opts: refused: $(tail -1 "$T/hostile.log")"
done
[[ $(oom_kills) -eq 0 ]] || fail "the memory cgroup saw an OOM kill"

# ---- 2. the budget a store needs: the number said is the number that works --
"$MKHOSTILE" "$T/mid.sprites" 300000 >>"$T/mkhostile.log" 2>&1 || fail "mkhostile 300000"
rc=0
timeout 60 "$SPRITEFS" -f -o orders=2M "$T/mid.sprites" "$T/mnt" >"$T/mid.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "300,000 samples in -o orders=2M: exit $rc, not 2"
want=$(grep -o 'orders=[0-9]*M or more' "$T/mid.log" | grep -o '[0-9]*M') ||
	fail "no budget named: $(cat "$T/mid.log")"
sfs_mount "$T/mid2.log" "$T/mid.sprites" "$T/mnt" -o orders="$want"
grep -q "epoch orders: 1 kept at once" "$T/mid2.log" || fail "orders=$want: $(cat "$T/mid2.log")"
sfs_umount "$T/mnt"
echo "300,000 samples: refused in 2M, mounts in the $want it names"

# ---- 3. readers beyond the order slots wait -------------------------------
# 100,000 samples: an order and its plan take about 1.2 MB, so orders=3M keeps 2
"$MKSTORE" "$T/s.sprites" --count-train 100000 --count-test 10 --tile 4x4x1 --sheet 1000 \
	>"$T/mkstore.log" 2>&1 || fail "mkstore"
mkdir -p "$T/mnt2"
MOUNTS+=("$T/mnt2")
limited "$T/spritefs.log" "$T/s.sprites" "$T/mnt2" $((4 * budget)) \
	-o cache=32M,orders=3M,batch=4096,workers=2 &
SFS_PID=$!
PIDS+=("$SFS_PID")
for _ in $(seq 200); do
	is_mounted "$T/mnt2" && break
	kill -0 "$SFS_PID" 2>/dev/null || fail "spritefs exited: $(cat "$T/spritefs.log")"
	sleep 0.05
done
is_mounted "$T/mnt2" || fail "timed out mounting"
grep -q "epoch orders: 2 kept at once" "$T/spritefs.log" || fail "not 2 orders: $(cat "$T/spritefs.log")"
for n in 8 48; do
	pids=()
	for k in $(seq "$n"); do
		"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt2" --direct --only epochs --epochs 1 \
			--seed $((1000 * n + k)) >"$T/check$k.log" 2>&1 &
		pids+=($!)
	done
	bad=0
	for k in "${!pids[@]}"; do
		if ! wait "${pids[$k]}"; then
			echo "reader $k: $(tail -3 "$T/check$((k + 1)).log")" >&2
			bad=1
		fi
	done
	[[ $bad -eq 0 ]] || fail "$n readers: a reader failed (EBUSY or wrong bytes)"
	kill -0 "$SFS_PID" || fail "$n readers: the daemon died"
	waits=$(stat_field "$T/mnt2" order_waits)
	refused=$(stat_field "$T/mnt2" order_refusals)
	held=$(stat_field "$T/mnt2" orders_bytes)
	rss=$(stat_field "$T/mnt2" rss)
	echo "$n readers, distinct seeds, 2 order slots: all exact; waits $waits, refusals" \
		"$refused, orders $((held >> 10)) KiB, RSS $((rss >> 20)) MiB"
	[[ $refused -eq 0 ]] || fail "$n readers: $refused refusals (EBUSY)"
	[[ $held -gt 0 && $held -le $((3 << 20)) ]] || fail "orders hold $held bytes, -o orders=3M"
	[[ $rss -le $((4 * budget)) ]] || fail "RSS $rss over the limit"
done
[[ $waits -gt 0 ]] || fail "no reader waited: the test did not exercise the slots"
[[ $(oom_kills) -eq 0 ]] || fail "the memory cgroup saw an OOM kill"
fusermount3 -u "$T/mnt2" || fail "unmount"
wait "$SFS_PID" || fail "spritefs exited non-zero after unmount"
echo PASS
