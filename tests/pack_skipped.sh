#!/usr/bin/env bash
# pack_skipped.sh - nothing leaves a data set without a name (issue 30): a
# folder with truncated, non-image and unsupported files and a class with no
# test image, packed by spritefs-pack and by a first-use mount:
#   - every skipped file is named on stderr (12 of them: more than the 10 a
#     first-use pack used to name), the summary line counts them, and the
#     store keeps the list: spritefs-pack --info --skipped prints it, a mount
#     serves the same bytes as .spritefs/skipped.txt;
#   - --info and dataset.json give the samples of each class in each split;
#   - the class without a test sample is warned of at pack and at mount;
#   - a version-2 store (no list) and a store with nothing skipped say none.
source "$(dirname "$0")/mount_lib.sh"
need_fuse
: "${SPRITEFS_PACK:?}"

# A clean tree: a synthetic store exported as PNG (3 classes, train and test).
"$MKSTORE" "$T/syn.sprites" --count-train 60 --count-test 30 --tile 12x12x1 --classes 3 \
	--sheet 16 >/dev/null || fail "mkstore"
"$SPRITEFS_PACK" -q --export "$T/src" --format png "$T/syn.sprites" || fail "export"
mapfile -t classes < <(ls "$T/src/train")
((${#classes[@]} == 3)) || fail "expected 3 classes, found ${classes[*]}"
c0=${classes[0]} c2=${classes[2]}
first=$(ls "$T/src/train/$c0" | head -n 1)
"$SPRITEFS_PACK" -q --tile 12x12x1 "$T/src" "$T/clean.sprites" || fail "pack the clean tree"

# The bad files: 12 of them, in two classes; and no test image for the last class.
bad=()
for i in 01 02 03; do
	head -c 90 "$T/src/train/$c0/$first" >"$T/src/train/$c0/z$i-truncated.png"
	bad+=("train/$c0/z$i-truncated.png")
done
for i in 04 05 06; do
	echo "notes $i" >"$T/src/train/$c0/z$i-notes.txt"
	bad+=("train/$c0/z$i-notes.txt")
done
for i in 07 08 09; do
	echo '<svg xmlns="http://www.w3.org/2000/svg"/>' >"$T/src/train/$c2/z$i.svg"
	bad+=("train/$c2/z$i.svg")
done
for i in 10 11 12; do
	: >"$T/src/train/$c2/z$i-empty.png"
	bad+=("train/$c2/z$i-empty.png")
done
rm -r "$T/src/test/$c2"

"$SPRITEFS_PACK" --tile 12x12x1 "$T/src" "$T/s.sprites" >"$T/pack.out" 2>"$T/pack.err" ||
	fail "pack: $(cat "$T/pack.err")"
grep -q "skipped 12," "$T/pack.out" || fail "the summary does not count 12 skipped: $(cat "$T/pack.out")"
for b in "${bad[@]}"; do
	grep -q "skipped $T/src/$b: " "$T/pack.err" || fail "spritefs-pack did not name $b"
done
grep -q "warning: class $c2 has no sample in split test" "$T/pack.err" ||
	fail "no warning of class $c2's empty test split at pack: $(cat "$T/pack.err")"
grep -q "warning: class" <("$SPRITEFS_PACK" --tile 12x12x1 "$T/src" "$T/s2.sprites" 2>&1 | grep -v "$c2") &&
	fail "a warning for a class that has samples"

# --info: per-class counts, the skipped count; --info --skipped: the list.
"$SPRITEFS_PACK" --info "$T/s.sprites" >"$T/info" || fail "--info"
n0=$(ls "$T/src/train/$c0" | grep -c '^[0-9]')
grep -q "^class: *$c0: train $n0, test [1-9]" "$T/info" || fail "--info: no per-class line for $c0: $(cat "$T/info")"
grep -q "^class: *$c2: train [1-9][0-9]*, test 0 (none: warning)" "$T/info" ||
	fail "--info does not mark $c2 as empty in test: $(grep class "$T/info")"
grep -q "^skipped: *12 source files" "$T/info" || fail "--info: skipped count: $(grep skipped "$T/info")"
"$SPRITEFS_PACK" --info --skipped "$T/s.sprites" >"$T/list" || fail "--info --skipped"
[[ $(wc -l <"$T/list") -eq 12 ]] || fail "--info --skipped gives $(wc -l <"$T/list") lines, not 12"
for b in "${bad[@]}"; do
	grep -q "^$b"$'\t'"." "$T/list" || fail "--info --skipped does not list $b"
done
grep -q $'^train/'"$c0"$'/z01-truncated.png\tbad PNG: read beyond end of data$' "$T/list" ||
	fail "a truncated PNG's reason: $(cat "$T/list")"
grep -q $'^train/'"$c2"$'/z07.svg\tSVG (a vector drawing): not supported' "$T/list" ||
	fail "the SVG is not named as one: $(cat "$T/list")"
# No list: a clean store and a version-2 store.
"$SPRITEFS_PACK" --info "$T/clean.sprites" | grep -q "^skipped: *0 source" || fail "clean store: skipped not 0"
[[ -z $("$SPRITEFS_PACK" --info --skipped "$T/clean.sprites") ]] || fail "clean store lists skipped files"
"$SPRITEFS_PACK" -q --store-version 2 --tile 12x12x1 "$T/src" "$T/v2.sprites" 2>/dev/null || fail "pack v2"
"$SPRITEFS_PACK" --info "$T/v2.sprites" | grep -q "^per class: *not recorded" || fail "v2 store: per-class line"

# The mount: skipped.txt, dataset.json's counts, the warning.
sfs_mount "$T/mount.log" "$T/s.sprites" "$T/mnt"
cmp -s "$T/list" "$T/mnt/.spritefs/skipped.txt" || fail ".spritefs/skipped.txt differs from --info --skipped"
[[ $(stat -c %s "$T/mnt/.spritefs/skipped.txt") -eq $(stat -c %s "$T/list") ]] || fail "skipped.txt size"
ls "$T/mnt/.spritefs" | grep -qx skipped.txt || fail "skipped.txt not listed in .spritefs"
grep -q "warning: 1 class has no sample in split test: $c2" "$T/mount.log" || fail "no warning at mount: $(cat "$T/mount.log")"
grep -q "12 source files were skipped at pack: $T/mnt/.spritefs/skipped.txt" "$T/mount.log" ||
	fail "the mount does not say where the skipped files are named: $(cat "$T/mount.log")"
/usr/bin/python3 - "$T/mnt" "$c2" <<'PY' || fail "dataset.json counts"
import json, sys
import numpy as np
mnt, c2 = sys.argv[1], sys.argv[2]
d = json.load(open(f"{mnt}/dataset.json"))
assert d["skipped"] == 12 and d["skipped_list"] == ".spritefs/skipped.txt", d["skipped"]
for split, v in d["splits"].items():
    labels = np.load(f"{mnt}/{split}/labels.npy")
    want = np.bincount(labels, minlength=d["nclasses"]).tolist()
    assert v["class_counts"] == want, (split, v["class_counts"], want)
assert d["splits"]["test"]["class_counts"][d["classes"].index(c2)] == 0
PY
sfs_umount "$T/mnt"
sfs_mount "$T/clean.log" "$T/clean.sprites" "$T/mnt"
[[ ! -e $T/mnt/.spritefs/skipped.txt ]] || fail "a store with nothing skipped has skipped.txt"
grep -q '"skipped": 0, "skipped_list": null' "$T/mnt/dataset.json" || fail "clean dataset.json"
sfs_umount "$T/mnt"

# A first-use mount of the folder names all 12 (not the first 10) and serves the list.
sfs_mount "$T/first.log" "$T/src" "$T/mnt" -o cachedir="$T/cache",tile=12x12x1
n=$(grep -c "^spritefs: skipping " "$T/first.log")
((n == 12)) || fail "the first-use pack named $n skipped files, not 12: $(cat "$T/first.log")"
[[ $(wc -l <"$T/mnt/.spritefs/skipped.txt") -eq 12 ]] || fail "first-use mount: skipped.txt"
sfs_umount "$T/mnt"
echo "ok"
