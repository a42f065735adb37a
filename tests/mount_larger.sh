#!/usr/bin/env bash
# mount_larger.sh - a store larger than the cache budget: 125 sheets of 1 MiB
# (131 MB decoded) whose order has windows of 8 sheets, mounted with
# cache=20M (6.3x smaller than the store, at least the 18 MiB working set
# the mount announces). One pass over epoch 0's views in batch order, as a
# trainer reads them, must read each stored byte once (read amplification
# at most 1.05 in stats.json); at half the working set (cache=10M), at most
# 2x. Then every view of two epochs is checked byte for byte against the
# store (mount_check), and the order is the data set's whatever the budget.
# Last, the same bounds for views of 1 MiB read whole by 16 MiB O_DIRECT
# reads, which the kernel splits into requests served in parallel: a view
# is done only once all its bytes are served, whichever request ends last;
# and with two reader threads, whose first views start together.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/big.sprites" --count-train 32000 --count-test 256 --tile 64x64x1 --sheet 256 \
	--window 8 --classes 10 >"$T/mkstore.log" 2>&1 || fail "mkstore"

# one pass over the views of epoch 0 in batch order; prints the stats.json epoch fields
one_pass() {
	local n=0
	for f in "$T"/mnt/train/epochs/0/0/*.sprite; do
		cat "$f" >/dev/null || fail "reading $f"
		n=$((n + 1))
	done
	((n == 500)) || fail "epoch 0 has $n views, expected 500"
	/usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
e = s["epoch"]
assert e is not None and e["split"] == "train" and e["batch"] == e["batches"] - 1, e
print(e["read_amplification"], s["working_set"], s["cache_budget"])' "$T/mnt/.spritefs/stats.json"
}

for budget in 20M 10M; do
	sfs_mount "$T/spritefs.$budget.log" "$T/big.sprites" "$T/mnt" -o cache=$budget,batch=64
	grep -q '"order": "windowed", "window": 8' "$T/mnt/dataset.json" ||
		fail "cache=$budget: the data set's windowed order is not served: $(grep '"train"' "$T/mnt/dataset.json")"
	grep -q "working set of split train: 18.1 MiB (2 windows of 8 sheets)" "$T/spritefs.$budget.log" ||
		fail "cache=$budget: no working set said at mount: $(cat "$T/spritefs.$budget.log")"
	size=$(stat -c %s "$T/mnt/train/images.npy") # the decoded tiles
	read -r amp ws cache < <(one_pass)
	echo "cache=$budget: decoded store $((size >> 20)) MiB, working set $((ws >> 20)) MiB, read amplification $amp"
	if [[ $budget == 20M ]]; then
		((cache >= ws && size >= 6 * cache)) || fail "the test's own premise: store $size, budget $cache, working set $ws"
		awk -v a="$amp" 'BEGIN { exit !(a <= 1.05) }' || fail "read amplification $amp > 1.05 within the working set"
		# the bytes: every view of two epochs, and the other files
		"$MOUNT_CHECK" "$T/big.sprites" "$T/mnt" --epochs 2 --only epochs >"$T/check.log" 2>&1 ||
			fail "mount_check: $(tail -3 "$T/check.log")"
		tail -1 "$T/check.log"
		order20=$(sha1sum <"$T/mnt/train/epochs/0/1/000.sprite")
	else
		grep -q "warning: working set .* cache 10.0 MiB" "$T/spritefs.$budget.log" ||
			fail "no warning below the working set: $(cat "$T/spritefs.$budget.log")"
		awk -v a="$amp" 'BEGIN { exit !(a <= 2) }' || fail "read amplification $amp > 2 at half the working set"
		[[ $(sha1sum <"$T/mnt/train/epochs/0/1/000.sprite") == "$order20" ]] ||
			fail "epoch 1's first view differs between cache=20M and cache=10M"
	fi
	sfs_umount "$T/mnt"
done

# every view of epoch 0 read whole, one os.read each into an aligned buffer
# with O_DIRECT, by THREADS threads taking the next view (trainers' loaders
# start several views together); THREADS 0: one thread that reads the first
# 4 KiB of view 1 before view 0, as when a second loader thread wins the
# race to the first request; THREADS -1: view 1 read whole before view 0
# begins, as when the first loader's first request is served last (this
# left view 1 counted as unread: the cache then held every sheet since for
# 64 batches and read the store 11 times over). Then each view read plainly
# must give the same bytes. Prints the stats.json read amplification of the
# O_DIRECT pass.
cat >"$T/direct.py" <<'EOF'
import glob, hashlib, json, mmap, os, sys, threading
mnt, nthreads = sys.argv[1], int(sys.argv[2])
paths = sorted(glob.glob(mnt + "/train/epochs/0/0/*.sprite"))
sums, lock, nxt, errors = [None] * len(paths), threading.Lock(), [0], []
head = None
def whole(i):
    buf = mmap.mmap(-1, 16 << 20)
    fd = os.open(paths[i], os.O_RDONLY | os.O_DIRECT)
    k = os.readv(fd, [buf])
    os.close(fd)
    assert k == os.path.getsize(paths[i]), (paths[i], k)
    sums[i] = hashlib.sha1(buf[:k]).digest()
if nthreads < 0:
    whole(1)
    whole(0)
    nxt[0] = 2
    nthreads = 1
if nthreads == 0:
    fd = os.open(paths[1], os.O_RDONLY | os.O_DIRECT)
    head = mmap.mmap(-1, 4096)
    assert os.readv(fd, [head]) == 4096
    nthreads = 1
def reader():
    buf = mmap.mmap(-1, 16 << 20)
    while True:
        with lock:
            i = nxt[0]
            nxt[0] += 1
        if i >= len(paths):
            return
        try:
            fd = os.open(paths[i], os.O_RDONLY | os.O_DIRECT)
            size = os.fstat(fd).st_size
            assert 1 << 20 < size <= len(buf), (paths[i], size)
            if i == 1 and head is not None:
                os.lseek(fd, 4096, os.SEEK_SET)
                k = 4096 + os.readv(fd, [buf])
                buf[4096:k] = buf[:k - 4096]
                buf[:4096] = head
            else:
                k = os.readv(fd, [buf])
            os.close(fd)
            assert k == size, (paths[i], k, size)
            sums[i] = hashlib.sha1(buf[:k]).digest()
        except Exception as e:
            errors.append(e)
            return
threads = [threading.Thread(target=reader) for _ in range(nthreads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
e = json.load(open(mnt + "/.spritefs/stats.json"))["epoch"]
assert e is not None and e["batch"] == e["batches"] - 1 == len(paths) - 1, (e, len(paths))
for i, p in enumerate(paths):
    with open(p, "rb") as f:
        assert hashlib.sha1(f.read()).digest() == sums[i], p + ": O_DIRECT bytes differ"
print(e["read_amplification"])
EOF
for run in "20M 1" "10M 1" "20M 2" "20M 0" "20M -1"; do
	read -r budget nthreads <<<"$run"
	sfs_mount "$T/spritefs.direct.$budget.$nthreads.log" "$T/big.sprites" "$T/mnt" -o cache=$budget,batch=256
	amp=$(/usr/bin/python3 "$T/direct.py" "$T/mnt" "$nthreads") ||
		fail "O_DIRECT pass, cache=$budget, $nthreads threads"
	how="$nthreads thread(s)"
	((nthreads)) || how="1 thread, view 1 begun before view 0"
	((nthreads < 0)) && how="1 thread, view 1 read whole before view 0"
	echo "cache=$budget, 1 MiB views read by 16 MiB O_DIRECT reads, $how: read amplification $amp"
	bound=1.05
	[[ $budget == 10M ]] && bound=2
	awk -v a="$amp" -v b=$bound 'BEGIN { exit !(a <= b) }' ||
		fail "cache=$budget, $how: read amplification $amp > $bound with O_DIRECT reads"
	sfs_umount "$T/mnt"
done
echo "PASS"
