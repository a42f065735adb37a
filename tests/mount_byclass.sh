#!/usr/bin/env bash
# mount_byclass.sh - torchvision's ImageFolder (Debian's, which refuses a
# class folder without an image) over <split>/by-class of splits where
# classes are empty, with the labels of the store: by-class lists exactly
# the classes with samples in the split (the others are not found), a stock
# ImageFolder loads it, and for every sample, the store label of its target
# by the documented rule (dataset.json's by_class_labels, the reader's
# Mount.by_class_labels, and class_dirs.index of the target's class name, all
# three) is labels.npy's; each sample is listed once, and its pixels are
# images.npy's. Over a packed image folder whose val split has no folder for
# one class and only an SVG in another, and whose train split has a class
# (sorting first, so ImageFolder's indices shift) of only an SVG; over mkstore
# stores with unsorted class names and a tiny test split, version 3 (label
# table) and version 2 (by_class_labels null: from the listing).
# Skips without torchvision for /usr/bin/python3.
source "$(dirname "$0")/mount_lib.sh"
source "$(dirname "$0")/py_lib.sh"
need_fuse
[[ -x $PY ]] && $PY -c "import numpy, torchvision" 2>/dev/null ||
	{ echo "SKIP: no numpy/torchvision for /usr/bin/python3"; exit 77; }
echo "reader: $PY_READER"

svg='<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"/>'
"$MKTREE" rgb "$T/src" 4 >"$T/mktree.log" 2>&1 || fail "mktree"
mv "$T/src/test" "$T/src/val"
rm -r "$T/src/val/ant"
rm "$T/src/val/bee/"*
echo "$svg" >"$T/src/val/bee/drawing.svg"
mkdir "$T/src/train/aardvark"
echo "$svg" >"$T/src/train/aardvark/drawing.svg"
"$SPRITEFS_PACK" "$T/src" "$T/folder.sprites" >"$T/pack.log" 2>&1 || fail "spritefs-pack"
printf '%s\n' zulu Alpha mike 7 bravo "x y" delta 0 echo golf >"$T/names"
"$MKSTORE" "$T/v3.sprites" --count-train 300 --count-test 6 --classes 10 --class-names "$T/names" \
	--tile 12x10x1 --sheet 32 >"$T/mkstore.log" 2>&1 || fail "mkstore v3"
"$MKSTORE" "$T/v2.sprites" --count-train 300 --count-test 6 --classes 10 --class-names "$T/names" \
	--tile 12x10x3 --sheet 32 --version 2 >>"$T/mkstore.log" 2>&1 || fail "mkstore v2"

cat >"$T/check.py" <<'PY'
import json, os, sys
import numpy as np
import torchvision
import spritefs

mnt, splits = sys.argv[1], sys.argv[2].split(",")
meta = json.load(open(f"{mnt}/dataset.json"))
m = spritefs.Mount(mnt)
dirs = meta["class_dirs"]
for split in splits:
    labels = np.load(f"{mnt}/{split}/labels.npy")
    images = np.load(f"{mnt}/{split}/images.npy").reshape(len(labels), *m.tile)
    present = sorted(set(labels.tolist()))
    empty = [k for k in range(meta["nclasses"]) if k not in present]
    assert empty, f"{split}: no empty class, nothing tested"
    listed = sorted(os.listdir(f"{mnt}/{split}/by-class"))
    assert listed == sorted(dirs[k] for k in present), (split, listed)
    for k in empty:
        assert not os.path.exists(f"{mnt}/{split}/by-class/{dirs[k]}"), f"{split}: empty class {dirs[k]} found"
    ds = torchvision.datasets.ImageFolder(f"{mnt}/{split}/by-class")
    lab = m.by_class_labels(split)
    by_name = [dirs.index(c) for c in ds.classes]
    assert lab == by_name, (lab, by_name)
    jl = meta["splits"][split]["by_class_labels"]
    assert jl == (lab if meta["label_table"] else None), (jl, lab)
    ids = []
    for path, t in ds.samples:
        i = int(os.path.basename(path).split(".")[0])
        assert lab[t] == labels[i], f"{split}: sample {i}: target {t} -> {lab[t]}, labels.npy {labels[i]}"
        ids.append(i)
    assert sorted(ids) == list(range(len(labels))), f"{split}: samples listed {sorted(ids)[:10]}..."
    shifted = sum(lab[t] != t for t in range(len(lab)))
    ds = torchvision.datasets.ImageFolder(f"{mnt}/{split}/by-class", target_transform=lab.__getitem__)
    for k in sorted({0, len(ds) // 2, len(ds) - 1}):
        img, y = ds[k]
        i = int(os.path.basename(ds.samples[k][0]).split(".")[0])
        want = images[i] if m.tile[2] == 3 else np.repeat(images[i], 3, axis=2)
        assert y == labels[i] and np.array_equal(np.asarray(img), want), f"{split}: sample {i}"
    print(f"{split}: ImageFolder {len(ds)} samples, {len(ds.classes)} of {meta['nclasses']} classes "
          f"({len(empty)} empty, not listed), {shifted} targets differ from their store label, "
          "all mapped to labels.npy's")
PY
check() { # STORE NAME SPLITS
	sfs_mount "$T/spritefs-$2.log" "$1" "$T/m-$2" -o cache=16M
	$PY "$T/check.py" "$T/m-$2" "$3" >"$T/py-$2.log" 2>&1 || fail "[$2] $(tail -6 "$T/py-$2.log")"
	sed "s/^/$2: /" "$T/py-$2.log"
	sfs_umount "$T/m-$2"
}
check "$T/folder.sprites" folder train,val
check "$T/v3.sprites" v3 test
check "$T/v2.sprites" v2 test
echo "PASS"
