#!/usr/bin/env bash
# mount_admit.sh - ten readers of one epoch order at once, as ten emulated
# accelerators (mpirun ranks) read it: reader r reads views r, r + 10, ...,
# each whole with one O_DIRECT read (the kernel splits it into 1 MiB requests
# sent side by side), with no pause, so that readers drift apart and some run
# ahead of the others. They start together, as ranks do after a barrier, so
# their first requests come in no fixed order (stream.c, settle). The budget is below their working set, so they must
# take turns (stream.c, admit: a batch past the horizon waits). Store: 125
# sheets of 1 MiB (131 MB decoded), windows of 8 sheets.
#  * views of 4 MiB (-o batch=1024), the budget at 1 reader's working set;
#  * views of 8 MiB (-o batch=2048), the budget at 4 readers' working set:
# each stored byte is read once (read amplification <= 1.1): when at most 24
# requests waited and the rest loaded and evicted, this read the store
# 1.4-3.6x and 1.3-2.0x over. Every reader's bytes are checked against a
# plain read of the same view by one reader, on a mount that holds the
# whole store. The daemon starts under a soft limit of 256 open files, below
# what its FUSE workers (a /dev/fuse clone and a splice pipe each) may need
# when all of them run; it raises the soft limit to the hard one (main.c,
# raise_nofile).
source "$(dirname "$0")/mount_lib.sh"
need_fuse
ulimit -Sn 256 || fail "cannot lower the soft limit of open files"

"$MKSTORE" "$T/big.sprites" --count-train 32000 --count-test 256 --tile 64x64x1 --sheet 256 \
	--window 8 --classes 10 >"$T/mkstore.log" 2>&1 || fail "mkstore"

cat >"$T/ranks.py" <<'EOF'
import hashlib, json, mmap, os, sys, threading
mnt, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = mnt + "/train/epochs/0/0"
names = sorted((p for p in os.listdir(d) if p.endswith(".sprite")), key=lambda p: int(p.split(".")[0]))
sums, errors = [None] * len(names), []
start = threading.Barrier(n)
def rank(r):
    buf = mmap.mmap(-1, 16 << 20)
    start.wait()  # all ten ask for their first view together, as ranks do after init
    try:
        for i in range(r, len(names), n):
            fd = os.open(d + "/" + names[i], os.O_RDONLY | os.O_DIRECT)
            k = os.readv(fd, [buf])
            os.close(fd)
            assert k == os.path.getsize(d + "/" + names[i]) > 1 << 20, (names[i], k)
            sums[i] = hashlib.sha1(buf[:k]).hexdigest()
    except Exception as e:
        errors.append(e)
threads = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
s = json.load(open(mnt + "/.spritefs/stats.json"))
e = s["epoch"]
assert e is not None and e["batch"] == e["batches"] - 1 == len(names) - 1, (e, len(names))
with open(out, "w") as f:
    f.writelines(f"{p} {h}\n" for p, h in zip(names, sums))
print(e["read_amplification"], s["view_readers"], s["cache_budget"], s["room_waits"], s.get("room_releases", 0))
EOF
cat >"$T/plain.py" <<'EOF'
import hashlib, sys
d = sys.argv[1] + "/train/epochs/0/0"
for line in open(sys.argv[2]):
    name, h = line.split()
    with open(d + "/" + name, "rb") as f:
        assert hashlib.sha1(f.read()).hexdigest() == h, name + ": a reader's bytes differ from a plain read's"
EOF

for batch in 1024 2048; do
	# the working sets the mount announces, in MiB: one reader's, and four's
	sfs_mount "$T/spritefs.probe.log" "$T/big.sprites" "$T/mnt" -o cache=64M,batch=$batch
	sfs_umount "$T/mnt"
	line=$(grep "working set of split train" "$T/spritefs.probe.log") || fail "no working set said at mount"
	[[ $line =~ ([0-9.]+)\ MiB\ \([0-9]+\ windows\ of\ 8\ sheets\)\ for\ 1\ reader ]] ||
		fail "the mount's working set line: $line"
	ws=${BASH_REMATCH[1]}
	if ((batch == 2048)); then
		[[ $line =~ \(4\ readers:\ ([0-9.]+)\ MiB ]] || fail "no 4-reader working set: $line"
		ws=${BASH_REMATCH[1]}
	fi
	mib=$(awk -v a="$ws" 'BEGIN { printf "%d", a + 0.999 }')
	sfs_mount "$T/spritefs.$batch.log" "$T/big.sprites" "$T/mnt" -o cache=${mib}M,batch=$batch
	read -r amp readers cache waits lets < <(/usr/bin/python3 "$T/ranks.py" "$T/mnt" 10 "$T/sums.$batch") ||
		fail "10 readers, batch=$batch, cache=${mib}M"
	size=$(stat -c %s "$T/mnt/train/images.npy")
	read -r soft hard < <(awk '/^Max open files/ { print $4, $5 }' "/proc/$SFS_PID/limits")
	fds=$(find "/proc/$SFS_PID/fd" -mindepth 1 | wc -l)
	sfs_umount "$T/mnt"
	echo "batch=$batch: the daemon's open files: $fds, soft limit $soft (hard $hard)"
	[[ $soft == "$hard" ]] || fail "the daemon kept a soft limit of $soft open files (hard $hard)"
	echo "batch=$batch cache=${mib}M: 10 readers, read amplification $amp ($readers readers seen," \
		"$waits waits, $lets let in out of turn)"
	((size >= 2 * cache)) || fail "the test's own premise: decoded store $size, budget $cache"
	((readers >= 4)) || fail "stats.json counts $readers readers of the view at once, 10 read it"
	awk -v a="$amp" 'BEGIN { exit !(a <= 1.1) }' ||
		fail "batch=$batch cache=${mib}M, 10 readers: read amplification $amp > 1.1"
	sfs_mount "$T/spritefs.plain.log" "$T/big.sprites" "$T/mnt" -o cache=256M,prealloc=0,batch=$batch
	/usr/bin/python3 "$T/plain.py" "$T/mnt" "$T/sums.$batch" || fail "batch=$batch: bytes differ"
	sfs_umount "$T/mnt"
done
echo "PASS"
