#!/usr/bin/env bash
# hntrain_emulate - hntrain --emulate: emulated accelerators (MLPerf Storage's
# method). Data always ready: AU is compute / (wall - first step) from the
# log's own numbers, above 90%, and the epoch lasts steps x compute time (the
# sleeps go to absolute deadlines, so nothing adds up). A real slow medium
# (the store read under a cgroup's block-device read limit, its pages
# evicted): AU falls below 90%, near the compute time over the time the
# limit lets the store be read in. A profile of the table (cosmoflow-h100:
# batch 1, 3.5 ms, AU 70% to pass) as the log records it. Bad input: an
# unknown profile, a compute time <= 0, a batch that does not split over the
# ranks, --batch against a profile's, model options; each named with what
# would work. The two-rank part (disjoint shares whose union is each epoch)
# is in hntrain_mpi_emulate.sh.
source "$(dirname "$0")/hntrain_common.sh"

"$MKSTORE" "$TMP/s.sprites" --count-train 2000 --count-test 0 --tile 28x28x1 --classes 4 \
	--sheet 100 >/dev/null || fail "mkstore"

# --- bad input ---------------------------------------------------------------
expect_fail "--emulate resnet51-h100: unknown profile; expected one of resnet50-h100.*BATCH:SECONDS" \
	--data "$TMP/s.sprites" --emulate resnet51-h100
expect_fail "--emulate 100:0: the compute time after ':' must be .*above 0" \
	--data "$TMP/s.sprites" --emulate 100:0
expect_fail "--emulate 100:-0.5: the compute time after ':' must be" \
	--data "$TMP/s.sprites" --emulate 100:-0.5
expect_fail "--emulate 0:0.1: the batch before ':' must be an integer in \[1, 65536\]" \
	--data "$TMP/s.sprites" --emulate 0:0.1
expect_fail "--emulate resnet50-h100 with 1 accelerator: a global batch of 400 .*does not split over the ranks: the training split has 300.*mpirun -np" \
	--data "$TMP/s.sprites" --emulate resnet50-h100 --limit 300
expect_fail "--batch 64 with --emulate resnet50-h100: the profile's batch is 400.*--emulate 64:SECONDS" \
	--data "$TMP/s.sprites" --emulate resnet50-h100 --batch 64
expect_fail "--model does not apply with --emulate 100:0.1" \
	--data "$TMP/s.sprites" --emulate 100:0.1 --model mlp
expect_fail "--resume does not apply with --emulate" \
	--data "$TMP/s.sprites" --emulate 100:0.1 --resume "$TMP/none.ckpt"

# au_check LOG MIN MAX: the final record's AU in [MIN, MAX], and the arithmetic of each epoch
au_check() {
	/usr/bin/python3 - "$@" <<'PY' || fail "AU check of $1"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
lo, hi = float(sys.argv[2]), float(sys.argv[3])
epochs, final = recs[:-1], recs[-1]
assert final["final"] and final["emulate"] == "100:0.05", final
assert final["au_min"] == 0.9 and final["accelerators"] == 1, final
for e in epochs:
    r, = e["ranks"]
    c = e["compute_per_batch_s"]
    assert e["steps"] == 20 and r["samples"] == 2000, e
    # every step a full batch: 20 x 0.05 s of compute
    assert abs(r["compute_s"] - 20 * c) < 1e-9, e
    # MLPerf Storage's AU: the first step's load and compute left out of both
    au = (r["compute_s"] - c) / (r["wall_s"] - r["first_step_s"])
    assert abs(au - r["au"]) < 1e-4 and abs(e["au"] - r["au"]) < 1e-9, (au, e)
    assert r["data_wait_s"] + r["compute_s"] <= r["wall_s"] + 1e-3, e
    assert abs(e["samples_per_s"] - 2000 / e["wall_s"]) < 0.01 * e["samples_per_s"], e
    assert abs(e["mb_per_s"] - e["samples_per_s"] * 784 / 1e6) < 1e-3 * e["mb_per_s"], e
    assert e["au_pass"] == (e["au"] >= 0.9), e
mean = sum(e["au"] for e in epochs) / len(epochs)
assert abs(final["au"] - mean) < 1e-6 and final["au_epochs"] == [e["au"] for e in epochs], final
assert final["au_pass"] == (final["au"] >= 0.9), final
print(f"{sys.argv[1].rsplit('/', 1)[-1]}: AU {final['au']:.3f} (expected {lo}..{hi}), "
      f"{final['samples_per_s']:.0f} samples/s, data wait {final['data_wait_s']:.3f} s, "
      f"wall {final['wall_s']:.2f} s")
assert lo <= final["au"] <= hi, f"AU {final['au']} not in [{lo}, {hi}]"
PY
}

# --- data always ready: AU near 1, the epoch lasts its compute time ------------
"$HNTRAIN" --data "$TMP/s.sprites" --emulate 100:0.05 --epochs 2 --log "$TMP/fast.jsonl" \
	>"$TMP/fast.out" 2>&1 || { cat "$TMP/fast.out"; fail "emulate over the store exited $?"; }
grep -q "^emulated 1 x 100:0.05: AU .*PASS (>= 90%)" "$TMP/fast.out" ||
	{ cat "$TMP/fast.out"; fail "no PASS summary line"; }
au_check "$TMP/fast.jsonl" 0.9 1.0
# DLIO's reader defaults (read_threads 1, prefetch_size 2) unless given
grep -q "^emulate: 1 x 100:0.05, .*; 1 loader, queue 2$" "$TMP/fast.out" ||
	{ cat "$TMP/fast.out"; fail "--emulate does not default to 1 loader, queue 2"; }
grep -q '"loaders": 1, "queue": 2,' "$TMP/fast.jsonl" || fail "the log lacks loaders 1, queue 2"
"$HNTRAIN" --data "$TMP/s.sprites" --emulate 100:0.01 --loaders 2 --queue 8 --limit 1000 \
	>"$TMP/given.out" 2>&1 || { cat "$TMP/given.out"; fail "emulate --loaders 2 exited $?"; }
grep -q "; 2 loaders, queue 8$" "$TMP/given.out" ||
	{ cat "$TMP/given.out"; fail "--loaders 2 --queue 8 not kept with --emulate"; }
# 200 steps of 2 ms a epoch: a sleep for 2 ms at a time wakes at least the timer slack
# (50 us) late each step, 10 ms an epoch or more; to absolute deadlines only the last
# wake-up is late. The best of 3 epochs, so that one late wake-up on a busy machine
# does not decide it.
"$HNTRAIN" --data "$TMP/s.sprites" --emulate 10:0.002 --epochs 3 --quiet \
	--log "$TMP/short.jsonl" >"$TMP/short.out" 2>&1 || { cat "$TMP/short.out"; fail "emulate 10:0.002 exited $?"; }
/usr/bin/python3 - "$TMP/short.jsonl" <<'PY' || fail "the sleeps add up"
import json, sys
eps = [e for e in map(json.loads, open(sys.argv[1])) if "final" not in e]
extra = [e["wall_s"] - e["compute_s"] - e["data_wait_s"] for e in eps]
assert all(e["steps"] == 200 and abs(e["compute_s"] - 0.4) < 1e-9 for e in eps), eps
print("beyond compute + data wait per epoch of 200 steps: "
      + ", ".join(f"{x * 1e3:.2f} ms" for x in extra))
assert all(x >= 0 for x in extra), extra
assert min(extra) < 0.005, f"{min(extra) * 1e3:.1f} ms beyond compute + wait: the sleeps add up"
PY

# --- a profile of the table: its batch, compute time and AU to pass -------------
"$HNTRAIN" --data "$TMP/s.sprites" --emulate cosmoflow-h100 --limit 200 --quiet \
	--log "$TMP/cosmo.jsonl" >"$TMP/cosmo.out" 2>&1 || { cat "$TMP/cosmo.out"; fail "cosmoflow-h100 exited $?"; }
/usr/bin/python3 - "$TMP/cosmo.jsonl" <<'PY' || fail "cosmoflow-h100's log"
import json, sys
e, f = (json.loads(l) for l in open(sys.argv[1]))
assert e["batch"] == 1 and e["steps"] == 200 and e["compute_per_batch_s"] == 0.0035, e
assert f["au_min"] == 0.7 and f["emulate"] == "cosmoflow-h100", f
assert abs(e["compute_s"] - 200 * 0.0035) < 1e-9 and e["wall_s"] >= e["compute_s"], e
print(f"cosmoflow-h100: 200 steps of 1 sample, AU {f['au']:.3f} (passes at {f['au_min']})")
PY

# --- a slow medium: the store read under a block-device read limit --------------
# cgroup v2 io.max or v1 blkio.throttle.read_bps_device on the disk under $TMP.
need_root_cgroup() {
	[[ $(id -u) -eq 0 ]] || { echo "SKIP (slow medium): a cgroup read limit needs root"; return 1; }
	local src
	src=$(findmnt -no SOURCE -T "$TMP" 2>/dev/null)
	[[ $src == /dev/* && -b $src ]] || { echo "SKIP (slow medium): $TMP is on $src, not a block device"; return 1; }
	local parent
	parent=$(lsblk -no PKNAME "$src" 2>/dev/null | head -n1)
	DEVNUM=$(lsblk -dno MAJ:MIN "${parent:+/dev/$parent}${parent:-$src}" | tr -d ' ')
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw io /sys/fs/cgroup/cgroup.controllers; then
		CG=/sys/fs/cgroup/hntrain-emulate.$$
		mkdir "$CG" 2>/dev/null || { echo "SKIP (slow medium): cannot make a cgroup"; return 1; }
		LIMIT_FILE=$CG/io.max
		LIMIT_FMT="$DEVNUM rbps=%s"
	elif [[ -f /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ]]; then
		CG=/sys/fs/cgroup/blkio/hntrain-emulate.$$
		mkdir "$CG" 2>/dev/null || { echo "SKIP (slow medium): cannot make a cgroup"; return 1; }
		LIMIT_FILE=$CG/blkio.throttle.read_bps_device
		LIMIT_FMT="$DEVNUM %s"
	else
		echo "SKIP (slow medium): no cgroup io controller"
		return 1
	fi
	return 0
}
if need_root_cgroup; then
	trap 'rmdir "$CG" 2>/dev/null; hn_cleanup' EXIT
	# Random tiles barely compress: the store is about its raw size.
	bytes=$(stat -c %s "$TMP/s.sprites")
	rate=$((bytes / 4)) # the whole store in about 4 s; 20 x 0.05 s of compute in 1 s
	# shellcheck disable=SC2059
	printf "$LIMIT_FMT\n" "$rate" >"$LIMIT_FILE" || fail "cannot set $LIMIT_FILE"
	sync "$TMP/s.sprites"
	dd if="$TMP/s.sprites" iflag=nocache count=0 status=none || fail "cannot evict the store"
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG" \
		"$HNTRAIN" --data "$TMP/s.sprites" --emulate 100:0.05 --loaders 1 --window 1 \
		--log "$TMP/slow.jsonl" >"$TMP/slow.out" 2>&1 ||
		{ cat "$TMP/slow.out"; fail "emulate under the read limit exited $?"; }
	grep -q "^emulated 1 x 100:0.05: AU .*FAIL (>= 90%)" "$TMP/slow.out" ||
		{ cat "$TMP/slow.out"; fail "a slow medium should FAIL the AU"; }
	# The disk is the bottleneck: AU ~ 1 s of compute over the ~4 s the limit
	# takes to read the store (the first step, about 1/20 of it, left out).
	au_check "$TMP/slow.jsonl" 0.15 0.40
	/usr/bin/python3 - "$TMP/slow.jsonl" "$bytes" "$rate" <<'PY' || fail "slow medium timing"
import json, sys
e = json.loads(open(sys.argv[1]).readline())
read_s = int(sys.argv[2]) / int(sys.argv[3])
print(f"store {int(sys.argv[2])} B at {int(sys.argv[3])} B/s: {read_s:.2f} s to read; "
      f"epoch {e['wall_s']:.2f} s, data wait {e['data_wait_s']:.2f} s")
assert 0.8 * read_s <= e["wall_s"] <= 1.5 * read_s + 0.5, "the epoch should last the read"
assert e["data_wait_s"] > 0.5 * (e["wall_s"] - e["compute_s"]), "the time lost is data wait"
PY
	rmdir "$CG" 2>/dev/null
fi
echo "PASS"
