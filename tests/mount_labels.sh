#!/usr/bin/env bash
# mount_labels.sh - the label table and the path table of a version-3 store.
# On a cold mount, listing a by-class folder, looking up a sample in it and
# reading labels.npy decode no sheet and read no sheet bytes (stats.json),
# and the labels are those the batch files hold. A version-2 store of the
# same samples still mounts, with the same labels, found by decoding its
# sheets. paths.txt lists the packed tree's files, one per sample in sample
# order, each in its label's class folder; IDX samples are named
# "<images file>#<index>". A store whose label table is damaged is refused
# at mount with a message naming the store and the table; a damaged path
# table fails paths.txt alone (EIO, one log line).
source "$(dirname "$0")/mount_lib.sh"
need_fuse
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: no numpy for /usr/bin/python3"; exit 77; }

args=(--count-train 3000 --count-test 400 --sheet 128 --classes 7)
"$MKSTORE" "$T/v3.sprites" "${args[@]}" --paths >"$T/mkstore.log" 2>&1 || fail "mkstore v3"
"$MKSTORE" "$T/v2.sprites" "${args[@]}" --version 2 >>"$T/mkstore.log" 2>&1 || fail "mkstore v2"

# labels.npy's bytes after its header, as the sheets (batch files) hold them
npy_body() {
	"$PY" -c 'import sys, numpy as n; sys.stdout.buffer.write(n.load(sys.argv[1]).tobytes())' "$1"
}

# --- version 3, cold: no sheet for by-class/ and labels.npy ------------------
sfs_mount "$T/v3.log" "$T/v3.sprites" "$T/m3" -o cache=64M,prefetch=0
n=$(ls "$T/m3/train/by-class/class3" | wc -l)
[[ $n -gt 0 ]] || fail "by-class/class3 is empty"
first=$(ls "$T/m3/train/by-class/class3" | head -1)
stat "$T/m3/train/by-class/class3/$first" >/dev/null || fail "lookup of by-class/class3/$first"
npy_body "$T/m3/train/labels.npy" >"$T/labels3" || fail "reading labels.npy"
npy_body "$T/m3/test/labels.npy" >"$T/labels3-test" || fail "reading test/labels.npy"
dec=$(stat_field "$T/m3" sheets_decoded)
rd=$(stat_field "$T/m3" store_bytes_read)
echo "v3 cold: ls by-class/class3 ($n entries), a lookup, both labels.npy: $dec sheets decoded, $rd sheet bytes read"
[[ $dec -eq 0 && $rd -eq 0 ]] ||
	fail "version 3: by-class/ and labels.npy decoded $dec sheets and read $rd bytes, expected none"
cmp "$T/labels3" <("$MOUNT_CHECK" --labels "$T/v3.sprites" train) ||
	fail "train/labels.npy differs from the labels in the batch files"
cmp "$T/labels3-test" <("$MOUNT_CHECK" --labels "$T/v3.sprites" test) ||
	fail "test/labels.npy differs from the labels in the batch files"
want=$("$PY" -c 'import sys; print(open(sys.argv[1], "rb").read().count(bytes([3])))' "$T/labels3")
[[ $n -eq $want ]] || fail "by-class/class3 lists $n samples, labels.npy has $want of class 3"
"$PY" - "$T/m3/dataset.json" true '"paths.txt"' <<'PYEOF' || fail "version 3: dataset.json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format_version"] == 3, d["format_version"]
assert d["label_table"] is json.loads(sys.argv[2]), d["label_table"]
for s in d["splits"].values():
    assert s["paths"] == json.loads(sys.argv[3]), s
PYEOF
# paths.txt: "<split>/<class>/<i>.png" as mkstore --paths names them
"$PY" - "$T/m3" <<'PYEOF' || fail "version 3: paths.txt"
import json, os, sys
import numpy as np
m = sys.argv[1]
d = json.load(open(os.path.join(m, "dataset.json")))
for split in ("train", "test"):
    lines = open(os.path.join(m, split, "paths.txt"), "rb").read().split(b"\n")
    assert lines[-1] == b"", "paths.txt does not end with a newline"
    lines = lines[:-1]
    lab = np.load(os.path.join(m, split, "labels.npy"))
    assert len(lines) == len(lab) == d["splits"][split]["count"], (len(lines), len(lab))
    for i, (p, l) in enumerate(zip(lines, lab)):
        want = f"{split}/{d['classes'][l]}/{i}.png".encode()
        assert p == want, f"{split} sample {i}: {p!r}, expected {want!r}"
print("paths.txt: one line per sample, in sample order, in its label's class folder")
PYEOF
# the rest of the mount still checks out, the label table included
"$MOUNT_CHECK" "$T/v3.sprites" "$T/m3" --epochs 1 --only json,labels,byclass --step 7 >"$T/check3.log" 2>&1 ||
	fail "mount_check on the version-3 store: $(tail -3 "$T/check3.log")"
sfs_umount "$T/m3"

# --- version 2: the same labels, from the sheets -----------------------------
sfs_mount "$T/v2.log" "$T/v2.sprites" "$T/m2" -o cache=64M,prefetch=0
n2=$(ls "$T/m2/train/by-class/class3" | wc -l)
dec=$(stat_field "$T/m2" sheets_decoded)
echo "v2 cold: ls by-class/class3 ($n2 entries): $dec sheets decoded"
[[ $dec -gt 0 ]] || fail "version 2: by-class/ decoded no sheet: where did its labels come from?"
[[ $n2 -eq $n ]] || fail "version 2 lists $n2 samples of class 3, version 3 $n"
cmp <(npy_body "$T/m2/train/labels.npy") "$T/labels3" || fail "version 2 and 3 labels.npy differ"
[[ -e $T/m2/train/paths.txt ]] && fail "version 2: paths.txt without a path table"
ls "$T/m2/train" | grep -q paths.txt && fail "version 2 lists paths.txt"
"$PY" - "$T/m2/dataset.json" false null <<'PYEOF' || fail "version 2: dataset.json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format_version"] == 2, d["format_version"]
assert d["label_table"] is json.loads(sys.argv[2]), d["label_table"]
for s in d["splits"].values():
    assert s["paths"] is None, s
PYEOF
sfs_umount "$T/m2"

# --- a packed tree: paths.txt names its files --------------------------------
"$MKTREE" gray "$T/tree" 9 >"$T/mktree.log" || fail "mktree"
"$SPRITEFS_PACK" -q "$T/tree" "$T/tree.sprites" >"$T/pack.log" 2>&1 || fail "pack: $(cat "$T/pack.log")"
sfs_mount "$T/tree.log" "$T/tree.sprites" "$T/mt"
"$PY" - "$T/mt" "$T/tree" <<'PYEOF' || fail "paths.txt of a packed tree"
import json, os, sys
import numpy as np
m, tree = sys.argv[1], sys.argv[2]
d = json.load(open(os.path.join(m, "dataset.json")))
for split in d["splits"]:
    lines = open(os.path.join(m, split, "paths.txt")).read().split("\n")[:-1]
    lab = np.load(os.path.join(m, split, "labels.npy"))
    files = sorted(os.path.relpath(os.path.join(r, f), tree)
                   for r, _, fs in os.walk(os.path.join(tree, split)) for f in fs)
    assert sorted(lines) == files, f"{split}: paths.txt {sorted(lines)[:3]}..., tree {files[:3]}..."
    for p, l in zip(lines, lab):
        assert p.split("/")[1] == d["classes"][l], f"{p}: label {l} ({d['classes'][l]})"
    print(f"{split}: paths.txt names the tree's {len(files)} files, each in its label's folder")
PYEOF
sfs_umount "$T/mt"
"$MKTREE" idx "$T/idx" 50 6 5 >"$T/mktree.log" || fail "mktree idx"
"$SPRITEFS_PACK" -q "$T/idx" "$T/idx.sprites" >"$T/pack.log" 2>&1 || fail "pack idx: $(cat "$T/pack.log")"
sfs_mount "$T/idx.log" "$T/idx.sprites" "$T/mi"
diff <(seq 0 49 | sed 's/^/train-images-idx3-ubyte#/') "$T/mi/train/paths.txt" >/dev/null ||
	fail "IDX paths: $(head -3 "$T/mi/train/paths.txt")"
sfs_umount "$T/mi"

# --- a damaged label table is refused at mount, naming store and table --------
cp "$T/v3.sprites" "$T/badlab.sprites"
"$PY" - "$T/badlab.sprites" <<'PYEOF' || fail "corrupting the label table"
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(440)  # struct sprite_header.labels_offset
    off = struct.unpack("<Q", f.read(8))[0]
    assert off
    f.seek(off + 100)
    b = f.read(1)
    f.seek(off + 100)
    f.write(bytes([b[0] ^ 1]))
PYEOF
mkdir -p "$T/mbad"
MOUNTS+=("$T/mbad")
rc=0
timeout 60 "$SPRITEFS" -f "$T/badlab.sprites" "$T/mbad" >"$T/badlab.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "a damaged label table mounted (exit $rc)"
is_mounted "$T/mbad" && fail "a damaged label table left a mount"
grep -q "$T/badlab.sprites" "$T/badlab.log" && grep -q "label table: checksum mismatch" "$T/badlab.log" ||
	fail "message does not name the store and the label table: $(cat "$T/badlab.log")"
echo "damaged label table: exit $rc: $(head -1 "$T/badlab.log")"

# --- a damaged path table fails paths.txt only --------------------------------
cp "$T/v3.sprites" "$T/badpath.sprites"
"$PY" - "$T/badpath.sprites" <<'PYEOF' || fail "corrupting the path table"
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(464)  # struct sprite_header.paths_offset, paths_size
    off, size = struct.unpack("<QQ", f.read(16))
    assert off and size
    f.seek(off + size - 3)  # inside the last path
    b = f.read(1)
    f.seek(off + size - 3)
    f.write(bytes([b[0] ^ 1]))
PYEOF
rc=0
"$SPRITEFS_PACK" --verify "$T/badpath.sprites" >"$T/verify.log" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q "badpath.sprites: path table: checksum mismatch" "$T/verify.log" ||
	fail "spritefs-pack --verify of a bad path table: exit $rc, $(cat "$T/verify.log")"
sfs_mount "$T/badpath.log" "$T/badpath.sprites" "$T/mp"
ls "$T/mp/train" | grep -qx paths.txt || fail "a bad path table hides paths.txt from the listing"
err=$(cat "$T/mp/test/paths.txt" 2>&1 >/dev/null)
[[ $err == *"Input/output error"* ]] || fail "paths.txt of a bad path table: expected EIO, got: $err"
cat "$T/mp/train/paths.txt" >/dev/null 2>&1 && fail "train/paths.txt read from a bad path table"
cmp <(npy_body "$T/mp/train/labels.npy") "$T/labels3" || fail "a bad path table changed labels.npy"
[[ $(grep -c "badpath.sprites: path table: checksum mismatch; paths.txt gives EIO" "$T/badpath.log") -eq 1 ]] ||
	fail "the log does not name the path table once: $(cat "$T/badpath.log")"
sfs_umount "$T/mp"
echo "damaged path table: paths.txt gives EIO, one log line, the rest serves"
echo PASS
