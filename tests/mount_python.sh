#!/usr/bin/env bash
# mount_python.sh - Python trainers read the mount unchanged: numpy's
# np.load(mmap_mode='r') and a plain np.load of images.npy/labels.npy agree
# with the batch files (parsed here with struct, per docs/FORMAT.md), and
# torchvision.datasets.ImageFolder over by-class/ gives the same pixels and
# classes; the numpy reader printed in docs/FORMAT.md runs as printed and
# agrees. Uses Debian's /usr/bin/python3; parts whose module is missing
# are skipped with a note (the whole test skips only without numpy).
source "$(dirname "$0")/mount_lib.sh"
need_fuse
PY=/usr/bin/python3
[[ -x $PY ]] && $PY -c "import numpy" 2>/dev/null || { echo "SKIP: no numpy for /usr/bin/python3"; exit 77; }

"$MKSTORE" "$T/gray.sprites" --count-train 1500 --count-test 300 --sheet 128 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore gray"
"$MKSTORE" "$T/rgb.sprites" --count-train 400 --count-test 60 --tile 20x16x3 --sheet 50 \
	--classes 5 >>"$T/mkstore.log" 2>&1 || fail "mkstore rgb"
for s in gray rgb; do
	sfs_mount "$T/spritefs-$s.log" "$T/$s.sprites" "$T/mnt-$s" -o cache=32M
	$PY - "$T/mnt-$s" >"$T/py-$s.log" 2>&1 <<'PY' || fail "[$s] python: $(tail -5 "$T/py-$s.log")"
import json, os, struct, sys
import numpy as np
m = sys.argv[1]
meta = json.load(open(f"{m}/dataset.json"))
h, w, c = meta["tile"]["h"], meta["tile"]["w"], meta["tile"]["c"]
for split, info in meta["splits"].items():
    n = info["count"]
    mm = np.load(f"{m}/{split}/images.npy", mmap_mode="r")
    plain = np.load(f"{m}/{split}/images.npy")
    labels = np.load(f"{m}/{split}/labels.npy")
    want_shape = (n, h, w) if c == 1 else (n, h, w, c)
    assert mm.shape == want_shape and mm.dtype == np.uint8, (mm.shape, mm.dtype)
    assert labels.shape == (n,) and labels.dtype == np.uint8, (labels.shape, labels.dtype)
    assert np.array_equal(mm, plain), "mmap and plain reads differ"
    # the batch files, parsed by the documented layout
    bdir = f"{m}/{split}/batches"
    seen = 0
    for name in sorted(os.listdir(bdir)):
        b = open(f"{bdir}/{name}", "rb").read()
        magic, ver, hs, cnt, bh, bw, bc, lo, io, to, sp, total = struct.unpack_from("<8s10IQ", b)
        assert magic == b"SPRBATCH" and total == len(b), (name, magic, total, len(b))
        lab = np.frombuffer(b, "<u2", cnt, lo)
        ids = np.frombuffer(b, "<u4", cnt, io)
        tiles = np.frombuffer(b, np.uint8, cnt * bh * bw * bc, to).reshape((cnt,) + want_shape[1:])
        assert np.array_equal(ids, np.arange(seen, seen + cnt)), f"{name}: ids"
        assert np.array_equal(tiles, mm[seen:seen + cnt]), f"{name}: tiles differ from images.npy"
        assert np.array_equal(lab, labels[seen:seen + cnt]), f"{name}: labels differ"
        seen += cnt
    assert seen == n, (seen, n)
    # random slices through the memory map (page-straddling reads)
    rng = np.random.default_rng(0)
    for i in rng.integers(0, n, 50):
        assert np.array_equal(mm[i], plain[i])
    print(f"{split}: numpy mmap/plain/batches agree on {n} samples")
try:
    import torch, torchvision
except ImportError:
    print("torchvision missing: ImageFolder part skipped")
    sys.exit(0)
split = "train"
ds = torchvision.datasets.ImageFolder(f"{m}/{split}/by-class")
images = np.load(f"{m}/{split}/images.npy", mmap_mode="r")
labels = np.load(f"{m}/{split}/labels.npy")
assert len(ds) == meta["splits"][split]["count"], (len(ds), meta["splits"][split]["count"])
assert ds.classes == sorted(meta["class_dirs"]), (ds.classes, meta["class_dirs"])
rng = np.random.default_rng(1)
for k in list(rng.integers(0, len(ds), 200)) + [0, len(ds) - 1]:
    path, cls = ds.samples[k]
    i = int(os.path.basename(path).split(".")[0])
    img, target = ds[k]
    arr = np.asarray(img)  # ImageFolder converts to RGB
    want = images[i]
    if c == 1:
        want = np.repeat(want[:, :, None], 3, axis=2)
    assert arr.shape == want.shape and np.array_equal(arr, want), f"sample {i} pixels"
    assert meta["class_dirs"][labels[i]] == ds.classes[target], f"sample {i} class"
print(f"ImageFolder: {len(ds)} samples, {len(ds.classes)} classes, pixels and classes agree")
PY
	cat "$T/py-$s.log"
	# docs/FORMAT.md's numpy reader, run as printed (the mount point put in
	# place of /mnt/fmnist, so the file it names must exist)
	awk '/^### Reading a batch file with numpy/ { f = 1 } f && /^```python/ { p = 1; next }
		p && /^```/ { exit } p' "$SRCDIR/docs/FORMAT.md" >"$T/doc_reader.py"
	grep -q "def read_batch" "$T/doc_reader.py" || fail "no numpy reader in docs/FORMAT.md"
	grep -q '"/mnt/fmnist/train/batches/' "$T/doc_reader.py" ||
		fail "the reader in docs/FORMAT.md no longer reads a file of /mnt/fmnist/train/batches/"
	sed -i "s|\"/mnt/fmnist/|\"$T/mnt-$s/|" "$T/doc_reader.py"
	cat >>"$T/doc_reader.py" <<'PY'
import sys
m = sys.argv[1]
images = np.load(f"{m}/train/images.npy")
all_labels = np.load(f"{m}/train/labels.npy")
n, first = len(ids), int(ids[0])
assert np.array_equal(ids, np.arange(first, first + n)), "ids"
assert np.array_equal(tiles.reshape(images[first:first + n].shape), images[first:first + n]), "tiles"
assert np.array_equal(labels, all_labels[first:first + n]), "labels"
assert x.shape == (n, tiles.shape[3], tiles.shape[1], tiles.shape[2]) and x.dtype == np.float32
print(f"docs/FORMAT.md numpy reader: samples {first}..{first + n - 1}, agree")
PY
	$PY "$T/doc_reader.py" "$T/mnt-$s" >"$T/doc-$s.log" 2>&1 ||
		fail "[$s] docs/FORMAT.md's reader: $(tail -5 "$T/doc-$s.log")"
	cat "$T/doc-$s.log"
	sfs_umount "$T/mnt-$s"
done
echo "PASS"
