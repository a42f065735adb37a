#!/usr/bin/env bash
# mount_source.sh - SOURCE other than a store: an image folder is packed on
# first mount into a cache store (cachedir=), reused while the folder is
# unchanged and packed again when it changes; its images come back exactly
# from by-class/. The folder's other stores in the cache (older contents, the
# earlier naming) go when one is packed or reused, unless a mount serves them;
# other folders' stores and files that are not stores stay. The folder
# reached by a symbolic link, "..", or (as root) a bind mount has the same
# store. What a pack leaves out is named (escaped) and counted. A folder of
# several image sizes is refused without -o tile=, naming two sizes; -o tile=
# and -o fit= shape the pack, are in the store's name (two ways, two stores)
# and are refused with a store file (exit 2). With no
# SOURCE the mount serves Fashion-MNIST from
# /usr/share/datasets/fashion-mnist (when dataset-fashion-mnist is installed),
# as docs/FORMAT.md's dataset.json example shows it.
source "$(dirname "$0")/mount_lib.sh"
need_fuse
PY=/usr/bin/python3
$PY -c "import numpy, PIL" 2>/dev/null || { echo "SKIP: no numpy/PIL for /usr/bin/python3"; exit 77; }

# a small ImageFolder tree of PNGs: train/<class>/, test/<class>/
$PY - "$T/src" <<'PY' || fail "making the image tree"
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
rng = np.random.default_rng(5)
for split, n in (("train", 40), ("test", 12)):
    for cls in ("cat", "dog", "emu"):
        os.makedirs(f"{root}/{split}/{cls}", exist_ok=True)
        for i in range(n):
            a = rng.integers(0, 256, (24, 24), dtype=np.uint8)
            Image.fromarray(a).save(f"{root}/{split}/{cls}/{i:03d}.png")
PY
# temp files of earlier packs: a dead writer's goes, a live one's and other names stay
mkdir -p "$T/cache"
(:) &
dead=$!
wait $dead
touch "$T/cache/old-0123.sprites.tmp.$dead" "$T/cache/live-0123.sprites.tmp.$$" \
	"$T/cache/notes.tmp.$dead"
sfs_mount "$T/first.log" "$T/src" "$T/mnt" -o cachedir="$T/cache"
grep -q "packing" "$T/first.log" || fail "first mount did not pack: $(cat "$T/first.log")"
[[ -e $T/cache/old-0123.sprites.tmp.$dead ]] && fail "a dead pack's temp file was left"
[[ -e $T/cache/live-0123.sprites.tmp.$$ && -e $T/cache/notes.tmp.$dead ]] ||
	fail "a live pack's temp file or another file was removed"
store=$(ls "$T/cache"/*.sprites) || fail "no cache store in $T/cache"
grep -q '"count": 120' "$T/mnt/dataset.json" || fail "train count: $(cat "$T/mnt/dataset.json")"
$PY - "$T/src" "$T/mnt" <<'PY' || fail "by-class images differ from the source PNGs"
import json, os, sys
import numpy as np
from PIL import Image
src, m = sys.argv[1:]
meta = json.load(open(f"{m}/dataset.json"))
assert meta["classes"] == ["cat", "dog", "emu"], meta["classes"]
for split in ("train", "test"):
    files = [(c, f) for c in ("cat", "dog", "emu") for f in sorted(os.listdir(f"{src}/{split}/{c}"))]
    images = np.load(f"{m}/{split}/images.npy")
    assert len(files) == len(images)
    for i, (c, f) in enumerate(files):
        want = np.asarray(Image.open(f"{src}/{split}/{c}/{f}"))
        assert np.array_equal(images[i], want), (split, c, f)
        names = os.listdir(f"{m}/{split}/by-class/{c}")
        got = np.asarray(Image.open(f"{m}/{split}/by-class/{c}/{i:0{len(str(len(files) - 1))}d}.pgm"))
        assert np.array_equal(got, want), (split, c, f, "by-class")
print("image folder: every image served exactly")
PY
sfs_umount "$T/mnt"

# the same folder by another path (a symbolic link, "..", a bind mount): the same store
ln -s src "$T/link"
ways=("$T/link" "$T/src/../src" "$T/src/")
if [[ $(id -u) -ne 0 ]]; then
	echo "note: not root: the bind mount is not checked"
else
	mkdir -p "$T/bind"
	MOUNTS+=("$T/bind")
	mount --bind "$T/src" "$T/bind" || fail "mount --bind $T/src $T/bind"
	ways+=("$T/bind")
fi
for w in "${ways[@]}"; do
	sfs_mount "$T/way.log" "$w" "$T/mnt" -o cachedir="$T/cache"
	grep -q "packing" "$T/way.log" && fail "$w: packed again, not the store of $T/src: $(ls "$T/cache")"
	grep -q '"name": "src"' "$T/mnt/dataset.json" || fail "$w: data set name: $(head -c 200 "$T/mnt/dataset.json")"
	sfs_umount "$T/mnt"
done
[[ $(ls "$T/cache" | grep -c '\.sprites$') -eq 1 ]] || fail "more than one store for one folder: $(ls "$T/cache")"
if [[ -d $T/bind ]]; then
	umount "$T/bind" || fail "umount $T/bind"
	# packed by the bind mount's path first, the store is the folder's all the same
	mkdir -p "$T/cache-b"
	mount --bind "$T/src" "$T/bind" || fail "mount --bind $T/src $T/bind"
	sfs_mount "$T/bind.log" "$T/bind" "$T/mnt" -o cachedir="$T/cache-b"
	grep -q '"name": "src"' "$T/mnt/dataset.json" || fail "packed by the bind mount: $(head -c 200 "$T/mnt/dataset.json")"
	sfs_umount "$T/mnt"
	umount "$T/bind" || fail "umount $T/bind"
	[[ $(ls "$T/cache-b") == "$(basename "$store")" ]] ||
		fail "packed by the bind mount: $(ls "$T/cache-b"), not $(basename "$store")"
fi
echo "one store whichever path the folder is given by"

# stores of other folders, and files that are not stores, are never pruned; stores
# of this folder under the earlier naming (<folder>-<fingerprint>.sprites) are,
# unless a mount serves them
other="$T/cache/src-0123456789abcdef-0123456789abcdef.sprites"
touch -d '2 days ago' "$other" "$T/cache/src-0123456789abcdef.sprites"
for f in src-00000000000000a1 src-00000000000000b1 other-00000000000000c1; do
	cp "$store" "$T/cache/$f.sprites"
	touch -d '2 days ago' "$T/cache/$f.sprites"
done
sfs_mount "$T/old.log" "$T/cache/src-00000000000000b1.sprites" "$T/mnt0"
pid0=$SFS_PID

sfs_mount "$T/second.log" "$T/src" "$T/mnt" -o cachedir="$T/cache"
grep -q "packing" "$T/second.log" && fail "second mount packed again"
echo "unchanged folder: cache store reused"
grep -q "removed 1 older cache store" "$T/second.log" || fail "no prune on reuse: $(cat "$T/second.log")"
[[ -e $T/cache/src-00000000000000a1.sprites ]] && fail "a store of the earlier naming was kept"
[[ -f $T/cache/src-00000000000000b1.sprites ]] || fail "a store of the earlier naming served by a mount was pruned"
echo "earlier naming: pruned, unless mounted"
pid2=$SFS_PID

# packed again while the first store is still mounted: that one is kept
cp "$T/src/train/cat/000.png" "$T/src/train/cat/999.png"
sfs_mount "$T/third.log" "$T/src" "$T/mnt3" -o cachedir="$T/cache"
grep -q "packing" "$T/third.log" || fail "changed folder was not packed again"
grep -q '"count": 121' "$T/mnt3/dataset.json" || fail "new image not served"
[[ -f $store ]] || fail "a store served by a mount was pruned"
sfs_umount "$T/mnt3"
SFS_PID=$pid2
sfs_umount "$T/mnt"
SFS_PID=$pid0
sfs_umount "$T/mnt0"
echo "changed folder: packed again"

# taken from the cache with nothing mounted: the stores that were served go
sfs_mount "$T/reuse.log" "$T/src" "$T/mnt" -o cachedir="$T/cache"
grep -q "packing" "$T/reuse.log" && fail "unchanged folder packed again"
grep -q "removed 2 older cache store" "$T/reuse.log" || fail "no prune on reuse: $(cat "$T/reuse.log")"
[[ -e $store || -e $T/cache/src-00000000000000b1.sprites ]] && fail "stores no longer served were kept: $(ls "$T/cache")"
sfs_umount "$T/mnt"

# packed again: the older store of this folder goes
cp "$T/src/train/cat/000.png" "$T/src/train/cat/998.png"
sfs_mount "$T/fourth.log" "$T/src" "$T/mnt" -o cachedir="$T/cache"
grep -q "removed 1 older cache store" "$T/fourth.log" || fail "no prune: $(cat "$T/fourth.log")"
sfs_umount "$T/mnt"
mine=$(ls "$T/cache" | grep -c "^src-[0-9a-f]\{16\}-[0-9a-f]\{16\}\.sprites$")
[[ $mine -eq 2 ]] || fail "cache holds $mine stores named like this folder's, want the new one and the other folder's: $(ls "$T/cache")"
[[ -f $other && -f $T/cache/src-0123456789abcdef.sprites && -f $T/cache/other-00000000000000c1.sprites ]] ||
	fail "a store of another folder, or a file that is not a store, was pruned: $(ls "$T/cache")"
[[ $(ls "$T/cache" | grep -c "^src-[0-9a-f]\{16\}\.sprites$") -eq 1 ]] ||
	fail "stores of the earlier naming left: $(ls "$T/cache")"
echo "older cache stores of the folder pruned, others kept"

# a folder name longer than a file name can hold with the store's suffix: the
# cache store's folder part (and the data set name) is cut between characters
long=$(printf 'é%.0s' $(seq 110))x
mkdir -p "$T/$long"
cp -r "$T/src/train" "$T/$long/"
mkdir -p "$T/cache-l"
sfs_mount "$T/long.log" "$T/$long" "$T/mnt" -o cachedir="$T/cache-l"
lstore=$(ls "$T/cache-l")
[[ $lstore == "$(printf 'é%.0s' $(seq 31))-"[0-9a-f]*.sprites ]] || fail "long folder name: cache store $lstore"
grep -q "\"name\": \"$(printf 'é%.0s' $(seq 31))\"" "$T/mnt/dataset.json" || fail "long folder name: $(head -c 300 "$T/mnt/dataset.json")"
sfs_umount "$T/mnt"
echo "folder name of 221 bytes: store named by its first 62 bytes"

# a first-use pack names what it leaves out (escaped, the first 10) and counts it
mkdir -p "$T/odd/cat" "$T/odd/dog"
cp "$T/src/train/cat/000.png" "$T/odd/cat/" && cp "$T/src/train/dog/000.png" "$T/odd/dog/"
echo "not an image" >"$T/odd/cat/bad"$'\n'"name.png"
echo "notes" >"$T/odd/README"$'\e'"[1m"
ln -s nowhere "$T/odd/dog/gone.png"
mkfifo "$T/odd/dog/pipe.png"
sfs_mount "$T/odd.log" "$T/odd" "$T/mnt" -o cachedir="$T/cache"
sfs_umount "$T/mnt"
want="spritefs: ignoring $T/odd/README\x1b[1m: not in a class folder
spritefs: ignoring $T/odd/dog/gone.png: a dangling symbolic link
spritefs: ignoring $T/odd/dog/pipe.png: a FIFO, not a file or folder
spritefs: skipping $T/odd/cat/bad\nname.png: not a PNG/TIFF/JPEG/PNM file
spritefs: packed 2 samples (1 skipped, 3 ignored) in"
got=$(grep "^spritefs: \(ignoring\|skipping\|packed\) " "$T/odd.log" | sed 's/ in [0-9.]* s$/ in/')
[[ $got == "$want" ]] || fail "first-use pack report: $(diff <(echo "$want") <(echo "$got"))"
LC_ALL=C grep -v "^spritefs: [ -~]*$" "$T/odd.log" >"$T/raw" &&
	fail "first-use pack: raw control bytes, or broken lines: $(cat -A "$T/raw")"
echo "first-use pack: left-out entries named escaped and counted"

# A folder of several image sizes: refused without -o tile=, naming two sizes
# and the option; packed with -o tile= and -o fit=, each way its own store.
$PY - "$T/sizes" <<'PY' || fail "making the mixed-size tree"
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(6)
for cls, sizes in (("cat", [(24, 24), (30, 20)]), ("dog", [(17, 41), (24, 24)])):
    os.makedirs(f"{sys.argv[1]}/{cls}")
    for i, (h, w) in enumerate(sizes):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(
            f"{sys.argv[1]}/{cls}/{i}.png")
PY
mkdir -p "$T/cache-s" "$T/mnt"
rc=0
timeout 60 "$SPRITEFS" -f -o cachedir="$T/cache-s" "$T/sizes" "$T/mnt" >"$T/sizes.txt" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q "images differ in size, 24x24 and 30x20, and no tile size is given (.*spritefs -o tile=HxWxC" "$T/sizes.txt" ||
	fail "mixed sizes without -o tile: exit $rc: $(cat "$T/sizes.txt")"
is_mounted "$T/mnt" && fail "mixed sizes without -o tile: mounted"
sfs_mount "$T/pad.log" "$T/sizes" "$T/mnt" -o cachedir="$T/cache-s",tile=16x16x3,fit=pad
pad_pid=$SFS_PID
grep -q '"tile": {"h": 16, "w": 16, "c": 3}' "$T/mnt/dataset.json" &&
	grep -q '"fit": "pad"' "$T/mnt/dataset.json" || fail "-o tile=,fit=pad: $(cat "$T/mnt/dataset.json")"
sfs_mount "$T/crop.log" "$T/sizes" "$T/mnt3" -o cachedir="$T/cache-s" -o tile=16x16x3
grep -q '"fit": "crop"' "$T/mnt3/dataset.json" || fail "-o tile= alone is not crop: $(cat "$T/mnt3/dataset.json")"
grep -q "packing" "$T/crop.log" || fail "the folder cropped reused the padded store: $(cat "$T/crop.log")"
[[ $(ls "$T/cache-s" | grep -c '\.sprites$') -eq 2 ]] || fail "a folder packed two ways: $(ls "$T/cache-s")"
sfs_umount "$T/mnt3"
SFS_PID=$pad_pid
sfs_umount "$T/mnt"
# A store file's tiles are made: -o tile= and -o fit= are usage errors naming the option.
for o in tile=8x8 fit=pad background=white; do
	rc=0
	"$SPRITEFS" -f -o "$o" "$(ls "$T/cache-s"/*.sprites | head -1)" "$T/mnt" >"$T/store.txt" 2>&1 || rc=$?
	[[ $rc -eq 2 ]] && grep -q "^spritefs: -o ${o%%=*} applies to the first-use pack of an image folder, not to a store file" "$T/store.txt" ||
		fail "-o $o with a store: exit $rc: $(cat "$T/store.txt")"
done
rc=0
"$SPRITEFS" -f -o fit=squash "$T/sizes" "$T/mnt" >"$T/bad.txt" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -q "fit=squash: expected crop, pad or stretch" "$T/bad.txt" || fail "-o fit=squash: exit $rc: $(cat "$T/bad.txt")"
rc=0
"$SPRITEFS" -f -o background=purple "$T/sizes" "$T/mnt" >"$T/bad.txt" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -q "background=purple: expected none, black, white or R,G,B" "$T/bad.txt" ||
	fail "-o background=purple: exit $rc: $(cat "$T/bad.txt")"
echo "mixed sizes: refused without -o tile=; -o tile= and -o fit= give a store each; refused with a store"

if [[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
	mkdir -p "$T/mnt"
	MOUNTS+=("$T/mnt")
	"$SPRITEFS" -f -o cachedir="$T/cache" "$T/mnt" >"$T/default.log" 2>&1 &
	SFS_PID=$!
	PIDS+=("$SFS_PID")
	for _ in $(seq 1200); do is_mounted "$T/mnt" && break; kill -0 $SFS_PID 2>/dev/null || break; sleep 0.1; done
	is_mounted "$T/mnt" || fail "default data set did not mount: $(cat "$T/default.log")"
	grep -q '"train": {"count": 60000' "$T/mnt/dataset.json" || fail "default: $(cat "$T/mnt/dataset.json")"
	grep -q '"test": {"count": 10000' "$T/mnt/dataset.json" || fail "default: no test split"
	[[ $(ls "$T/mnt/train/by-class" | wc -l) -eq 10 ]] || fail "default: not 10 classes"
	# docs/FORMAT.md's dataset.json example is this mount's: every value it shows
	$PY - "$SRCDIR/docs/FORMAT.md" "$T/mnt/dataset.json" <<'PY' || fail "docs/FORMAT.md's dataset.json example differs from the mount"
import json, re, sys
doc = open(sys.argv[1]).read()
block = re.search(r"### dataset.json\n\n```json\n(.*?)```", doc, re.S).group(1)
# "..." stands for the rest of a list; a store path for any store
example = json.loads(re.sub(r",\s*\.\.\.\]", "]", block))
live = json.load(open(sys.argv[2]))
bad = []
def same(want, got, path):
    if isinstance(want, dict):
        for k, v in want.items():
            if not isinstance(got, dict) or k not in got:
                bad.append(f"{path}.{k} missing")
            else:
                same(v, got[k], f"{path}.{k}")
    elif isinstance(want, list):
        if not isinstance(got, list) or got[:len(want)] != want:
            bad.append(f"{path}: {want} vs {got}")
    elif path != ".store" and want != got:
        bad.append(f"{path}: {want!r} in the example, {got!r} mounted")
same(example, live, "")
if set(live) != set(example):
    bad.append(f"keys: {sorted(set(live) ^ set(example))}")
if bad:
    print("FAIL:", "; ".join(bad))
    sys.exit(1)
PY
	$PY -c "
import numpy as np, sys
x = np.load('$T/mnt/train/images.npy', mmap_mode='r'); y = np.load('$T/mnt/train/labels.npy')
assert x.shape == (60000, 28, 28) and y.max() == 9 and x[:100].mean() > 10, (x.shape, y.max())
" || fail "default: images.npy/labels.npy"
	sfs_umount "$T/mnt"
	echo "default source: Fashion-MNIST, 60000 + 10000"
else
	echo "dataset-fashion-mnist not installed: default source not checked"
fi
echo "PASS"
