#!/usr/bin/env bash
# hntrain_bad_files - one rule for files that are not samples (issue 30): a
# folder of photos holding truncated JPEG and PNG files, a text file, an SVG,
# an empty file and unsupported GIF and BMP files trains to the same weights
# from the folder as from the store spritefs-pack makes of it; both name the
# same files. Without --tile, a folder whose first image is a large photo is
# refused with the --tile to give; --limit takes the same samples from the
# folder as from its store; a class with no test sample is said.
source "$(dirname "$0")/hntrain_common.sh"
: "${SPRITEFS_PACK:?SPRITEFS_PACK not set}"
/usr/bin/python3 -c 'import PIL, numpy' 2>/dev/null || { echo "SKIP: no PIL/numpy"; exit 77; }

/usr/bin/python3 - "$TMP/photos" <<'PY' || fail "making the photo tree"
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(30)
r = sys.argv[1]
for split, n in (("train", 40), ("test", 12)):
    for k, cls in enumerate(("ant", "bee", "cow")):
        os.makedirs(f"{r}/{split}/{cls}")
        for i in range(n):
            h, w = (int(v) for v in rng.integers(9, 120, 2))
            y, x = np.mgrid[:h, :w]
            a = np.stack([(x * (k + 1) * 255 // w), (y * 255 // h), np.full((h, w), 80 * k)], -1)
            a = (a + rng.integers(0, 40, a.shape)).clip(0, 255).astype(np.uint8)
            Image.fromarray(a).save(f"{r}/{split}/{cls}/{i:03d}.{'jpg' if i % 2 else 'png'}")
d = f"{r}/train/ant"
jpg = open(f"{d}/001.jpg", "rb").read()
open(f"{d}/000a-truncated.jpg", "wb").write(jpg[: len(jpg) * 2 // 3])  # mid-scan
open(f"{d}/002a-truncated.png", "wb").write(open(f"{d}/002.png", "rb").read()[:200])
open(f"{d}/003a-notes.txt", "w").write("not an image\n")
open(f"{r}/train/bee/004a.svg", "w").write('<svg xmlns="http://www.w3.org/2000/svg"/>')
open(f"{r}/train/bee/005a-empty.png", "wb").close()
Image.new("RGB", (10, 10)).save(f"{r}/train/cow/006a.gif")
Image.new("RGB", (10, 10)).save(f"{r}/test/cow/007a.bmp")
# WebP: one with alpha (a sample), one cut short (not)
a = (rng.integers(0, 255, (30, 40, 4))).astype(np.uint8)
Image.fromarray(a, "RGBA").save(f"{r}/train/cow/008a.webp", lossless=True)
Image.fromarray(a[:, :, :3]).save(f"{r}/test/ant/009a.webp", quality=80)
open(f"{r}/test/ant/010a-truncated.webp", "wb").write(open(f"{r}/test/ant/009a.webp", "rb").read()[:60])
PY

ph=(--model mlp --epochs 1 --batch 16 --lr 0.05 --seed 5)
for fit in crop pad; do
	"$SPRITEFS_PACK" --tile 24x24x3 --fit $fit "$TMP/photos" "$TMP/p-$fit.sprites" \
		>/dev/null 2>"$TMP/pack.err" || fail "pack ($fit): $(cat "$TMP/pack.err")"
	a=$(hash_of --data "$TMP/p-$fit.sprites" "${ph[@]}")
	"$HNTRAIN" --data "$TMP/photos" --tile 24x24x3 --fit $fit "${ph[@]}" >"$TMP/out" 2>&1 ||
		fail "hntrain on the folder ($fit): $(tail -n 3 "$TMP/out")"
	b=$(sed -n 's/^weights xxh3 //p' "$TMP/out")
	echo "bad files, $fit: store $a  folder $b"
	[[ -n $b && $a == "$b" ]] || fail "a folder with bad files and its store give different weights ($fit)"
	# the same files named by both, each once
	diff <(sed -n 's/^spritefs-pack: skipped \([^:]*\):.*/\1/p' "$TMP/pack.err" | sort) \
		<(sed -n 's/^hntrain: skipped \([^:]*\):.*/\1/p' "$TMP/out" | sort) ||
		fail "spritefs-pack and hntrain skip different files"
	[[ $(grep -c '^hntrain: skipped' "$TMP/out") -eq 8 ]] || fail "hntrain named $(grep -c '^hntrain: skipped' "$TMP/out") files, not 8"
	grep -q "skipped .*/004a.svg: SVG (a vector drawing): not supported" "$TMP/out" || fail "the SVG is not named as one"
	grep -q "008a.webp\|009a.webp" "$TMP/pack.err" && fail "a good WebP was skipped: $(cat "$TMP/pack.err")"
done

# --limit: the same samples from the folder and from its store.
lim=(--model mlp --epochs 1 --batch 8 --lr 0.05 --seed 5 --limit 30 --test-limit 9)
a=$(hash_of --data "$TMP/p-crop.sprites" "${lim[@]}")
b=$(hash_of --data "$TMP/photos" --tile 24x24x3 --fit crop "${lim[@]}")
echo "limit: store $a  folder $b"
[[ $a == "$b" ]] || fail "--limit takes other samples from the folder than from its store"

# No --tile, the first image a large photo: refused with the --tile to give.
/usr/bin/python3 - "$TMP/big" <<'PY' || fail "making the large photo tree"
import os, sys
from PIL import Image
for c in ("a", "b"):
    os.makedirs(f"{sys.argv[1]}/{c}")
    Image.new("RGB", (3000, 2000), (90, 20, 10)).save(f"{sys.argv[1]}/{c}/0.jpg")
PY
rc=0
"$HNTRAIN" --data "$TMP/big" --model mlp --epochs 1 --test-split none >"$TMP/big.out" 2>&1 || rc=$?
((rc != 0)) || fail "a 3000x2000 tile was taken without --tile"
grep -q -- "give --tile 64x64x3" "$TMP/big.out" || fail "no --tile to give: $(cat "$TMP/big.out")"
grep -q "2^31" "$TMP/big.out" && fail "still the parameter-count message: $(cat "$TMP/big.out")"

# A class with no sample in the test split is said, as spritefs-pack and a mount say it.
rm -r "$TMP/photos/test/cow"
"$HNTRAIN" --data "$TMP/photos" --tile 24x24x3 "${ph[@]}" >"$TMP/empty.out" 2>&1 ||
	fail "hntrain with an empty class: $(tail -n 3 "$TMP/empty.out")"
grep -q "note: class cow has no sample in split test" "$TMP/empty.out" ||
	fail "no word of class cow's empty test split: $(cat "$TMP/empty.out")"
grep -q "note: class ant has no sample" "$TMP/empty.out" && fail "a note for a class that has samples"
echo "ok"
