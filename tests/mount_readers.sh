#!/usr/bin/env bash
# mount_readers.sh - several readers of one epoch view at once, each reading a
# whole 4 MiB batch file with one O_DIRECT read (the kernel splits it into
# 1 MiB requests served in parallel), as hntrain's ranks and loader threads
# do. Store: 125 sheets of 1 MiB (131 MB decoded), windows of 8 sheets,
# -o batch=1024. The mount says the working set for 1 reader (2 windows) and
# for 4 (4 windows); stats.json's working_set counts the readers the view
# has had at once (view_readers).
#  * 4 readers at the 4-reader working set (the store about 4x the budget):
#    each stored byte read once (read amplification <= 1.05).
#  * 4 readers at the 1-reader working set, half theirs: readers of later
#    batches wait for the older batches' sheets to be done instead of
#    evicting them, so still <= 1.05 (this read the store 3.4-5.8x when they
#    evicted each other's sheets), and the mount says the working set of the
#    readers it sees. Every view's bytes are checked against a plain read.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/big.sprites" --count-train 32000 --count-test 256 --tile 64x64x1 --sheet 256 \
	--window 8 --classes 10 >"$T/mkstore.log" 2>&1 || fail "mkstore"

cat >"$T/readers.py" <<'EOF'
import glob, hashlib, json, mmap, os, sys, threading
mnt, nthreads = sys.argv[1], int(sys.argv[2])
paths = sorted(glob.glob(mnt + "/train/epochs/0/0/*.sprite"))
sums, lock, nxt, errors = [None] * len(paths), threading.Lock(), [0], []
def reader():
    buf = mmap.mmap(-1, 8 << 20)
    while True:
        with lock:
            i = nxt[0]
            nxt[0] += 1
        if i >= len(paths):
            return
        try:
            fd = os.open(paths[i], os.O_RDONLY | os.O_DIRECT)
            k = os.readv(fd, [buf])
            os.close(fd)
            assert k == os.path.getsize(paths[i]) > 1 << 20, (paths[i], k)
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
s = json.load(open(mnt + "/.spritefs/stats.json"))
e = s["epoch"]
assert e is not None and e["batch"] == e["batches"] - 1 == len(paths) - 1, (e, len(paths))
for i, p in enumerate(paths):
    with open(p, "rb") as f:
        assert hashlib.sha1(f.read()).digest() == sums[i], p + ": O_DIRECT bytes differ"
print(e["read_amplification"], s["working_set"], s["view_readers"], s["cache_budget"])
EOF

# the working sets the mount announces, in MiB: one reader's, and four's
sfs_mount "$T/spritefs.probe.log" "$T/big.sprites" "$T/mnt" -o cache=64M,batch=1024
sfs_umount "$T/mnt"
line=$(grep "working set of split train" "$T/spritefs.probe.log") || fail "no working set said at mount"
[[ $line =~ ([0-9.]+)\ MiB\ \(2\ windows\ of\ 8\ sheets\)\ for\ 1\ reader\ of\ 1024-sample ]] ||
	fail "the mount's working set line: $line"
ws1=${BASH_REMATCH[1]}
[[ $line =~ \(4\ readers:\ ([0-9.]+)\ MiB ]] || fail "no 4-reader working set: $line"
ws4=${BASH_REMATCH[1]}
echo "working set: 1 reader $ws1 MiB, 4 readers $ws4 MiB"
awk -v a="$ws1" -v b="$ws4" 'BEGIN { exit !(b > 1.5 * a) }' || fail "4 readers' working set $ws4 MiB, 1 reader's $ws1 MiB"

for budget in "$ws4" "$ws1"; do
	mib=$(awk -v a="$budget" 'BEGIN { printf "%d", a + 0.999 }')
	sfs_mount "$T/spritefs.$mib.log" "$T/big.sprites" "$T/mnt" -o cache=${mib}M,batch=1024
	read -r amp ws readers cache < <(/usr/bin/python3 "$T/readers.py" "$T/mnt" 4) ||
		fail "4 readers, cache=${mib}M"
	size=$(stat -c %s "$T/mnt/train/images.npy")
	echo "cache=${mib}M: 4 readers of 4 MiB views, read amplification $amp (working set $((ws >> 20)) MiB for $readers readers)"
	((size >= 3 * cache)) || fail "the test's own premise: decoded store $size, budget $cache"
	((readers >= 2 && readers <= 8)) || fail "stats.json counts $readers readers of the view, 4 read it"
	awk -v a="$amp" 'BEGIN { exit !(a <= 1.05) }' ||
		fail "cache=${mib}M, 4 readers: read amplification $amp > 1.05"
	if [[ $budget == "$ws1" ]]; then
		((ws > cache)) || fail "working set $ws for $readers readers within the budget $cache"
		grep -q "readers of split train's epoch views at once: working set" "$T/spritefs.$mib.log" ||
			fail "the mount did not say the readers' working set: $(cat "$T/spritefs.$mib.log")"
	else
		((ws <= cache)) || fail "working set $ws for $readers readers above the budget $cache"
	fi
	sfs_umount "$T/mnt"
done
echo "PASS"
