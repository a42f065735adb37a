#!/usr/bin/env bash
# hntrain_mount_faults - hntrain over a spritefs mount that cannot serve all
# it lists. A sheet that fails its checksum: a run whose samples avoid it
# (--limit) trains with the store's weights; a run that needs it stops before
# training, naming labels.npy, the sample range and the EIO with what it means.
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
echo "PASS"
