#!/usr/bin/env bash
# hntrain_determinism - the same --seed gives bit-identical CPU weights from
# every source: a store, the same data exported as a TIFF tree and as a PNG
# tree, a spritefs mount of the store (epoch views and images.npy gather),
# --preload, and any number of loaders; an IDX folder against the store
# spritefs-pack makes of it; and a folder of photos of many sizes, fitted by
# crop and by pad, against its stores. Order belongs to the seed, not to the medium.
source "$(dirname "$0")/hntrain_common.sh"
: "${SPRITEFS_PACK:?SPRITEFS_PACK not set: spritefs-pack is needed to export and pack}"

# A synthetic store, exported to image trees, packed back: the packed store
# lists samples in the tree's order (class folders, then file names), so
# store, trees and mount all hold the same samples in the same order.
"$MKSTORE" "$TMP/syn.sprites" --count-train 700 --count-test 150 --tile 28x28x1 --classes 5 \
	--sheet 128 >/dev/null || fail "mkstore"
"$SPRITEFS_PACK" --export "$TMP/tiff" --format tiff "$TMP/syn.sprites" >/dev/null || fail "export tiff"
"$SPRITEFS_PACK" --export "$TMP/png" --format png "$TMP/syn.sprites" >/dev/null || fail "export png"
"$SPRITEFS_PACK" --sheet 128 "$TMP/tiff" "$TMP/data.sprites" >/dev/null || fail "pack the tiff tree"

common=(--model mlp --epochs 2 --batch 32 --lr 0.05 --seed 7)
ref=$(hash_of --data "$TMP/data.sprites" "${common[@]}")
base=$ref
echo "store:            $ref"
check() { same_hash "$1" "$ref" "${@:2}"; }
check "tiff tree" --data "$TMP/tiff" "${common[@]}"
check "png tree" --data "$TMP/png" "${common[@]}"
check "store preload" --data "$TMP/data.sprites" --preload "${common[@]}"
check "tiff preload" --data "$TMP/tiff" --preload "${common[@]}"
check "1 loader" --data "$TMP/data.sprites" --loaders 1 --queue 1 "${common[@]}"
check "5 loaders" --data "$TMP/tiff" --loaders 5 --queue 3 "${common[@]}"
check "small cache" --data "$TMP/data.sprites" --cache 200K "${common[@]}"
# Pinning threads changes where they run, not what they compute.
t1=$(hash_of --data "$TMP/data.sprites" --threads 1 "${common[@]}")
ref=$t1 check "pinned, 1 thread" --data "$TMP/data.sprites" --threads 1 --affinity 0 \
	--loader-affinity 0 "${common[@]}"

# Another seed must give other weights (the hash is not a constant).
other=$(hash_of --data "$TMP/data.sprites" --model mlp --epochs 2 --batch 32 --lr 0.05 --seed 8)
[[ $other != "$ref" ]] || fail "--seed 8 gives the same weights as --seed 7"

# Photos of many sizes (PNG and JPEG, some large enough for the scaled JPEG
# decode): the folder fitted by hntrain and the store spritefs-pack makes of
# it give the same weights, for crop and for pad; the two fits differ.
if /usr/bin/python3 -c 'import PIL, numpy' 2>/dev/null; then
	/usr/bin/python3 - "$TMP/photos" <<'PY' || fail "making the photo tree"
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(20)
for split, n in (("train", 90), ("test", 30)):
    for k, cls in enumerate(("ant", "bee", "cow")):
        os.makedirs(f"{sys.argv[1]}/{split}/{cls}")
        for i in range(n):
            h, w = (int(v) for v in rng.integers(9, 120, 2))
            if i % 15 == 0:
                h, w = 300, 420
            y, x = np.mgrid[:h, :w]
            a = np.stack([(x * (k + 1) * 255 // w), (y * 255 // h), np.full((h, w), 80 * k)], -1)
            a = (a + rng.integers(0, 40, a.shape)).clip(0, 255).astype(np.uint8)
            ext = "jpg" if i % 2 else "png"
            Image.fromarray(a).save(f"{sys.argv[1]}/{split}/{cls}/{i:03d}.{ext}")
PY
	ph=(--model mlp --epochs 1 --batch 16 --lr 0.05 --seed 5)
	for fit in crop pad; do
		"$SPRITEFS_PACK" -q --tile 24x24x3 --fit $fit "$TMP/photos" "$TMP/photos-$fit.sprites" ||
			fail "pack the photo tree ($fit)"
		a=$(hash_of --data "$TMP/photos-$fit.sprites" "${ph[@]}")
		b=$(hash_of --data "$TMP/photos" --tile 24x24x3 --fit $fit "${ph[@]}")
		echo "photos $fit: store $a  folder $b"
		[[ $a == "$b" ]] || fail "a photo folder and its store give different weights ($fit)"
		eval "photos_$fit=$a"
	done
	[[ $photos_crop != "$photos_pad" ]] || fail "crop and pad give the same weights"
fi

# IDX: Fashion-MNIST's IDX folder against the store spritefs-pack makes of it.
FM=/usr/share/datasets/fashion-mnist
if [[ -f $FM/train-images-idx3-ubyte.gz ]]; then
	"$SPRITEFS_PACK" "$FM" "$TMP/fm.sprites" >/dev/null || fail "pack $FM"
	fm=(--model mlp --limit 1500 --test-limit 300 --epochs 1 --lr 0.05 --seed 3)
	a=$(hash_of --data "$TMP/fm.sprites" "${fm[@]}")
	b=$(hash_of --data "$FM" "${fm[@]}")
	echo "fmnist store: $a  idx: $b"
	[[ $a == "$b" ]] || fail "IDX folder and its store give different weights"
fi

# The mount: epoch views (batch 32 as the mount serves them) and the images.npy gather.
if [[ -z ${SPRITEFS:-} ]]; then
	echo "note: spritefs not built: the mount part is not tested"
	exit 0
fi
if [[ ! -e /dev/fuse ]]; then
	echo "SKIP: no /dev/fuse"
	exit 77
fi
mount_store "$TMP/data.sprites" "$TMP/mnt" -o batch=32,seed=7
"$HNTRAIN" --data "$TMP/mnt" "${common[@]}" >"$TMP/mount.out" 2>&1 || {
	cat "$TMP/mount.out" >&2
	fail "hntrain over the mount"
}
grep -q "epoch views" "$TMP/mount.out" || fail "the mount's epoch views were not used: $(head -n 1 "$TMP/mount.out")"
h=$(sed -n 's/^weights xxh3 //p' "$TMP/mount.out")
echo "mount (views):    $h"
[[ $h == "$ref" ]] || fail "mount (epoch views) gives weights $h, the store gives $ref"
# Views are read once, with O_DIRECT: a second run gets them from the daemon
# again (bytes_served grows by all of them), not from a page cache they filled.
views=0
for f in "$TMP"/mnt/train/epochs/7/{0,1}/*.sprite; do views=$((views + $(stat -c %s "$f"))); done
((views > 0)) || fail "no epoch view files under $TMP/mnt/train/epochs/7"
s1=$(stat_field "$TMP/mnt" bytes_served)
ref=$h check "mount (views) again" --data "$TMP/mnt" "${common[@]}"
s2=$(stat_field "$TMP/mnt" bytes_served)
echo "second run: $((s2 - s1)) bytes served, views hold $views"
((s2 - s1 >= views)) || fail "a second run over the views was served $((s2 - s1)) bytes, fewer than the views' $views: they were not read with O_DIRECT"
# --batch 64 (not the mount's 32): gathered from images.npy in permutation order.
r64=$(hash_of --data "$TMP/data.sprites" --model mlp --epochs 2 --batch 64 --lr 0.05 --seed 7)
ref=$r64 check "mount (gather)" --data "$TMP/mnt" --model mlp --epochs 2 --batch 64 --lr 0.05 --seed 7
ref=$r64 check "mount preload" --data "$TMP/mnt" --preload --model mlp --epochs 2 --batch 64 --lr 0.05 --seed 7
# Windowed order over the mount (sheet size from dataset.json) equals the store's.
w=(--model mlp --epochs 2 --batch 32 --lr 0.05 --seed 7 --window 2)
ref=$(hash_of --data "$TMP/data.sprites" "${w[@]}")
check "mount windowed" --data "$TMP/mnt" "${w[@]}"
[[ $ref != "$base" ]] || fail "windowed order gives the same weights as the full shuffle"
echo "PASS"
