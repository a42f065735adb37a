#!/usr/bin/env bash
# hntrain_augment - --augment is seeded like the order: the same weights
# from a store, its image tree, a spritefs mount, --preload and any
# --loaders (rrc, crop and flip together); other weights
# than without it; the augmented tiles equal a numpy reference written from
# docs/HNTRAIN.md; a resume with augmentation ends where an uninterrupted
# run does, and one with another --augment is refused; bad lists exit 2.
source "$(dirname "$0")/hntrain_common.sh"

"$MKSTORE" "$TMP/syn.sprites" --count-train 600 --count-test 100 --tile 16x12x3 --classes 4 \
	--sheet 64 >/dev/null || fail "mkstore"
# Exported and packed back, so that the store lists samples in the tree's order.
"$SPRITEFS_PACK" --export "$TMP/png" --format png "$TMP/syn.sprites" >/dev/null || fail "export"
"$SPRITEFS_PACK" --sheet 64 "$TMP/png" "$TMP/d.sprites" >/dev/null || fail "pack the png tree"
common=(--model mlp --epochs 2 --batch 32 --lr 0.05 --seed 11 --augment rrc:0.5,crop:3,flip)

ref=$(hash_of --data "$TMP/d.sprites" "${common[@]}")
echo "store:        $ref"
check() { same_hash "$1" "$ref" "${@:2}"; }
check "png tree" --data "$TMP/png" "${common[@]}"
check "tree preload" --data "$TMP/png" --preload "${common[@]}"
check "preload" --data "$TMP/d.sprites" --preload "${common[@]}"
check "1 loader" --data "$TMP/d.sprites" --loaders 1 --queue 1 "${common[@]}"
check "2 loaders" --data "$TMP/d.sprites" --loaders 2 --queue 5 "${common[@]}"
if [[ -n ${SPRITEFS:-} && -e /dev/fuse ]] && command -v fusermount3 >/dev/null; then
	mount_store "$TMP/d.sprites" "$TMP/mnt"
	check "mount" --data "$TMP/mnt" "${common[@]}"
	check "mount 1 ld" --data "$TMP/mnt" --loaders 1 "${common[@]}"
else
	echo "no FUSE here: the mount is not compared"
fi
plain=$(hash_of --data "$TMP/d.sprites" --model mlp --epochs 2 --batch 32 --lr 0.05 --seed 11)
[[ $plain != "$ref" ]] || fail "--augment rrc:0.5,crop:3,flip gives the weights of no augmentation"
flip=$(hash_of --data "$TMP/d.sprites" --model mlp --epochs 2 --batch 32 --lr 0.05 --seed 11 \
	--augment flip)
[[ $flip != "$ref" && $flip != "$plain" ]] || fail "--augment flip is not its own augmentation"

# The log has the augmentation time, apart from data wait.
"$HNTRAIN" --quiet --data "$TMP/d.sprites" "${common[@]}" --log "$TMP/log.json" >/dev/null ||
	fail "hntrain --log"
grep -q '"augment_s": ' "$TMP/log.json" || fail "no augment_s in the log: $(cat "$TMP/log.json")"

# The numpy reference: the first batch without and with --augment.
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
	for a in none crop:3,flip crop:5 flip rrc:0.35 rrc:0.08,crop:2,flip; do
		aug=()
		[[ $a == none ]] || aug=(--augment "$a")
		HNTRAIN_DUMP_BATCH="$TMP/b-$a.npy" hash_of --data "$TMP/d.sprites" --model mlp \
			--epochs 1 --batch 32 --lr 0.05 --seed 11 "${aug[@]}" >/dev/null
	done
	for a in crop:3,flip crop:5 flip rrc:0.35 rrc:0.08,crop:2,flip; do
		/usr/bin/python3 - "$TMP/b-none.npy" "$TMP/b-$a.npy" "$a" 11 0 <<'PY' ||
import math
import sys
import numpy as np

M = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


plain, got, spec, seed, epoch = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
crop = 0
rrc = 0
flip = False
for t in spec.split(","):
    if t == "flip":
        flip = True
    elif t.startswith("rrc:"):
        rrc = round(float(t[4:]) * 10000)
    else:
        crop = int(t.split(":")[1])
n, h, w, c = plain.shape
want = plain.copy()
flips = 0
for pos in range(n):
    key = splitmix64(splitmix64(splitmix64(seed ^ 0x6175676D656E7400) ^ epoch) ^ pos)
    t = plain[pos]
    if rrc:
        s16 = rrc * 65536 // 10000
        A = s16 + (((65536 - s16) * (splitmix64((key + 3) & M) >> 48)) >> 16)
        Q = 49152 + (((87381 - 49152) * (splitmix64((key + 4) & M) >> 48)) >> 16)
        ch = min(max(math.isqrt(((h * h * A) >> 16) * Q >> 16), 1), h)
        cw = min(max(math.isqrt((((w * w * A) >> 16) << 16) // Q), 1), w)
        y0 = splitmix64((key + 5) & M) % (h - ch + 1)
        x0 = splitmix64((key + 6) & M) % (w - cw + 1)
        ys = y0 + np.arange(h) * ch // h
        xs = x0 + np.arange(w) * cw // w
        t = t[ys][:, xs]
    if crop:
        dy = splitmix64(key) % (2 * crop + 1)
        dx = splitmix64((key + 1) & M) % (2 * crop + 1)
        padded = np.pad(t, ((crop, crop), (crop, crop), (0, 0)))
        t = padded[dy:dy + h, dx:dx + w]
    if flip and splitmix64((key + 2) & M) >> 63:
        t = t[:, ::-1]
        flips += 1
    want[pos] = t
if got.shape != want.shape or not np.array_equal(got, want):
    bad = np.argwhere((got != want).reshape(n, -1).any(1)).ravel() if got.shape == want.shape else "shape"
    sys.exit(f"{spec}: hntrain's tiles differ from the reference (samples {bad})")
if np.array_equal(got, plain):
    sys.exit(f"{spec}: the augmented batch equals the plain one")
print(f"{spec}: {n} tiles equal the numpy reference ({flips} flipped)")
PY
			fail "the numpy reference of --augment $a"
	done
else
	echo "no numpy: the reference is not compared"
fi

# A resume keeps the augmentation: 2 + 2 epochs equal 4 in one go.
args=(--data "$TMP/d.sprites" --model mlp --epochs 4 --batch 32 --lr 0.05 --seed 3
	--augment rrc:0.35,crop:2,flip)
full=$(hash_of "${args[@]}")
hash_of "${args[@]}" --stop-after 2 --checkpoint "$TMP/a.ckpt" >/dev/null
resumed=$(hash_of --data "$TMP/d.sprites" --resume "$TMP/a.ckpt")
echo "4 epochs $full, 2 + resume 2: $resumed"
[[ $resumed == "$full" ]] || fail "a resumed augmented run ends with $resumed, not $full"
again=$(hash_of --data "$TMP/d.sprites" --resume "$TMP/a.ckpt" --augment flip,crop:2,rrc:0.350)
[[ $again == "$full" ]] || fail "the same --augment spelt otherwise changed the resume"
expect_fail "augment.*crop:2,flip.*flip" --data "$TMP/d.sprites" --resume "$TMP/a.ckpt" \
	--augment flip
hash_of --data "$TMP/d.sprites" --model mlp --epochs 2 --batch 32 --seed 3 --stop-after 1 \
	--checkpoint "$TMP/p.ckpt" >/dev/null
expect_fail "augment.*none" --data "$TMP/d.sprites" --resume "$TMP/p.ckpt" --augment flip

# Usage errors name the option and exit 2.
usage() {
	local pat=$1 rc=0
	shift
	"$HNTRAIN" --data "$TMP/d.sprites" --epochs 1 "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
	[[ $rc -eq 2 ]] || fail "hntrain $* exited $rc, expected 2: $(cat "$TMP/err")"
	grep -qE -- "$pat" "$TMP/err" || fail "hntrain $*: stderr does not say '$pat': $(cat "$TMP/err")"
	echo "ok: exit 2, $(head -n 1 "$TMP/err")"
}
usage "--augment.*unknown.*rotate" --augment rotate
usage "--augment.*crop" --augment crop:x
usage "--augment.*crop" --augment crop:
usage "--augment.*crop" --augment crop:-1
usage "--augment" --augment ""
usage "--augment rrc:0.*rrc" --augment rrc:0
usage "--augment rrc:1.5.*rrc" --augment rrc:1.5
usage "--augment rrc:0.12345.*decimals" --augment rrc:0.12345
usage "--augment crop:12.*12x12|--augment crop:12.*16x12" --augment crop:12
usage "--augment crop:16" --augment crop:16,flip
echo "ok"
