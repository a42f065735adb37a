#!/usr/bin/env bash
# hntrain_skip - an image folder with files that do not decode: each is named
# once on stderr and left out, the run goes on and counts them (output and
# --log); --strict stops at the first instead. Training stays deterministic,
# --preload over the tree trains exactly as the store spritefs-pack makes of
# it (both leave the bad files out before the order is drawn), and so does
# the tree without --preload (the files are checked at open). Names
# with control bytes are shown escaped, and entries that are not images of a
# class folder (a file beside them, a dangling link, a FIFO) are named as
# ignored and counted, as spritefs-pack names them; --strict stops at one
# that is neither a file nor a folder.
source "$(dirname "$0")/hntrain_common.sh"
: "${MKTREE:?MKTREE not set (run through meson test)}"

# 3 classes x 6 good images of mixed sizes, and per class 6 files that do
# not decode (truncated TIFF and PNG, an empty file, a text file, random
# bytes, half a JPEG); hidden files are not samples.
read -r _ good _ bad < <("$MKTREE" mixed "$TMP/tree" 6) || fail "mktree"
[[ $good == 18 && $bad == 18 ]] || fail "mktree made good $good bad $bad, expected 18 and 18"
COMMON=(--data "$TMP/tree" --tile 20x24x1 --model mlp --batch 4 --test-split none)

"$HNTRAIN" "${COMMON[@]}" --epochs 2 --log "$TMP/log.json" >"$TMP/out" 2>"$TMP/err" ||
	{ cat "$TMP/err" >&2; fail "hntrain over a tree with bad files exited $?"; }
# Every bad file named exactly once over both epochs, with what is wrong; no good file named.
named=$(sed -n 's/^hntrain: skipped \([^:]*\): .*/\1/p' "$TMP/err" | sort)
want=$(find "$TMP/tree" -name 'zz-*' | sort)
[[ $named == "$want" ]] || {
	cat "$TMP/err" >&2
	fail "stderr does not name each bad file once"
}
grep -q "zz-empty.png: empty file" "$TMP/err" || fail "the reason for an empty file is missing"
grep -q "zz-notes.txt: not a PNG/TIFF/JPEG/PNM file" "$TMP/err" || fail "the reason for a text file is missing"
grep -q "^skipped 18 image files that did not decode" "$TMP/out" || {
	cat "$TMP/out" >&2
	fail "the run does not report 18 skipped files"
}
python3 - "$TMP/log.json" <<'PY' || fail "--log does not count the skipped files"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
epochs, final = rows[:-1], rows[-1]
assert [r["samples"] for r in epochs] == [18, 18], [r["samples"] for r in epochs]
assert final["skipped_files"] == 18 and final["samples"] == 36, final
assert final["steps"] == 2 * 5, final  # 18 samples (the bad files left out at open) / batch 4
PY
echo "ok: 18 bad files named once and left out; the log counts them"

h1=$(hash_of "${COMMON[@]}" --epochs 2)
h2=$(hash_of "${COMMON[@]}" --epochs 2 --loaders 1)
[[ $h1 == "$h2" ]] || fail "skipping is not deterministic: $h1 vs $h2"
echo "ok: same weights with 2 loaders and 1 ($h1)"

expect_fail "zz-[a-z]+\.(tif|png|jpg|txt): .*--strict" "${COMMON[@]}" --strict

if [[ -n ${SPRITEFS_PACK:-} ]]; then
	"$SPRITEFS_PACK" -q --tile 20x24x1 "$TMP/tree" "$TMP/tree.sprites" 2>/dev/null ||
		fail "spritefs-pack of the tree"
	hp=$(hash_of "${COMMON[@]}" --epochs 2 --preload)
	hs=$(hash_of --data "$TMP/tree.sprites" --model mlp --batch 4 --test-split none --epochs 2)
	[[ $hp == "$hs" ]] || fail "--preload over the tree ($hp) and its store ($hs) train apart"
	echo "ok: --preload over the tree trains as its store does ($hp)"
fi

# Batches of one with --accum 2: the bad files are left out at open (as the
# packer leaves them out), so no batch is empty: 18 samples, 9 steps an epoch.
"$HNTRAIN" "${COMMON[@]}" --batch 1 --accum 2 --epochs 2 --log "$TMP/acc.json" \
	>/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "--batch 1 --accum 2 exited $?"; }
python3 - "$TMP/acc.json" <<'PY' || fail "--batch 1 --accum 2 miscounted"
import json, sys
final = [json.loads(l) for l in open(sys.argv[1])][-1]
assert final["steps"] == 18 and final["samples"] == 36, final
PY
echo "ok: batches of one, accum 2: 18 steps over 2 epochs"

# The tile shape comes from the first file that decodes, past a bad first one.
mkdir -p "$TMP/first/a" "$TMP/first/b"
echo "not an image" >"$TMP/first/a/0.png"
cp "$TMP/tree/ant/f0000.tif" "$TMP/first/a/1.tif"
cp "$TMP/tree/bee/f0000.tif" "$TMP/first/b/0.tif"
"$HNTRAIN" --data "$TMP/first" --model mlp --batch 2 --test-split none >"$TMP/out" \
	2>"$TMP/err" || { cat "$TMP/err" >&2; fail "a bad first file stopped the run"; }
grep -q "first/a/0.png" "$TMP/err" || fail "the bad first file is not named"
echo "ok: a bad first file is skipped for the tile shape too"

# Nothing decodes: a clear error, not an empty run.
mkdir -p "$TMP/none/a"
echo "not an image" >"$TMP/none/a/x.png"
expect_fail "no file of the training split decodes" --data "$TMP/none" --model mlp

# Odd names and entries (mktree odd; test_pack.sh checks the same lines from spritefs-pack).
read -r _ good _ bad < <("$MKTREE" odd "$TMP/odd") || fail "mktree odd"
ODD=(--data "$TMP/odd" --tile 20x24x1 --model mlp --batch 2)
timeout 120 "$HNTRAIN" "${ODD[@]}" --log "$TMP/odd.json" >"$TMP/out" 2>"$TMP/err" ||
	{ cat -A "$TMP/err" >&2; fail "hntrain over the odd tree exited $?"; }
want="ignored $TMP/odd/README.md: not in a class folder
ignored $TMP/odd/train/notes\xff.txt: not in a class folder
ignored $TMP/odd/train/ant/gone.tif: a dangling symbolic link
ignored $TMP/odd/train/ant/pipe.png: a FIFO, not a file or folder"
got=$(sed -n 's/^hntrain: \(ignored .*\)/\1/p' "$TMP/err")
[[ $got == "$want" ]] || fail "ignored entries: $(diff <(echo "$want") <(echo "$got"))"
want="skipped $TMP/odd/train/ant/bad\nname.png: not a PNG/TIFF/JPEG/PNM file
skipped $TMP/odd/train/bee/\x1b[31mred\x1b[0m.png: not a PNG/TIFF/JPEG/PNM file"
got=$(sed -n 's/^hntrain: \(skipped .*\)/\1/p' "$TMP/err" | LC_ALL=C sort)
[[ $got == "$want" ]] || fail "skipped files: $(diff <(echo "$want") <(echo "$got"))"
LC_ALL=C grep -v "^hntrain: [ -~]*$" "$TMP/err" >"$TMP/raw" &&
	fail "stderr lines with raw control bytes, or broken: $(cat -A "$TMP/raw")"
grep -qx "ignored 4 entries of the image folder, not images in class folders (named above; --strict stops at one that is neither a file nor a folder)" "$TMP/out" ||
	{ cat "$TMP/out" >&2; fail "the run does not report 4 ignored entries"; }
python3 - "$TMP/odd.json" "$good" "$bad" <<'PY' || fail "--log does not count the ignored entries"
import json, sys
final = [json.loads(l) for l in open(sys.argv[1])][-1]
good, bad = int(sys.argv[2]), int(sys.argv[3])
assert final["ignored_entries"] == 4 and final["skipped_files"] == bad, final
assert final["samples"] == good - 2, final  # the 2 test images are not trained on
PY
echo "ok: odd names escaped, 4 ignored entries named once and counted"
expect_fail "^hntrain: --data: $TMP/odd/train/ant/gone.tif: a dangling symbolic link \(--strict" \
	"${ODD[@]}" --strict
rm "$TMP/odd/train/ant/gone.tif"
expect_fail "^hntrain: --data: $TMP/odd/train/ant/pipe.png: a FIFO, not a file or folder \(--strict" \
	"${ODD[@]}" --strict
echo "PASS"
