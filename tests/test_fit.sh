#!/usr/bin/env bash
# test_fit.sh - how an image becomes a tile (docs/FORMAT.md, "How an image
# becomes a tile"), against an independent reference.
#
#   test_fit.sh SPRITEFS_PACK MKTREE
#
# /usr/bin/python3 writes the images with PIL (and zlib for a 16-bit PNG with
# alpha), spritefs-pack packs them (--compress none), and the same Python
# reads the store's sheets by the documented layout and compares each tile
# with one computed from the source file by PIL + numpy: the documented crop
# and pad geometry in its own arithmetic, PIL's box filter for shrinking and
# bilinear for enlarging (one axis at a time, so within 2 of ours), and the
# pad border checked exactly. Cases: odd sizes both ways of two tiles (16x16,
# 12x20) in crop, pad and stretch; 1xN, Nx1 and 1x1 images; JPEGs with every
# EXIF orientation (PIL's ImageOps.exif_transpose as reference) and one with a
# bad EXIF block (left as stored); CMYK (PIL) and YCCK (mktree: TurboJPEG)
# JPEGs (PIL's decode and CMYK->RGB as reference); a 16-bit PNG with alpha; a
# 400x300 JPEG that takes the scaled decode (PIL's draft() as reference); a
# JPEG whose header declares 30000x30000, named and skipped, with the pack's
# peak RSS bounded (/usr/bin/time). Alpha (#30): an RGBA and a gray+alpha PNG
# and a lossless RGBA WebP against PIL's convert("RGB") / convert("L") by
# default and against PIL's alpha_composite on white for --background white,
# the header's background field read back; bad --background values refused
# with the option named. 16-bit files (#30): gray PNG, TIFF and PGM whose values fit in
# 8 bits, full-range ones, RGB, gray+alpha, interlaced PNGs, min-is-white TIFF, maxval
# 1023, each tile to the bit against PIL's convert("RGB"), or, where PIL's is broken,
# against docs/FORMAT.md's rule.
set -uo pipefail

PACK=${1:?spritefs-pack path}
MKTREE=${2:?mktree path}
PY=/usr/bin/python3

if ! [[ -x $PY ]] || ! $PY -c 'import PIL, numpy' 2>/dev/null; then
	echo "SKIP: $PY with PIL and numpy is needed for the reference" >&2
	exit 77
fi

NAME=test_fit
source "$(dirname "$0")/pack_lib.sh"

# ---- the images ------------------------------------------------------------------------
mkdir -p "$T/jpeg/a"
"$MKTREE" ycck "$T/jpeg/a/ycck.jpg" 20 30 >/dev/null || fail "mktree ycck"
$PY - "$T" <<'EOF' || fail "writing the images"
import io, os, struct, sys, zlib
import numpy as np
from PIL import Image

T = sys.argv[1]
rng = np.random.default_rng(18)

def noise(h, w):  # values 1..255: a pad's 0 border is told from the image exactly
    return rng.integers(1, 256, (h, w, 3), dtype=np.uint8)

os.makedirs(f"{T}/png/a")
sizes = [(37, 53), (53, 37), (7, 5), (1, 40), (40, 1), (1, 1), (16, 16), (15, 17), (100, 3),
         (33, 32), (12, 20), (61, 9)]
for i, (h, w) in enumerate(sizes):
    Image.fromarray(noise(h, w)).save(f"{T}/png/a/{i:02d}.png")

J = f"{T}/jpeg/a"
base = noise(24, 40)
for o in range(1, 9):
    ex = Image.Exif()
    ex[0x0112] = o
    Image.fromarray(base).save(f"{J}/orient{o}.jpg", quality=95, exif=ex)
# A bad EXIF block: IFD0 offset far past its end.
buf = io.BytesIO()
Image.fromarray(base).save(buf, "JPEG", quality=95)
j = buf.getvalue()
tiff = b"II*\x00" + struct.pack("<I", 0x7FFFFF00) + b"\x01\x00" + b"\x12\x01\x03\x00"
app1 = b"Exif\x00\x00" + tiff
open(f"{J}/badexif.jpg", "wb").write(j[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) +
                                     app1 + j[2:])
Image.fromarray(noise(30, 20)).convert("CMYK").save(f"{J}/cmyk.jpg", quality=95)
Image.fromarray(noise(1, 1)).save(f"{J}/one.jpg", quality=95)
Image.fromarray(noise(300, 400)).save(f"{J}/big.jpg", quality=90)

# 16-bit RGBA PNG, written by hand: PIL does not write one.
h, w = 9, 13
px16 = rng.integers(0, 65536, (h, w, 4), dtype=np.uint16)
raw = b"".join(b"\x00" + px16[y].astype(">u2").tobytes() for y in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 6, 0, 0, 0)) +
       chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
open(f"{J}/png16a.png", "wb").write(png)

# RGBA and gray+alpha PNGs, alpha from 0 to 255 (rows of each end).
os.makedirs(f"{T}/alpha/a")
rgba = np.concatenate([noise(23, 31), rng.integers(0, 256, (23, 31, 1), dtype=np.uint8)], 2)
rgba[0, :, 3], rgba[1, :, 3] = 0, 255
Image.fromarray(rgba, "RGBA").save(f"{T}/alpha/a/rgba.png")
Image.fromarray(rgba[::-1].copy(), "RGBA").save(f"{T}/alpha/a/rgba.webp", lossless=True)
la = np.stack([noise(29, 19)[..., 0], rng.integers(0, 256, (29, 19), dtype=np.uint8)], 2)
la[0, :, 1], la[1, :, 1] = 0, 255
Image.fromarray(la, "LA").save(f"{T}/alpha/a/la.png")

# A JPEG whose header says 30000x30000 (the SOF0 size patched), beside a good one.
os.makedirs(f"{T}/huge/a")
buf = io.BytesIO()
Image.fromarray(noise(8, 8)).save(buf, "JPEG", quality=95)
j = bytearray(buf.getvalue())
Image.fromarray(noise(8, 8)).save(f"{T}/huge/a/good.jpg", quality=95)
k = j.index(b"\xff\xc0")
j[k + 5:k + 9] = struct.pack(">HH", 30000, 30000)
open(f"{T}/huge/a/huge.jpg", "wb").write(bytes(j))

# 16-bit files (#30), 16x16 (the tile: no resampling, compared exactly), written by hand:
# gray whose values fit in 8 bits and full-range gray, colour, gray+alpha; PNG (some
# interlaced: the whole-file decoder), TIFF in strips of 5 rows, PGM/PPM at maxval 65535
# and 1023. Where PIL's convert is broken (a gray value clipped at 255, min-is-white
# ignored, a PGM of maxval 1023 scaled to 16 bits and clipped), b16ref/ holds the tile
# docs/FORMAT.md's rule gives; elsewhere the reference is PIL.
B, R = f"{T}/b16/a", f"{T}/b16ref"
os.makedirs(B)
os.makedirs(R)
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]
def png16(name, a, ctype, interlace=False):
    a = a if a.ndim == 3 else a[..., None]
    h, w = a.shape[:2]
    subs = [a[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7] if interlace else [a]
    raw = b"".join(b"\x00" + r.astype(">u2").tobytes() for sub in subs for r in sub
                   if sub.shape[1])
    ihdr = struct.pack(">IIBBBBB", w, h, 16, ctype, 0, 0, int(interlace))
    open(f"{B}/{name}", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                                    chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
def tiff16(name, a, photometric, rps=5):  # little-endian, uncompressed, strips of rps rows
    spp = 1 if a.ndim == 2 else a.shape[2]
    h, w = a.shape[:2]
    data = a.astype("<u2").tobytes()
    strip = w * spp * 2 * rps
    offs = list(range(0, len(data), strip))
    n, ns = 10, len(offs)
    bps_at = 8 + 2 + 12 * n + 4
    offs_at = bps_at + 2 * spp
    counts_at = offs_at + 4 * ns
    data_at = counts_at + 4 * ns
    def entry(tag, typ, cnt, val):  # val: the value (one SHORT or LONG), or an offset
        v = struct.pack("<HH", val, 0) if typ == 3 and cnt == 1 else struct.pack("<I", val)
        return struct.pack("<HHI", tag, typ, cnt) + v
    ifd = [entry(256, 4, 1, w), entry(257, 4, 1, h), entry(258, 3, spp, 16 if spp == 1 else bps_at),
           entry(259, 3, 1, 1), entry(262, 3, 1, photometric), entry(273, 4, ns, offs_at),
           entry(277, 3, 1, spp), entry(278, 4, 1, rps), entry(279, 4, ns, counts_at),
           entry(284, 3, 1, 1)]
    out = (b"II*\x00" + struct.pack("<IH", 8, n) + b"".join(ifd) + struct.pack("<I", 0) +
           struct.pack(f"<{spp}H", *[16] * spp) +
           struct.pack(f"<{ns}I", *[data_at + o for o in offs]) +
           struct.pack(f"<{ns}I", *[min(strip, len(data) - o) for o in offs]))
    open(f"{B}/{name}", "wb").write(out + data)
def pnm16(name, a, maxval):
    h, w = a.shape[:2]
    head = f"P{5 if a.ndim == 2 else 6}\n{w} {h}\n{maxval}\n".encode()
    open(f"{B}/{name}", "wb").write(head + a.astype(">u2").tobytes())
def own(name, v):  # the documented tile where PIL's is broken
    np.save(f"{R}/{name}.npy", v.astype(np.uint8))
small = rng.integers(0, 256, (16, 16), dtype=np.uint16)  # a 16-bit file holding 8-bit values
full = rng.integers(0, 65536, (16, 16, 4), dtype=np.uint16)
full[0, 0] = 65535
ten = rng.integers(0, 1024, (16, 16, 3), dtype=np.uint16)
png16("g16small.png", small, 0)
png16("g16small-i.png", small, 0, interlace=True)
for name, il in (("g16full.png", False), ("g16full-i.png", True)):
    png16(name, full[..., 0], 0, interlace=il)
    own(name, full[..., 0] >> 8)
png16("rgb16.png", full[..., :3], 2)
png16("rgb16-i.png", full[..., :3], 2, interlace=True)
png16("rgb16small.png", np.stack([small] * 3, 2), 2)
png16("ga16small.png", np.stack([small, full[..., 3]], 2), 4)
tiff16("g16small.tif", small, 1)
tiff16("g16full.tif", full[..., 0], 1)
own("g16full.tif", full[..., 0] >> 8)
tiff16("g16small-mw.tif", small, 0)
own("g16small-mw.tif", 255 - small)
tiff16("rgb16.tif", full[..., :3], 2)
pnm16("g16small.pgm", small, 65535)
pnm16("g16full.pgm", full[..., 0], 65535)
own("g16full.pgm", np.round(full[..., 0] / 65535 * 255))  # as PIL scales a PPM
pnm16("rgb16.ppm", full[..., :3], 65535)
pnm16("g10.pgm", ten[..., 0], 1023)
own("g10.pgm", np.round(ten[..., 0] / 1023 * 255))
pnm16("rgb10.ppm", ten, 1023)
EOF

# ---- pack and compare ------------------------------------------------------------------
check() { # SRC STORE TILE FIT [BACKGROUND]
	$PY - "$1" "$2" "$3" "$4" "$T" "${5:-none}" <<'EOF'
import os, struct, sys, warnings
import numpy as np
from PIL import Image, ImageOps

warnings.simplefilter("ignore")  # PIL on the bad EXIF block

src, store, tile, fit, T, bg = sys.argv[1:7]
th, tw = (int(v) for v in tile.split("x")[:2])

def read_store(path):
    """Tiles of a store, in order, from the layout docs/FORMAT.md gives."""
    b = open(path, "rb").read()
    h, w, c = struct.unpack_from("<3I", b, 16)
    nsheets, = struct.unpack_from("<I", b, 40)
    index, = struct.unpack_from("<Q", b, 56)
    fitv, = struct.unpack_from("<I", b, 436)
    bgv, = struct.unpack_from("<I", b, 520)
    want_bg = {"none": 0x02000000, "white": 0x01FFFFFF}[bg]
    if bgv != want_bg:
        print(f"{path}: header background {bgv:#x}, want {want_bg:#x}")
        sys.exit(1)
    tiles = []
    for s in range(nsheets):
        off, stored, rawsz = struct.unpack_from("<QII", b, index + 48 * s)
        codec = b[index + 48 * s + 46]
        assert codec == 0, "pack with --compress none"
        sheet = b[off:off + rawsz]
        count, = struct.unpack_from("<I", sheet, 16)
        to, = struct.unpack_from("<I", sheet, 40)
        t = np.frombuffer(sheet, np.uint8, count * h * w * c, to).reshape(count, h, w, c)
        tiles.extend(t)
    return (h, w, c), ["stretch", "crop", "pad"][fitv], tiles

def geometry(h, w):
    """The documented arithmetic, written out again."""
    if fit == "stretch":
        return th, tw, 0, 0, 0, 0
    wider = w * th >= h * tw
    if fit == "crop":
        rh, rw = (th, w * th // h) if wider else (h * tw // w, tw)
        return rh, rw, (rh - th) // 2, (rw - tw) // 2, 0, 0
    rh, rw = (max(1, h * tw // w), tw) if wider else (th, max(1, w * th // h))
    return rh, rw, 0, 0, (th - rh) // 2, (tw - rw) // 2

def taps(n, out, first, count):
    """count x n weights of outputs first.. of a resize of n pixels to out: exact box
    coverage when shrinking, bilinear at pixel centres (clamped) when enlarging.
    (PIL's BOX filter is not this: it weighs a pixel 1 or 0 by where its centre falls.)"""
    m = np.zeros((count, n))
    s = n / out
    for k in range(count):
        o = first + k
        if n == out:
            m[k, o] = 1
        elif n > out:
            lo, hi = o * s, (o + 1) * s
            for j in range(int(lo), min(n, int(np.ceil(hi)))):
                m[k, j] = (min(hi, j + 1) - max(lo, j)) / s
        else:
            c = min(max((o + 0.5) * s - 0.5, 0), n - 1)
            j = int(c)
            m[k, j] += 1 - (c - j)
            m[k, min(j + 1, n - 1)] += c - j
    return m

def resize(a, rh, rw, y0, x0, dh, dw):
    """Rows y0.. and columns x0.. (dh x dw) of a resized to rh x rw, in float64."""
    h, w = a.shape[:2]
    r = np.einsum("yi,ijc,xj->yxc", taps(h, rh, y0, dh), a.astype(np.float64),
                  taps(w, rw, x0, dw))
    return np.clip(np.floor(r + 0.5), 0, 255).astype(np.uint8)

def reference(name, path):
    """The source as the packer should see it, decoded by PIL."""
    if os.path.exists(f"{T}/b16ref/{name}.npy"):  # 16-bit where PIL's rule is broken
        v = np.load(f"{T}/b16ref/{name}.npy")
        return (np.stack([v] * 3, 2) if v.ndim == 2 else v), 0
    im = Image.open(path)
    if path.startswith(f"{T}/b16/"):  # 16-bit: PIL's convert, to the bit
        return np.asarray(im.convert("RGB")), 0
    if name in ("rgba.png", "rgba.webp", "la.png"):  # alpha: as PIL's convert, or on white
        if bg == "white":
            im = Image.alpha_composite(Image.new("RGBA", im.size, (255, 255, 255, 255)),
                                       im.convert("RGBA"))
        im = im.convert("L") if name == "la.png" else im
        return np.asarray(im.convert("RGB")), 1 if bg == "none" else 2
    if name.endswith(".jpg"):  # the scaled decode, as PIL's draft() picks it
        o = im.getexif().get(0x0112, 1) if name.startswith("orient") else 1
        w, h = im.size
        rh, rw = geometry(*((w, h) if o >= 5 else (h, w)))[:2]
        im.draft(im.mode, (rh, rw) if o >= 5 else (rw, rh))
    if name.startswith("orient"):
        im = ImageOps.exif_transpose(im)
    return np.asarray(im.convert("RGB")), 1

shape, got_fit, tiles = read_store(store)
bad = 0
if got_fit != fit or shape != (th, tw, 3):
    print(f"{store}: header says fit {got_fit}, tile {shape}; want {fit}, {th}x{tw}x3")
    bad += 1
names = sorted(n for n in os.listdir(f"{src}/a"))
names = [n for n in names if n != "huge.jpg"]
if len(names) != len(tiles):
    print(f"{store}: {len(tiles)} tiles for {len(names)} files")
    sys.exit(1)
for name, got in zip(names, tiles):
    a, tol = reference(name, f"{src}/a/{name}")
    h, w = a.shape[:2]
    rh, rw, cy, cx, py, px = geometry(h, w)
    if fit == "pad":
        want = np.zeros((th, tw, 3), np.uint8)
        want[py:py + rh, px:px + rw] = resize(a, rh, rw, 0, 0, rh, rw)
        inside = np.zeros((th, tw), bool)
        inside[py:py + rh, px:px + rw] = True
        if got[~inside].any() or (name.endswith(".png") and name != "png16a.png" and
                                  (got[inside] == 0).any()):
            print(f"{name} {h}x{w} pad {tile}: border not where it should be "
                  f"(rows {py}..{py + rh}, columns {px}..{px + rw})")
            bad += 1
            continue
    else:
        want = resize(a, rh, rw, cy, cx, th, tw)
    d = np.abs(got.astype(int) - want.astype(int)).max()
    if d > tol:
        print(f"{name} {h}x{w} {fit} {tile}: differs from the reference by up to {d} "
              f"(allowed {tol})")
        bad += 1
sys.exit(1 if bad else 0)
EOF
}

for tile in 16x16x3 12x20x3; do
	for fit in crop pad stretch; do
		st="$T/png-$tile-$fit.sprites"
		expect_rc 0 "$PACK" -q --tile $tile --fit $fit --compress none "$T/png" "$st" &&
			{ check "$T/png" "$st" "$tile" "$fit" || fail "png, $tile, $fit: not as the reference"; }
	done
done
for fit in crop pad; do
	st="$T/jpeg-$fit.sprites"
	expect_rc 0 "$PACK" -q --tile 16x16x3 --fit $fit --compress none "$T/jpeg" "$st" && {
		grep -q skipped "$T/out" && fail "jpeg, $fit: a file was skipped: $(cat "$T/out")"
		check "$T/jpeg" "$st" 16x16x3 "$fit" || fail "jpeg, $fit: not as the reference"
	}
done

# 16-bit (#30): each file as PIL converts it, or by the documented rule where PIL's is broken.
expect_rc 0 "$PACK" -q --tile 16x16x3 --compress none "$T/b16" "$T/b16.sprites" && {
	grep -q skipped "$T/out" && fail "16-bit: a file was skipped: $(cat "$T/out")"
	check "$T/b16" "$T/b16.sprites" 16x16x3 crop || fail "16-bit: not as PIL or docs/FORMAT.md"
}

# Alpha: as stored by default, composited on white with --background white.
for bg in none white; do
	for fit in crop pad; do
		st="$T/alpha-$bg-$fit.sprites"
		args=(--background $bg)
		[[ $bg == none ]] && args=()
		expect_rc 0 "$PACK" -q --tile 16x16x3 --fit $fit "${args[@]}" --compress none \
			"$T/alpha" "$st" &&
			{ check "$T/alpha" "$st" 16x16x3 $fit $bg || fail "alpha, $bg, $fit: not as PIL"; }
	done
done
expect_rc 0 "$PACK" --info "$T/alpha-white-crop.sprites" &&
	grep -q "^background: *white$" "$T/out" || fail "--info: no 'background: white': $(cat "$T/out")"
for v in purple 1,2 1,2,300 -1,0,0 1,2,3,4 ""; do
	expect_rc 2 "$PACK" --tile 16x16x3 --background "$v" "$T/alpha" "$T/bad.sprites" &&
		grep -q -- "--background '$v' (none, black, white or R,G,B" "$T/out" ||
		fail "--background '$v': $(cat "$T/out")"
done
[[ -e $T/bad.sprites ]] && fail "a bad --background wrote a store"

# The default is crop, and --info says so.
expect_rc 0 "$PACK" -q --tile 16x16x3 --compress none "$T/png" "$T/default.sprites" &&
	cmp -s "$T/default.sprites" "$T/png-16x16x3-crop.sprites" ||
	fail "the default fit is not crop"

# A 30000x30000 header: named and skipped before any pixel memory, the rest packed.
TIME=/usr/bin/time
if [[ -x $TIME ]]; then
	expect_rc 0 "$TIME" -f "maxrss_kb %M" "$PACK" --tile 8x8x3 "$T/huge" "$T/huge.sprites"
else
	expect_rc 0 "$PACK" --tile 8x8x3 "$T/huge" "$T/huge.sprites"
fi
grep -q "skipped $T/huge/a/huge.jpg: image too large (30000x30000)" "$T/out" ||
	fail "30000x30000 header: $(cat "$T/out")"
grep -q "found 2, packed 1, skipped 1" "$T/out" || fail "30000x30000 header: counts: $(cat "$T/out")"
if rss=$(sed -n 's/^maxrss_kb //p' "$T/out") && [[ -n $rss ]]; then
	# 30000x30000x3 would be 2.5 GiB; the pack of it stays that of a small file.
	((rss < 65536)) || fail "packing a 30000x30000 header took $rss KiB of peak RSS"
	echo "peak RSS packing the 30000x30000 header: $rss KiB"
fi

finish
