#!/usr/bin/env bash
# test_pack.sh - spritefs-pack end to end.
#
#   test_pack.sh SPRITEFS_PACK MKTREE
#
# Builds small trees with mktree (gray and RGB lossless trees, a mixed tree
# with corrupt/truncated/empty/non-image files, IDX files plain and gzip),
# packs them and checks: summary counts and skipped-file lines, --strict,
# symbolic links followed and link loops entered once and reported, names
# with control bytes shown escaped, entries that are not images of a class
# folder (a file beside them, a dangling link, a FIFO) named as ignored and
# counted, and --strict stopping at those that are neither file nor folder,
# the roundtrip (pack -> --export png -> pixels and labels equal to an
# independent decode of the sources with PIL + numpy, under /usr/bin/python3;
# only that comparison is skipped when those are missing), identical store
# bytes with --jobs 1 and --jobs 4, --export into a new, empty or (only with
# --force) non-empty folder, --verify on a good store and on stores
# with a flipped byte in a sheet, the index and the header, and a truncated
# one, the errors for a missing source, an unwritable store and an empty set,
# usage errors (exit 2: a --name too long, an option the mode does not use),
# and the real Fashion-MNIST (60000/10000, 10 classes, 28x28x1) when the
# Debian package is installed.
set -uo pipefail

PACK=${1:?spritefs-pack path}
MKTREE=${2:?mktree path}
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
PY=/usr/bin/python3

NAME=test_pack
source "$(dirname "$0")/pack_lib.sh"

have_py=0
if [[ -x $PY ]] && $PY -c 'import PIL, numpy' 2>/dev/null; then
	have_py=1
else
	echo "note: $PY with PIL and numpy not found: pixel comparisons skipped" >&2
fi

# Independent decode + comparison with an export (see the file header).
compare_py() { # SRC EXPORT MODE(gray|rgb|idx)
	$PY - "$@" <<'EOF'
import os, sys, gzip
import numpy as np
from PIL import Image
src, exp, mode = sys.argv[1:4]

def load(path):
    im = Image.open(path)
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
        a = np.array(im).astype(np.uint32) >> 8
        return a.astype(np.uint8)
    if mode == "gray":
        return np.array(im.convert("L"))
    return np.array(im.convert("RGB"))

def idx(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)

bad = 0
if mode == "idx":
    pre = {"train": "train", "test": "t10k"}
    for split, p in pre.items():
        base = os.path.join(src, p)
        ext = ".gz" if os.path.exists(base + "-images-idx3-ubyte.gz") else ""
        ims = idx(base + "-images-idx3-ubyte" + ext)
        labs = idx(base + "-labels-idx1-ubyte" + ext)
        names = sorted(os.listdir(os.path.join(exp, split)))
        got = {}
        for c in names:
            for f in os.listdir(os.path.join(exp, split, c)):
                got[int(f.split(".")[0])] = (c, os.path.join(exp, split, c, f))
        n = len(got)
        if n == 0 or max(got) != n - 1:
            print("export of %s: %d files, ids not 0..n-1" % (split, n)); bad += 1; continue
        for i in range(n):
            c, f = got[i]
            a = np.array(Image.open(f))
            if c != names[labs[i]] and not (c.isdigit() and int(c) == labs[i]):
                print("%s %d: class %s, IDX label %d" % (split, i, c, labs[i])); bad += 1; break
            if not np.array_equal(a, ims[i]):
                print("%s %d: pixels differ from the IDX file" % (split, i)); bad += 1; break
        print("idx %s: %d samples compared" % (split, n))
    sys.exit(1 if bad else 0)

classes = sorted(set(c for s in os.listdir(src) for c in os.listdir(os.path.join(src, s))))
for split in sorted(os.listdir(src)):
    files = []
    for c in sorted(os.listdir(os.path.join(src, split)), key=lambda s: s.encode()):
        for f in sorted(os.listdir(os.path.join(src, split, c)), key=lambda s: s.encode()):
            if not f.startswith("."):
                files.append((c, os.path.join(src, split, c, f)))
    got = {}
    for c in os.listdir(os.path.join(exp, split)):
        for f in os.listdir(os.path.join(exp, split, c)):
            got[int(f.split(".")[0])] = (c, os.path.join(exp, split, c, f))
    if len(got) != len(files):
        print("%s: %d exported, %d sources" % (split, len(got), len(files))); bad += 1; continue
    for i, (c, f) in enumerate(files):
        gc, gf = got[i]
        if gc != c:
            print("%s %d: class %s, source class %s (%s)" % (split, i, gc, c, f)); bad += 1; break
        want = load(f).astype(int)
        have = np.array(Image.open(gf)).astype(int)
        tol = 3 if f.endswith(".jpg") else 0
        if want.shape != have.shape or np.abs(want - have).max() > tol:
            print("%s %d: pixels differ from %s (shape %s vs %s, max diff %s)" % (
                split, i, f, want.shape, have.shape,
                np.abs(want - have).max() if want.shape == have.shape else "-"))
            bad += 1; break
    print("%s: %d samples compared" % (split, len(files)))
sys.exit(1 if bad else 0)
EOF
}

# ---- lossless trees: roundtrip against PIL ------------------------------------
for mode in gray rgb; do
	"$MKTREE" $mode "$T/$mode" 12 >"$T/counts" || { fail "mktree $mode"; continue; }
	read -r _ good _ bad <"$T/counts"
	expect_rc 0 "$PACK" --jobs 2 "$T/$mode" "$T/$mode.sprites" || continue
	grep -q "found $good, packed $good, skipped 0" "$T/out" ||
		fail "$mode: summary wrong: $(head -1 "$T/out")"
	grep -q "MB of source files in, .* MB store out (the store is [0-9.]*x the source's size)" "$T/out" ||
		fail "$mode: size line: $(grep MB "$T/out")"
	want_c=$([[ $mode == gray ]] && echo 1 || echo 3)
	expect_rc 0 "$PACK" --info "$T/$mode.sprites" &&
		grep -q "tile: *20x24x$want_c" "$T/out" || fail "$mode: tile shape not 20x24x$want_c"
	grep -q "classes: *3: ant, bee, cat" "$T/out" || fail "$mode: classes: $(grep classes "$T/out")"
	grep -q "split: *train 36 samples" "$T/out" || fail "$mode: train count"
	grep -q "split: *test 18 samples" "$T/out" || fail "$mode: test count"
	expect_rc 0 "$PACK" --export "$T/$mode.png" --format png "$T/$mode.sprites" || continue
	n=$(find "$T/$mode.png" -type f -name '*.png' | wc -l)
	[[ $n -eq $good ]] || fail "$mode: exported $n png files, want $good"
	if ((have_py)); then
		compare_py "$T/$mode" "$T/$mode.png" $mode >"$T/cmp" 2>&1 ||
			{ fail "$mode: roundtrip differs from PIL"; sed 's/^/    /' "$T/cmp" >&2; }
	fi
done

# ---- symbolic links: followed inside the class folder; a loop is entered once and
# reported; a link out of the class folder (here into another class) is refused
# and named (docs/FORMAT.md, "Symbolic links in a source tree") ------------------
"$MKTREE" gray "$T/links" 4 >"$T/counts" || fail "mktree links"
read -r _ good _ _ <"$T/counts"
mkdir "$T/links/test/bee/sub"
cp "$(find "$T/links/test/bee" -maxdepth 1 -type f | sort | head -1)" "$T/links/test/bee/sub/x.tif"
ln -s . "$T/links/train/ant/self"
ln -s .. "$T/links/test/bee/sub/back"
ln -s "$T/links/train/cat" "$T/links/train/ant/cats" # class cat again as ant: refused
want=$((good + 1))
if expect_rc 0 timeout 60 "$PACK" "$T/links" "$T/links.sprites"; then
	grep -q "found $want, packed $want, skipped 0, ignored 3$" "$T/out" ||
		fail "links: summary: $(grep found "$T/out")"
	grep -q "^spritefs-pack: ignored $T/links/train/ant/cats: a symbolic link out of its class folder" "$T/out" ||
		fail "links: the link into class cat was not refused: $(head -5 "$T/out")"
	for l in train/ant/self test/bee/sub/back; do
		grep -q "^spritefs-pack: ignored $T/links/$l: a symbolic link back to a folder above it" "$T/out" ||
			fail "links: loop $l not reported: $(head -5 "$T/out")"
	done
fi

# ---- odd names and entries: shown escaped; what is not an image is named -------
# mktree odd: "bad\nname.png" and "\e[31mred\e[0m.png" do not decode; README.md,
# train/notes\xff.txt, a dangling link and a FIFO are not images of a class folder.
"$MKTREE" odd "$T/odd" >"$T/counts" || fail "mktree odd"
read -r _ good _ bad <"$T/counts"
if expect_rc 0 timeout 60 "$PACK" --jobs 2 "$T/odd" "$T/odd.sprites"; then
	grep -q "^spritefs-pack: found $((good + bad)), packed $good, skipped $bad, ignored 4$" "$T/out" ||
		fail "odd: summary: $(grep found "$T/out")"
	want="ignored $T/odd/README.md: not in a class folder
ignored $T/odd/train/notes\xff.txt: not in a class folder
ignored $T/odd/train/ant/gone.tif: a dangling symbolic link
ignored $T/odd/train/ant/pipe.png: a FIFO, not a file or folder
skipped $T/odd/train/ant/bad\nname.png: not a PNG/TIFF/JPEG/PNM file
skipped $T/odd/train/bee/\x1b[31mred\x1b[0m.png: not a PNG/TIFF/JPEG/PNM file"
	got=$(sed -n 's/^spritefs-pack: \(skipped\|ignored\) /\1 /p' "$T/out")
	[[ $got == "$want" ]] || fail "odd: reported lines differ: $(diff <(echo "$want") <(echo "$got"))"
	LC_ALL=C grep -v "^spritefs-pack: [ -~]*$" "$T/out" >"$T/raw" &&
		fail "odd: lines with raw control bytes, or broken: $(cat -A "$T/raw")"
fi
# --strict: stops at an entry that is neither file nor folder, as at a bad image,
# after naming the files outside the class folders (no error: a README is fine)
expect_rc 1 "$PACK" --strict "$T/odd" "$T/odd-strict.sprites" && {
	grep -qx "spritefs-pack: stopped at $T/odd/train/ant/gone.tif: a dangling symbolic link (--strict)" "$T/out" ||
		fail "odd --strict: $(cat "$T/out")"
	grep -q "^spritefs-pack: ignored $T/odd/README.md: not in a class folder$" "$T/out" ||
		fail "odd --strict: README not named first: $(cat "$T/out")"
}
rm -f "$T/odd/train/ant/gone.tif"
expect_rc 1 "$PACK" --strict "$T/odd" "$T/odd-strict.sprites" &&
	{ grep -qx "spritefs-pack: stopped at $T/odd/train/ant/pipe.png: a FIFO, not a file or folder (--strict)" "$T/out" ||
		fail "odd --strict with a FIFO: $(cat "$T/out")"; }
rm -f "$T/odd/train/ant/pipe.png"
expect_rc 1 "$PACK" --strict "$T/odd" "$T/odd-strict.sprites" &&
	{ grep -qxF "spritefs-pack: stopped at $T/odd/train/ant/bad\nname.png: not a PNG/TIFF/JPEG/PNM file (--strict)" "$T/out" ||
		fail "odd --strict at a bad name: $(cat -A "$T/out")"; }
rm -f "$T/odd/train/ant/bad"$'\n'"name.png" "$T/odd/train/bee/"$'\e'*
expect_rc 0 "$PACK" --strict "$T/odd" "$T/odd-strict.sprites" &&
	{ grep -q "found $good, packed $good, skipped 0, ignored 2$" "$T/out" ||
		fail "odd --strict without bad entries: $(cat "$T/out")"; }
# a folder beside the splits that holds no class folders is named too, not an error
mkdir -p "$T/odd/empty" "$T/odd/extra" && echo notes >"$T/odd/extra/notes.txt"
expect_rc 0 "$PACK" --strict "$T/odd" "$T/odd-strict.sprites" && {
	grep -q "found $good, packed $good, skipped 0, ignored 4$" "$T/out" ||
		fail "odd with empty/ and extra/: $(cat "$T/out")"
	grep -qx "spritefs-pack: ignored $T/odd/extra: no class folders in it" "$T/out" ||
		fail "odd: extra/ not named: $(cat "$T/out")"
}

# ---- mixed tree: bad files, counts, --strict, --tile, determinism --------------
"$MKTREE" mixed "$T/mixed" 40 >"$T/counts" || fail "mktree mixed"
read -r _ good _ bad <"$T/counts"
total=$((good + bad))
# Images of several sizes and no --tile: refused, both sizes and the option named
# (ant/f0000.tif is gray 8x8, ant/f0001.tif 15x19), no store written.
expect_rc 1 "$PACK" --jobs 2 "$T/mixed" "$T/nosize.sprites" && {
	grep -q "images differ in size, 8x8 and 15x19, and no tile size is given (spritefs-pack --tile HxWxC.*/ant/f0000.tif is 8x8, .*/ant/f0001.tif is 15x19" "$T/out" ||
		fail "mixed sizes without --tile: $(cat "$T/out")"
	[[ -e $T/nosize.sprites ]] && fail "mixed sizes without --tile wrote a store"
}
if expect_rc 0 "$PACK" --jobs 1 --tile 8x8 "$T/mixed" "$T/m1.sprites"; then
	grep -q "found $total, packed $good, skipped $bad" "$T/out" ||
		fail "mixed: summary: $(grep found "$T/out")"
	nskip=$(grep -c "^spritefs-pack: skipped " "$T/out")
	[[ $nskip -eq $bad ]] || fail "mixed: $nskip 'skipped' lines, want $bad"
	grep -q "skipped .*/ant/zz-truncated.tif: .*TIFF" "$T/out" ||
		fail "mixed: truncated TIFF reason: $(grep zz-truncated.tif "$T/out" | head -1)"
	grep -q "skipped .*/ant/zz-empty.png: empty file" "$T/out" || fail "mixed: empty file reason"
	grep -q "skipped .*/ant/zz-notes.txt: not a PNG/TIFF/JPEG/PNM file" "$T/out" ||
		fail "mixed: text file reason"
	grep -q "skipped .*/ant/zz-cut.jpg: bad JPEG" "$T/out" || fail "mixed: cut JPEG reason"
	grep -q "hidden" "$T/out" && fail "mixed: hidden file was considered"
	# The first image (ant/f0000.tif) is gray: the channels come from it; crop by default.
	expect_rc 0 "$PACK" --info "$T/m1.sprites" && grep -q "tile: *8x8x1" "$T/out" &&
		grep -q "^fit: *crop$" "$T/out" ||
		fail "mixed: default channels not from the first image, or fit not crop: $(cat "$T/out")"
fi
expect_rc 0 "$PACK" --jobs 4 --tile 8x8 "$T/mixed" "$T/m4.sprites" &&
	{ cmp -s "$T/m1.sprites" "$T/m4.sprites" || fail "store bytes differ between --jobs 1 and 4"; }
# the store format: version 3 with the label and path tables, or version 2 on request
expect_rc 0 "$PACK" --info "$T/m1.sprites" &&
	{ grep -q "format: *version 3, label table, source-path table" "$T/out" ||
		fail "default format: $(grep format: "$T/out")"; }
expect_rc 0 "$PACK" -q --store-version 2 --tile 8x8 "$T/mixed" "$T/m-v2.sprites" &&
	expect_rc 0 "$PACK" --info "$T/m-v2.sprites" &&
	{ grep -q "format: *version 2, labels in the sheets only" "$T/out" ||
		fail "--store-version 2: $(grep format: "$T/out")"; }
expect_rc 2 "$PACK" --store-version 1 --tile 8x8 "$T/mixed" "$T/m-v1.sprites" &&
	{ grep -q "bad --store-version '1' (2..3)" "$T/out" || fail "--store-version 1: $(cat "$T/out")"; }
expect_rc 2 "$PACK" --store-version 2 --info "$T/m1.sprites"
expect_rc 1 "$PACK" --strict --jobs 3 --tile 8x8 "$T/mixed" "$T/strict.sprites" && {
	grep -q -- "stopped at $T/mixed/ant/zz-cut.jpg: bad JPEG.* (--strict)" "$T/out" ||
		fail "--strict: message: $(cat "$T/out")"
	grep -q "skipped\|found" "$T/out" && fail "--strict: reads like a finished pack: $(cat "$T/out")"
	grep -q "no store written" "$T/out" || fail "--strict: does not say no store was written"
}
[[ -e $T/strict.sprites ]] && fail "--strict left a store behind"
ls "$T"/strict.sprites.tmp* >/dev/null 2>&1 && fail "--strict left a temp file behind"
expect_rc 0 "$PACK" --tile 16x12x3 --fit pad --sheet 7 --compress none "$T/mixed" "$T/t.sprites" &&
	cp "$T/out" "$T/t.summary" && expect_rc 0 "$PACK" --info "$T/t.sprites" && {
	grep -q "tile: *16x12x3" "$T/out" || fail "--tile 16x12x3 not applied"
	grep -q "^fit: *pad (filled with 0)$" "$T/out" || fail "--fit pad not recorded: $(cat "$T/out")"
	grep -q "tiles (fit pad)" "$T/t.summary" || fail "--fit pad not in the summary: $(cat "$T/t.summary")"
	grep -q "sheet tiles: *7$" "$T/out" || fail "--sheet 7 not applied"
	grep -q "compression: *none, decoded sheets are 1.00x their stored size" "$T/out" ||
		fail "--compress none not applied: $(grep compression "$T/out")"
}
expect_rc 0 "$PACK" --verify "$T/t.sprites"
# exports in every format, with --split and --limit
for f in tiff tiff-lzw pgm png; do
	expect_rc 0 "$PACK" --export "$T/ex-$f" --format $f --limit 10 --jobs 3 "$T/m1.sprites" &&
		{ n=$(find "$T/ex-$f" -type f | wc -l); [[ $n -eq 10 ]] || fail "export $f --limit 10: $n files"; }
done
expect_rc 0 "$PACK" --export "$T/ex-all" --format tiff "$T/m1.sprites" &&
	expect_rc 0 "$PACK" --jobs 2 "$T/ex-all" "$T/re.sprites" &&
	{ grep -q "found $good, packed $good, skipped 0" "$T/out" || fail "repack of export: $(head -1 "$T/out")"; }
# a PGM/PPM export packs again to the same store contents as the TIFF one
# (what the mount's by-class/ serves is packable too)
expect_rc 0 "$PACK" --export "$T/ex-pnm" --format pgm "$T/m1.sprites" &&
	expect_rc 0 "$PACK" --jobs 2 "$T/ex-pnm" "$T/re-pnm.sprites" &&
	expect_rc 0 "$PACK" --export "$T/cmp-tiff" --format pgm "$T/re.sprites" &&
	expect_rc 0 "$PACK" --export "$T/cmp-pnm" --format pgm "$T/re-pnm.sprites" &&
	{ diff -r "$T/cmp-tiff" "$T/cmp-pnm" >/dev/null || fail "repack of a PGM export differs from the TIFF one"; }
expect_rc 1 "$PACK" --export "$T/ex-none" --split nosuch "$T/m1.sprites"
# DIR must be new or empty: an earlier export's files would read as part of this one
before=$(find "$T/ex-all" -type f | wc -l)
expect_rc 1 "$PACK" --export "$T/ex-all" --format png "$T/m1.sprites" && {
	grep -q -- "--export $T/ex-all: the folder is not empty (it holds '.*'); .* or --force" "$T/out" ||
		fail "export into a non-empty folder: $(cat "$T/out")"
	[[ $(find "$T/ex-all" -type f | wc -l) -eq $before && -z $(find "$T/ex-all" -name '*.png') ]] ||
		fail "export into a non-empty folder wrote files"
}
mkdir -p "$T/ex-empty"
expect_rc 0 "$PACK" --export "$T/ex-empty" --limit 3 "$T/m1.sprites"
touch "$T/ex-file"
expect_rc 1 "$PACK" --export "$T/ex-file" "$T/m1.sprites" &&
	{ grep -q -- "--export $T/ex-file: not a folder" "$T/out" || fail "export into a file: $(cat "$T/out")"; }
# --force: one split at a time into one tree
if [[ -f $T/gray.sprites ]]; then
	expect_rc 0 "$PACK" --export "$T/ex-split" --split train "$T/gray.sprites"
	expect_rc 1 "$PACK" --export "$T/ex-split" --split test "$T/gray.sprites"
	expect_rc 0 "$PACK" --export "$T/ex-split" --split test --force "$T/gray.sprites" &&
		{ [[ $(find "$T/ex-split/train" -type f | wc -l) -eq 36 && $(find "$T/ex-split/test" -type f | wc -l) -eq 18 ]] ||
			fail "--force: $(find "$T/ex-split" -type f | wc -l) files, want 36 + 18"; }
fi

# ---- verify: damaged stores -----------------------------------------------------
flip() { # FILE OFFSET
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	printf "$(printf '\\%03o' $(((b ^ 0x5a) & 255)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
if [[ -f $T/m1.sprites ]]; then
	expect_rc 0 "$PACK" --verify "$T/m1.sprites"
	cp "$T/m1.sprites" "$T/bad-sheet.sprites"
	flip "$T/bad-sheet.sprites" $((4096 + 300))
	expect_rc 1 "$PACK" --verify "$T/bad-sheet.sprites" &&
		{ grep -qi "sheet 0" "$T/out" || fail "flipped sheet byte: message does not name sheet 0: $(cat "$T/out")"; }
	# two bad sheets of many: both named, then the count
	if [[ -f $T/t.sprites ]]; then
		cp "$T/t.sprites" "$T/two-bad.sprites"
		io=$(od -An -tu8 -j 56 -N8 "$T/t.sprites" | tr -d ' ')
		nsheets=$(( $(od -An -tu8 -j $((56 + 8)) -N8 "$T/t.sprites" | tr -d ' ') / 48 ))
		for k in 2 $((nsheets - 1)); do
			off=$(od -An -tu8 -j $((io + 48 * k)) -N8 "$T/t.sprites" | tr -d ' ')
			flip "$T/two-bad.sprites" $((off + 100))
		done
		expect_rc 1 "$PACK" --verify "$T/two-bad.sprites" && {
			grep -q "sheet 2: .*(split train, samples 14\.\.20)" "$T/out" ||
				fail "--verify: sheet 2 not named: $(cat "$T/out")"
			grep -q "sheet $((nsheets - 1)): " "$T/out" ||
				fail "--verify stopped before the last bad sheet: $(cat "$T/out")"
			grep -q "2 of $nsheets sheets bad" "$T/out" || fail "--verify summary: $(cat "$T/out")"
		}
		# --export goes on past them: every other sample written, the bad named
		ngood=$(grep -o "packed [0-9]*" <<<"$(cat "$T/t.summary")" | cut -d' ' -f2)
		expect_rc 1 "$PACK" --export "$T/ex-bad" --format pgm "$T/two-bad.sprites" && {
			n=$(find "$T/ex-bad" -type f | wc -l)
			last=$(grep -o "sheet $((nsheets - 1)): .*: [0-9]* samples" "$T/out" | grep -o "[0-9]* samples" | cut -d' ' -f1)
			[[ $n -eq $((ngood - 7 - last)) ]] || fail "--export past bad sheets: $n files of $ngood - 7 - $last"
			grep -q "sheet 2: .*: 7 samples of split train left out" "$T/out" ||
				fail "--export: bad sheet 2 not named: $(cat "$T/out")"
			grep -q "exported $n images to $T/ex-bad; $((7 + last)) samples of 2 bad sheets left out" "$T/out" ||
				fail "--export: summary: $(cat "$T/out")"
		}
		expect_rc 1 "$PACK" --export "$T/ex-strict" --strict --jobs 1 "$T/two-bad.sprites" && {
			grep -q "stopped at sheet 2 (--strict)" "$T/out" || fail "--export --strict: $(cat "$T/out")"
			[[ $(find "$T/ex-strict" -type f | wc -l) -eq 14 ]] || fail "--export --strict went on past sheet 2"
		}
	fi
	cp "$T/m1.sprites" "$T/bad-header.sprites"
	flip "$T/bad-header.sprites" 20
	expect_rc 1 "$PACK" --verify "$T/bad-header.sprites"
	size=$(stat -c %s "$T/m1.sprites")
	cp "$T/m1.sprites" "$T/bad-index.sprites"
	index_offset=$(od -An -tu8 -j 56 -N8 "$T/m1.sprites" | tr -d ' ')
	flip "$T/bad-index.sprites" $((index_offset + 10))
	expect_rc 1 "$PACK" --verify "$T/bad-index.sprites"
	head -c $((size / 2)) "$T/m1.sprites" >"$T/short.sprites"
	expect_rc 1 "$PACK" --verify "$T/short.sprites"
	expect_rc 1 "$PACK" --info "$T/short.sprites"
fi

# ---- IDX, plain and gzip ------------------------------------------------------------
"$MKTREE" idx "$T/idx" 300 9 7 >/dev/null || fail "mktree idx"
mkdir -p "$T/idxgz"
for f in "$T"/idx/*; do gzip -c "$f" >"$T/idxgz/$(basename "$f").gz"; done
for d in idx idxgz; do
	expect_rc 0 "$PACK" --name idx "$T/$d" "$T/$d.sprites" || continue
	grep -q "found 451, packed 451, skipped 0" "$T/out" || fail "$d: summary $(head -1 "$T/out")"
	grep -q "train 300 test 151" "$T/out" || fail "$d: split counts: $(sed -n 2p "$T/out")"
	expect_rc 0 "$PACK" --info "$T/$d.sprites" && {
		grep -q "tile: *9x7x1" "$T/out" || fail "$d: tile"
		grep -q "classes: *5: 0, 1, 2, 3, 4" "$T/out" || fail "$d: classes: $(grep classes "$T/out")"
	}
	if ((have_py)); then
		expect_rc 0 "$PACK" --export "$T/$d.png" --format png "$T/$d.sprites" &&
			{ compare_py "$T/$d" "$T/$d.png" idx >"$T/cmp" 2>&1 ||
				{ fail "$d: export differs from the IDX files"; sed 's/^/    /' "$T/cmp" >&2; }; }
	fi
done
cmp -s "$T/idx.sprites" "$T/idxgz.sprites" || fail "IDX plain and gzip give different stores"
# a truncated IDX file is an error naming it
cp -r "$T/idx" "$T/idxbad"
truncate -s 1000 "$T/idxbad/train-images-idx3-ubyte"
expect_rc 1 "$PACK" "$T/idxbad" "$T/idxbad.sprites" &&
	{ grep -q "train-images-idx3-ubyte: truncated" "$T/out" || fail "truncated IDX: $(cat "$T/out")"; }

# ---- a pack killed by a signal takes its temp file with it --------------------------
# 6750 images blown up to 256x256 tiles: a second or more; the signal goes in as
# soon as the temp file exists, while images are still being decoded.
# ThreadSanitizer defers a signal to the receiving thread's next intercepted
# call and drops it if that thread ends first (a pack ran to its end after
# SIGINT under it): the signal cases run in the plain and ASan passes.
sigs=(TERM INT HUP PIPE)
[[ -n ${TSAN_OPTIONS:-} ]] && sigs=()
((${#sigs[@]})) && { "$MKTREE" gray "$T/big" 1500 >/dev/null || fail "mktree big"; }
for sig in "${sigs[@]}"; do
	rm -f "$T"/killed.sprites*
	# (a background job starts with SIGINT ignored, and under nohup SIGHUP is; the
	# pack leaves an ignored signal ignored, so both are reset to the default)
	env --default-signal=INT,HUP "$PACK" --jobs 1 --tile 256x256x1 "$T/big" "$T/killed.sprites" \
		>"$T/out" 2>&1 &
	pid=$!
	for _ in $(seq 500); do
		compgen -G "$T/killed.sprites.tmp.*" >/dev/null && break
		sleep 0.01
	done
	compgen -G "$T/killed.sprites.tmp.*" >/dev/null || fail "SIG$sig: no temp file seen"
	kill -$sig $pid
	wait $pid
	rc=$?
	[[ $rc -eq $((128 + $(kill -l $sig))) ]] || fail "SIG$sig: exit $rc, want killed by SIG$sig"
	compgen -G "$T/killed.sprites*" >/dev/null && fail "SIG$sig left $(ls "$T"/killed.sprites*)"
	if [[ $sig == PIPE ]]; then
		grep -q "stopped by" "$T/out" && fail "SIGPIPE: a line written to a broken stderr: $(cat "$T/out")"
	else
		grep -qx "spritefs-pack: no store written: stopped by SIG$sig" "$T/out" ||
			fail "SIG$sig: not said: $(cat "$T/out")"
	fi
done

# ---- errors and usage ---------------------------------------------------------------
expect_rc 2 "$PACK" --fit squash "$T/gray" "$T/x.sprites" &&
	{ grep -q "bad --fit 'squash' (crop, pad or stretch)" "$T/out" || fail "bad --fit: $(cat "$T/out")"; }
expect_rc 2 "$PACK" --verify --fit pad "$T/m1.sprites" &&
	{ grep -q -- "--fit does not apply to --verify" "$T/out" || fail "--fit with --verify: $(cat "$T/out")"; }
expect_rc 1 "$PACK" "$T/nosuch" "$T/x.sprites" &&
	{ grep -q "$T/nosuch" "$T/out" || fail "missing source not named"; }
expect_rc 1 "$PACK" "$T/gray" "$T/nosuchdir/x.sprites" &&
	{ grep -q "the folder $T/nosuchdir: No such file" "$T/out" || fail "missing store folder: $(cat "$T/out")"; }
# STORE a folder: refused before any image is read (none is named as skipped)
mkdir -p "$T/adir"
expect_rc 1 "$PACK" "$T/mixed" "$T/adir" && {
	grep -q "$T/adir: is a folder" "$T/out" || fail "STORE a folder: $(cat "$T/out")"
	grep -q "skipped" "$T/out" && fail "STORE a folder: the source was read first"
	compgen -G "$T/adir.tmp.*" >/dev/null && fail "STORE a folder: temp file left"
}
if [[ $(id -u) -ne 0 ]]; then
	mkdir -p "$T/ro" && chmod 555 "$T/ro"
	expect_rc 1 "$PACK" "$T/mixed" "$T/ro/x.sprites" &&
		{ grep -q "cannot write in the folder $T/ro" "$T/out" || fail "read-only folder: $(cat "$T/out")"; }
	grep -q "skipped" "$T/out" && fail "read-only folder: the source was read first"
	chmod 755 "$T/ro"
fi
touch "$T/afile"
expect_rc 1 "$PACK" "$T/gray" "$T/afile/x.sprites"
mkdir -p "$T/empty/train/cls"
expect_rc 1 "$PACK" "$T/empty" "$T/e.sprites" &&
	{ grep -q "no images" "$T/out" || fail "empty set: $(cat "$T/out")"; }
# a class folder named with control characters: shown escaped, the source named
mkdir -p "$T/ctl/ok" "$T/ctl/a"$'\n'"b" "$T/ctl/c"$'\x01'
for d in "$T"/ctl/*; do cp "$T/gray/train/ant/$(ls "$T/gray/train/ant" | head -1)" "$d/"; done
expect_rc 1 "$PACK" "$T/ctl" "$T/ctl.sprites" && {
	grep -qF "$T/ctl: class name 0 (\"a\nb\")" "$T/out" || fail "control characters: $(cat "$T/out")"
	[[ $(wc -l <"$T/out") -eq 2 ]] || fail "control characters: raw in the message: $(cat -A "$T/out")"
}
mkdir -p "$T/ctl2/ok" "$T/ctl2/c"$'\x01'
cp "$T/ctl/ok/"* "$T/ctl2/ok/" && cp "$T/ctl/ok/"* "$T/ctl2/c"$'\x01/'
expect_rc 1 "$PACK" "$T/ctl2" "$T/ctl2.sprites" &&
	{ grep -qF '("c\x01")' "$T/out" || fail "control character \\x01: $(cat -A "$T/out")"; }
mkdir -p "$T/allbad/c"
echo nope >"$T/allbad/c/a.png"
expect_rc 1 "$PACK" "$T/allbad" "$T/ab.sprites"
expect_rc 2 "$PACK"
expect_rc 2 "$PACK" --tile 0x5 "$T/gray" "$T/x.sprites"
expect_rc 2 "$PACK" --compress zstd "$T/gray" "$T/x.sprites"
expect_rc 2 "$PACK" --jobs -1 "$T/gray" "$T/x.sprites"
expect_rc 2 "$PACK" --verify
# --name: 63 bytes fit the store's name field; 64 are refused, not cut
n63=$(printf 'n%.0s' {1..63})
expect_rc 0 "$PACK" -q --name "$n63" "$T/gray" "$T/n63.sprites" &&
	expect_rc 0 "$PACK" --info "$T/n63.sprites" &&
	{ grep -qx "name: *$n63" "$T/out" || fail "--name of 63 bytes: $(grep name: "$T/out")"; }
expect_rc 2 "$PACK" --name "${n63}x" "$T/gray" "$T/n64.sprites" && {
	grep -q -- "--name is 64 bytes long; a store's name holds at most 63 bytes" "$T/out" ||
		fail "--name of 64 bytes: $(cat "$T/out")"
	[[ -e $T/n64.sprites ]] && fail "--name of 64 bytes: a store was written"
}
# the default name, a folder name of 64 bytes ending in a 2-byte character: cut before it
long=$(printf 'a%.0s' {1..62})$'\xc3\xa9'
mkdir -p "$T/$long" && cp -r "$T/gray/train/ant" "$T/$long/"
expect_rc 0 "$PACK" -q "$T/$long" "$T/long.sprites" && expect_rc 0 "$PACK" --info "$T/long.sprites" &&
	{ grep -qx "name: *${long:0:62}" "$T/out" || fail "long folder name cut inside a character: $(grep -a "^name:" "$T/out" | cat -v)"; }
# an option that does not apply to the chosen mode is refused, naming both (exit 2)
mode_case() { # MESSAGE ARGS...
	local msg=$1
	shift
	expect_rc 2 "$PACK" "$@" && { grep -qF -- "$msg" "$T/out" || fail "$*: $(cat "$T/out")"; }
}
mode_case "--tile does not apply to --verify (only to packing)" --verify --tile 8x8 "$T/m1.sprites"
mode_case "--jobs does not apply to --verify (only to packing and --export)" --verify --jobs 2 "$T/m1.sprites"
mode_case "--strict does not apply to --info (only to packing and --export)" --info --strict "$T/m1.sprites"
mode_case "-q/--quiet does not apply to --info (only to packing, --verify and --export)" -q --info "$T/m1.sprites"
mode_case "--name does not apply to --export (only to packing)" --export "$T/ex-mode" --name x "$T/m1.sprites"
mode_case "--compress does not apply to --export (only to packing)" --export "$T/ex-mode" --compress none "$T/m1.sprites"
mode_case "--sheet does not apply to --info (only to packing)" --sheet 4 --info "$T/m1.sprites"
mode_case "--format does not apply to packing (only to --export)" --format png "$T/gray" "$T/fmt.sprites"
mode_case "--limit does not apply to packing (only to --export)" "$T/gray" "$T/fmt.sprites" --limit 5
mode_case "--split does not apply to --verify (only to --export)" --split train --verify "$T/m1.sprites"
mode_case "--force does not apply to packing (only to --export)" --force "$T/gray" "$T/fmt.sprites"
[[ -e $T/ex-mode || -e $T/fmt.sprites ]] && fail "a refused option combination wrote something"
expect_rc 0 "$PACK" -q --verify "$T/m1.sprites" && [[ -s $T/out ]] && fail "-q --verify printed: $(cat "$T/out")"
expect_rc 0 "$PACK" --help && { grep -q "usage" "$T/out" || fail "--help"; }
expect_rc 0 "$PACK" --version && { grep -q "spritefs-pack [0-9]" "$T/out" || fail "--version"; }

# ---- the real Fashion-MNIST -----------------------------------------------------------
if [[ -f $FMNIST/train-images-idx3-ubyte.gz || -f $FMNIST/train-images-idx3-ubyte ]]; then
	if expect_rc 0 "$PACK" "$FMNIST" "$T/fm.sprites"; then
		grep -q "found 70000, packed 70000, skipped 0" "$T/out" || fail "fashion-mnist: $(head -1 "$T/out")"
		grep -q "train 60000 test 10000" "$T/out" || fail "fashion-mnist: splits"
		expect_rc 0 "$PACK" --info "$T/fm.sprites" && {
			grep -q "tile: *28x28x1" "$T/out" || fail "fashion-mnist: tile"
			grep -q "classes: *10: T-shirt_top, Trouser, .*, Ankle boot" "$T/out" ||
				fail "fashion-mnist: classes: $(grep classes "$T/out")"
		}
		expect_rc 0 "$PACK" --verify "$T/fm.sprites"
		if ((have_py)); then
			expect_rc 0 "$PACK" --export "$T/fm.png" --format png --limit 200 "$T/fm.sprites"
			$PY - "$FMNIST" "$T/fm.png" <<'EOF' || fail "fashion-mnist: export differs from the IDX files"
import gzip, os, sys
import numpy as np
from PIL import Image
src, exp = sys.argv[1:3]
names = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
for split, pre in (("train", "train"), ("test", "t10k")):
    ims = np.frombuffer(gzip.open(os.path.join(src, pre + "-images-idx3-ubyte.gz")).read(), np.uint8, offset=16).reshape(-1, 28, 28)
    labs = np.frombuffer(gzip.open(os.path.join(src, pre + "-labels-idx1-ubyte.gz")).read(), np.uint8, offset=8)
    n = 0
    for c in os.listdir(os.path.join(exp, split)):
        for f in os.listdir(os.path.join(exp, split, c)):
            i = int(f.split(".")[0])
            a = np.array(Image.open(os.path.join(exp, split, c, f)))
            assert names[labs[i]] == c, (split, i, c, labs[i])
            assert np.array_equal(a, ims[i]), (split, i)
            n += 1
    assert n == 200, n
print("ok")
EOF
		fi
	fi
else
	echo "note: $FMNIST not installed: Fashion-MNIST part skipped" >&2
fi

finish
