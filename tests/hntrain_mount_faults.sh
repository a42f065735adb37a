#!/usr/bin/env bash
# hntrain_mount_faults - hntrain over a spritefs mount that cannot serve all
# it lists. A sheet that fails its checksum: a run whose samples avoid it
# (--limit) trains with the store's weights; a run that needs it stops before
# training, naming labels.npy, the sample range and the EIO with what it means.
# Epoch views the mount cannot serve (a seed it has no room for: ENOSPC after
# 1,024 seeds, here a small one and one of 20 digits): hntrain gathers from images.npy with the
# same weights, and says so once; its banner never claims views it cannot read.
source "$(dirname "$0")/hntrain_common.sh"
if [[ -z ${SPRITEFS:-} || -z ${MOUNT_CHECK:-} ]]; then
	echo "SKIP: spritefs not built"
	exit 77
fi
if [[ ! -c /dev/fuse ]] || ! command -v fusermount3 >/dev/null; then
	echo "SKIP: no /dev/fuse or fusermount3"
	exit 77
fi

"$MKSTORE" "$TMP/s.sprites" --count-train 2000 --count-test 300 --sheet 128 >/dev/null ||
	fail "mkstore"
cp "$TMP/s.sprites" "$TMP/good.sprites"
read -r split first count < <("$MOUNT_CHECK" --corrupt "$TMP/s.sprites" 5) || fail "corrupt"
[[ $split == train && $first -eq 640 && $count -eq 128 ]] ||
	fail "sheet 5 holds $split $first+$count, expected train 640+128"
mount_store "$TMP/s.sprites" "$TMP/mnt"

# --- a bad sheet -----------------------------------------------------------
common=(--model mlp --epochs 2 --batch 32 --seed 3)
ref=$(hash_of --data "$TMP/good.sprites" --limit 640 "${common[@]}")
h=$(hash_of --data "$TMP/mnt" --limit 640 "${common[@]}")
[[ $h == "$ref" ]] || fail "mount --limit 640 (before the bad sheet): weights $h, the store gives $ref"
echo "ok: --limit 640 trains past the bad sheet: $h"
h=$(hash_of --data "$TMP/mnt" --limit 640 --preload "${common[@]}")
[[ $h == "$ref" ]] || fail "mount --limit 640 --preload: weights $h, the store gives $ref"
expect_fail "train/labels.npy: samples 640-767: Input/output error \(the mount could not verify a sheet" \
	--data "$TMP/mnt" "${common[@]}" --test-split none
grep -q "not a .npy file" "$TMP/err" && fail "a read error is reported as a bad .npy file"
expect_fail "labels.npy: sample 640: Input/output error" --data "$TMP/mnt" --limit 641 "${common[@]}"

# --- epoch views that do not open ------------------------------------------
mount_store "$TMP/good.sprites" "$TMP/mnt2"
for s in $(seq 100 1122); do # with the mount's own seed: 1,024, the table is full
	[[ -d $TMP/mnt2/train/epochs/$s ]] || fail "seed $s did not open"
done
views=(--model mlp --epochs 2 --batch 64)
# the mount's views hold --batch 64 in full order: hntrain uses them when it can
views_check() {
	local seed=$1 ref h served=0
	ref=$(hash_of --data "$TMP/good.sprites" "${views[@]}" --seed "$seed")
	ls -d "$TMP/mnt2/train/epochs/$seed" >/dev/null 2>&1 && served=1
	"$HNTRAIN" --data "$TMP/mnt2" "${views[@]}" --seed "$seed" >"$TMP/out" 2>"$TMP/err" || {
		cat "$TMP/err" >&2
		fail "seed $seed: hntrain on the mount failed"
	}
	h=$(sed -n 's/^weights xxh3 \([0-9a-f]*\)$/\1/p' "$TMP/out")
	[[ $h == "$ref" ]] || fail "seed $seed: mount weights '$h', the store gives $ref"
	local notes
	notes=$(grep -c "note: .*epochs/$seed.*gathering from train/images.npy" "$TMP/err")
	if grep -q "^data: .*epoch views" "$TMP/out"; then
		[[ $served -eq 1 ]] || fail "seed $seed: the banner says epoch views, the mount has none"
		[[ $notes -eq 0 ]] || fail "seed $seed: the banner says epoch views, a note says gathering"
		echo "ok: seed $seed: epoch views, weights $h"
	else
		grep -q "^data: .*images.npy gathered" "$TMP/out" || fail "seed $seed: banner: $(head -1 "$TMP/out")"
		[[ $served -eq 0 ]] || fail "seed $seed: the mount serves views, hntrain gathered"
		[[ $notes -eq 1 ]] || {
			cat "$TMP/err" >&2
			fail "seed $seed: gathered without saying so once ($notes notes)"
		}
		echo "ok: seed $seed: gathered, said once: $(grep note: "$TMP/err" | head -c 120)"
	fi
}
views_check 100 # opened above: served
views_check 7
views_check 10000000000000000000
echo "PASS"
