#!/usr/bin/env bash
# mount_builders.sh - epoch orders are built by the daemon's builder threads,
# never inside a FUSE request, so that a big order's build holds up nobody
# but its own readers.
#
# A store with a train split of 2^24 samples (1x1x1 tiles: an order and its
# plan take 192 MiB and about half a second to build, several times that
# under the sanitizers) and a small test split. Seed 1's order is built
# first, its read timed: that is the build time B, measured here so the
# bounds below scale with the machine and the sanitizer. Then, while seed
# 2's train order is being built (its first read under way), one process
# reads dataset.json, stats.json, another batch of seed 1 (a built order)
# and seed 3's test view (another order, built by the other builder). Each
# must finish within B/3 and before seed 2's read does; seed 2's read must
# take at least B/2 (its build really overlapped). Then seed 2's view is
# checked byte for byte against the store (mount_check, every 64th batch
# file and the last), stats.json counts no refusal, and the mount unmounts
# cleanly with a build queued by a lookup alone.
source "$(dirname "$0")/mount_lib.sh"
need_fuse
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

N=$((1 << 24))
"$MKSTORE" "$T/s.sprites" --count-train $N --count-test 2000 --tile 1x1x1 --sheet 65536 \
	>"$T/mkstore.log" 2>&1 || fail "mkstore"
sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o batch=65536,orders=1G,cache=256M
grep -q "epoch orders: 5 kept at once" "$T/spritefs.log" ||
	fail "expected 5 order slots: $(cat "$T/spritefs.log")"

"$PY" - "$T/mnt" >"$T/timing.log" 2>&1 <<'EOF' || fail "timing: $(cat "$T/timing.log")"
import os, sys, threading, time

mnt = sys.argv[1]

def timed_read(path, out=None):
    t0 = time.monotonic()
    with open(path, "rb") as f:
        n = len(f.read(4096))
    t1 = time.monotonic()
    if n <= 0:
        raise SystemExit("%s: nothing read" % path)
    if out is not None:
        out.append((t0, t1))
    return t1 - t0

# B: seed 1's first read builds its order (the lookup queues it, the read waits)
b = timed_read("%s/train/epochs/1/0/000.sprite" % mnt)
print("build time B (seed 1's first read): %.3f s" % b)
if b < 0.05:
    raise SystemExit("B = %.3f s: too short to compare anything with" % b)

big = []
th = threading.Thread(target=timed_read, args=("%s/train/epochs/2/0/000.sprite" % mnt, big))
th.start()
time.sleep(min(0.2, b / 10)) # seed 2's build under way
ops = {}
for name, rel in [("dataset.json", "dataset.json"),
                  ("stats.json", ".spritefs/stats.json"),
                  ("seed 1 (built), batch 1", "train/epochs/1/0/001.sprite"),
                  ("seed 3 test view (another build)", "test/epochs/3/0/0.sprite")]:
    out = []
    timed_read("%s/%s" % (mnt, rel), out)
    ops[name] = out[0]
th.join()
if not big:
    raise SystemExit("seed 2's read failed")
b0, b1 = big[0]
print("seed 2's first read (build under way): %.3f s" % (b1 - b0))
bad = []
if b1 - b0 < b / 2:
    bad.append("seed 2's read took %.3f s < B/2: its build did not overlap" % (b1 - b0))
for name, (t0, t1) in ops.items():
    print("  %s: %.4f s (%.1f%% of B), done %.3f s before seed 2's read"
          % (name, t1 - t0, 100 * (t1 - t0) / b, b1 - t1))
    if t1 - t0 > b / 3:
        bad.append("%s took %.3f s > B/3 = %.3f s" % (name, t1 - t0, b / 3))
    if t1 > b1:
        bad.append("%s finished after seed 2's build" % name)
if bad:
    raise SystemExit("blocked behind a build: " + "; ".join(bad))
EOF
cat "$T/timing.log"

"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" --only epochs --epochs 1 --seed 2 --step 64 \
	>"$T/check.log" 2>&1 || fail "seed 2's view: $(tail -5 "$T/check.log")"
tail -1 "$T/check.log"
refused=$(stat_field "$T/mnt" order_refusals)
[[ $refused -eq 0 ]] || fail "$refused order refusals"
held=$(stat_field "$T/mnt" orders_bytes)
[[ $held -le $((1 << 30)) ]] || fail "orders hold $held bytes, over -o orders=1G"

# a lookup alone queues an order; the unmount right after is still clean
stat "$T/mnt/train/epochs/9/0/000.sprite" >/dev/null || fail "stat seed 9"
t0=$(date +%s%N)
sfs_umount "$T/mnt"
echo "unmounted in $((($(date +%s%N) - t0) / 1000000)) ms with a lookup's build queued"
echo PASS
