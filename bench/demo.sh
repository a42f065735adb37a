#!/usr/bin/env bash
# demo.sh - what `./run demo` shows, after the project is built and installed:
#
#   1. spritefs mounts the default data set (Fashion-MNIST from Debian's
#      dataset-fashion-mnist, packed into a cache store on first use);
#   2. a look at the mount: dataset.json, the files a trainer sees;
#   3. hntrain trains the CNN through the mount, reporting compute time and
#      data-wait time apart;
#   4. spritefs-bench --quick runs the same job over tmpfs, the disk and
#      spritefs and prints the comparison table.
#
# Every mount is undone on every exit path (trap). Options:
#   DEMO_EPOCHS=N (default 2)  DEMO_SKIP_BENCH=1  DEMO_OUT=DIR (bench output)
set -euo pipefail
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(dirname "$HERE")

pick() { # NAME: installed binary, else the build tree's
	local p
	p=$(command -v "$1" 2>/dev/null || true)
	[[ -n $p ]] || p=$(find "$ROOT/build" -maxdepth 3 -type f -name "$1" -perm -u+x 2>/dev/null | head -1)
	[[ -n $p ]] || { echo "demo: $1 not found (run ./run build first)" >&2; exit 1; }
	echo "$p"
}
SPRITEFS=$(pick spritefs)
HNTRAIN=$(pick hntrain)
BENCH=$(command -v spritefs-bench 2>/dev/null || echo "$HERE/spritefs-bench")
EPOCHS=${DEMO_EPOCHS:-2}
NCPU=$(nproc)
((NCPU > 64)) && NCPU=64 # hntrain's CPU backend runs at most 64 threads

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

[[ -e /dev/fuse ]] || { echo "demo: /dev/fuse is missing: FUSE cannot mount here" >&2; exit 1; }
MNT=$(mktemp -d /tmp/spritefs-demo.XXXXXX)
LOG=$(mktemp /tmp/spritefs-demo-log.XXXXXX)
SFS_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $SFS_PID ]]; then
		fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$SFS_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill "$SFS_PID" 2>/dev/null || true
	fi
	rmdir "$MNT" 2>/dev/null || true
	rm -f "$LOG"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "1. spritefs: mounting the default data set (Fashion-MNIST) on $MNT"
echo "\$ spritefs -f -o cache=512M $MNT &"
"$SPRITEFS" -f -o cache=512M "$MNT" &
SFS_PID=$!
for i in $(seq 1 600); do # the first mount packs the data set (a few seconds)
	mountpoint -q "$MNT" && [[ -r $MNT/dataset.json ]] && break
	kill -0 "$SFS_PID" 2>/dev/null || { SFS_PID=""; echo "demo: spritefs exited" >&2; exit 1; }
	sleep 0.1
done
mountpoint -q "$MNT" || { echo "demo: spritefs did not mount within 60 s" >&2; exit 1; }

say "2. what a trainer sees"
echo "\$ cat $MNT/dataset.json"
cat "$MNT/dataset.json"
echo "\$ ls $MNT $MNT/train"
ls "$MNT" "$MNT/train"
echo "\$ ls $MNT/train/batches | head -3; ls $MNT/train/by-class"
ls "$MNT/train/batches" | head -3
ls "$MNT/train/by-class"
if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
	echo "\$ python3 -c \"np.load('$MNT/train/images.npy', mmap_mode='r')\""
	/usr/bin/python3 -c "import numpy as np; a = np.load('$MNT/train/images.npy', mmap_mode='r'); \
l = np.load('$MNT/train/labels.npy'); print('images', a.shape, a.dtype, 'labels', l.shape, 'mean pixel', float(a[:1000].mean()))"
fi

say "3. hntrain: the CNN, $EPOCHS epoch(s), batch 64, $NCPU threads, fed by spritefs"
echo "\$ hntrain --data $MNT --model cnn --epochs $EPOCHS --batch 64 --threads $NCPU --log LOG"
"$HNTRAIN" --data "$MNT" --model cnn --epochs "$EPOCHS" --batch 64 --threads "$NCPU" --log "$LOG"
if [[ -x /usr/bin/python3 ]]; then
	/usr/bin/python3 - "$LOG" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("\nepoch | samples/s | compute s | data wait s | wait share | test acc")
for r in rows:
    if r.get("final"):
        print("final weights xxh3:", r.get("weights_xxh3"))
        continue
    share = r["data_wait_s"] / r["wall_s"] if r.get("wall_s") else 0
    print(f"{r['epoch']:>5} | {r['samples_per_s']:>9.0f} | {r['compute_s']:>9.2f} | "
          f"{r['data_wait_s']:>11.3f} | {100 * share:>9.2f}% | {100 * r['test_acc']:.2f}%")
EOF
fi
# stats.json is one page padded with spaces (docs/FORMAT.md): shown without the padding
echo "\$ sed 's/ *\$//' $MNT/.spritefs/stats.json"
sed 's/ *$//' "$MNT/.spritefs/stats.json" 2>/dev/null | head -40 || true
echo "\$ fusermount3 -u $MNT"
fusermount3 -u "$MNT"
wait "$SFS_PID" 2>/dev/null || true
SFS_PID=""

if [[ -z ${DEMO_SKIP_BENCH:-} ]]; then
	OUT=${DEMO_OUT:-$(mktemp -d /tmp/spritefs-bench-demo.XXXXXX)}
	say "4. spritefs-bench --quick: the same job over tmpfs, the disk and spritefs"
	echo "\$ spritefs-bench --quick --out $OUT"
	"$BENCH" --quick --out "$OUT"
	echo
	echo "results: $OUT/results.json, plots: $OUT/throughput.png $OUT/epoch_split.png"
fi
