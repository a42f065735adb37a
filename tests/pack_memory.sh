#!/usr/bin/env bash
# pack_memory.sh - an image costs memory by its rows and the tile, not by its
# file size (issue 29, item 9): a PGM whose header says 1x1 in front of a
# 600 MB sparse body, a 16000x16000 PNG (1.7 MB on disk, 256 MB of pixels),
# a 10000x10000 TIFF in deflated strips and a JPEG followed by a 600 MB
# sparse tail are packed by spritefs-pack and trained on by hntrain from the
# folder with a peak RSS far below any of their sizes; all are samples. An
# interlaced PNG (decoded whole, as the row decoder cannot) gives the tile
# its non-interlaced twin gives.
# Usage: pack_memory.sh SPRITEFS_PACK HNTRAIN
set -u
PACK=$1 HN=$2
PY=/usr/bin/python3
[[ -x $PY ]] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/pack-memory.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# peak_rss_kb CMD...: run CMD (its output to $T/out) and print its peak RSS in KiB
peak_rss_kb() {
	"$PY" -c '
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    rc = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$T/out" "$@"
}

mkdir -p "$T/src/a" "$T/src/b" "$T/il/a" "$T/il/b"
printf 'P5\n1 1\n255\n\x80' >"$T/src/a/sparse.pgm"
truncate -s 600M "$T/src/a/sparse.pgm" || fail "truncate"
printf 'P5\n2 2\n255\n\x10\x20\x30\x40' >"$T/src/b/small.pgm"
"$PY" - "$T" <<'PY' || fail "making the PNGs"
import sys, zlib, struct
t = sys.argv[1]
def chunk(k, d):
    return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
def png(path, w, h, rows, interlace=0):
    co = zlib.compressobj(6)
    idat = b"".join(co.compress(r) for r in rows) + co.flush()
    hdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, interlace)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", hdr) + chunk(b"IDAT", idat)
                           + chunk(b"IEND", b""))
W = H = 16000
row = bytes([0]) + bytes((x // 63) & 255 for x in range(W))
png(f"{t}/src/b/huge.png", W, H, (row for _ in range(H)))
# a 37x29 image, plain and Adam7-interlaced
w, h = 37, 29
px = [[(x * 7 + y * 13) & 255 for x in range(w)] for y in range(h)]
png(f"{t}/il/a/plain.png", w, h, (bytes([0] + px[y]) for y in range(h)))
rows = []
for xs, ys, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                       (1, 0, 2, 2), (0, 1, 1, 2)):
    for y in range(ys, h, dy):
        r = px[y][xs::dx]
        if r:
            rows.append(bytes([0] + r))
png(f"{t}/il/b/laced.png", w, h, rows, 1)
PY
[[ $(stat -c %s "$T/src/b/huge.png") -lt 4000000 ]] || fail "the 16000x16000 PNG is not small on disk"
# a JPEG followed by a 600 MB sparse tail: read to its EOI marker only
"$PY" -c 'from PIL import Image; Image.new("RGB", (40, 30), (200, 90, 10)).save("'"$T"'/src/a/tail.jpg")' \
	2>/dev/null || fail "PIL writes no JPEG"
truncate -s 600M "$T/src/a/tail.jpg" || fail "truncate"
# a 10000x10000 deflated TIFF in strips (1.5 MB on disk, 100 MB of pixels)
"$PY" -c '
import sys
import numpy as np
from PIL import Image
a = (np.arange(10000, dtype=np.uint32)[None, :] // 40 % 256).astype(np.uint8).repeat(10000, 0)
Image.fromarray(a).save(sys.argv[1], compression="tiff_deflate")' "$T/src/b/big.tif" ||
	fail "making the TIFF"

kb=$(peak_rss_kb "$PACK" --jobs 2 --tile 64x64x1 "$T/src" "$T/s.sprites") ||
	fail "spritefs-pack: $(cat "$T/out")"
echo "spritefs-pack: peak RSS $kb KiB"
grep -q "found 5, packed 5, skipped 0" "$T/out" || fail "not all five packed: $(cat "$T/out")"
((kb < 65536)) || fail "spritefs-pack peaked at $kb KiB (the files hold 600 MB and 256 MB of pixels)"
mb=$(sed -n 's/^spritefs-pack: \([0-9.]*\) MB of source files in.*/\1/p' "$T/out")
[[ -n $mb ]] && awk -v m="$mb" 'BEGIN { exit !(m < 4) }' ||
	fail "spritefs-pack read ${mb:-?} MB of the files (their tails and bodies are not needed)"

kb=$(peak_rss_kb "$HN" --data "$T/src" --tile 64x64x1 --model mlp --epochs 1 --batch 2 \
	--test-split none --quiet) || fail "hntrain: $(cat "$T/out")"
echo "hntrain on the folder: peak RSS $kb KiB"
grep -q "^weights xxh3" "$T/out" || fail "hntrain printed no weights: $(cat "$T/out")"
grep -q "skipped" "$T/out" && fail "hntrain skipped a file: $(cat "$T/out")"
((kb < 131072)) || fail "hntrain peaked at $kb KiB"

# The interlaced PNG is read whole, and fits as its plain twin does.
"$PACK" -q --tile 16x16x1 "$T/il" "$T/il.sprites" || fail "pack the interlaced PNG"
"$PACK" -q --export "$T/ex" --format pgm "$T/il.sprites" || fail "export"
a=$(ls "$T/ex/train/a"/*) b=$(ls "$T/ex/train/b"/*)
cmp -s "$a" "$b" || fail "the interlaced PNG gives another tile than the plain one"
echo "ok"
