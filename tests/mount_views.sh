#!/usr/bin/env bash
# mount_views.sh - every view of the mount (batch files, images.npy,
# labels.npy, by-class images, sheet images, epoch views, dataset.json) is
# byte-exact against the store, checked by mount_check (an independent
# decode), over a matrix of stores and options: gray and RGB and RGBA tiles,
# lz4 and raw sheets, partial last sheets, full and windowed shuffles, tiles
# below a page (copied into the reply) and of a page or more (replied from
# the sheets, up to the pin limit, then copied), O_DIRECT and buffered reads, opens by the kernel (no_open) and by the daemon, the
# store on disk and on tmpfs. Prints the combination
# that failed. Also: by-class names when class names repeat, are numbers, are
# not UTF-8, or number more than 4096.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

# name | mkstore args | spritefs -o options | mount_check args
matrix=(
	"gray-lz4|--count-train 3000 --count-test 517 --sheet 256|cache=64M|--epochs 2 --order 3"
	"rgb-raw-windowed|--count-train 1003 --count-test 100 --tile 32x30x3 --sheet 64 --codec none --classes 7 --window 4|cache=2M,batch=100,prefetch=4,seed=11|--seed 11 --epochs 2"
	"rgba-buffered|--count-train 500 --count-test 0 --tile 9x7x4 --sheet 50 --classes 3|cache=16M,direct=0,batch=33,window=3,kernel_open=0|--epochs 1"
	"gray-one-sheet|--count-train 10 --count-test 1 --sheet 1024 --classes 2|cache=8M,batch=3,workers=1,prefetch=0|--epochs 3 --direct"
	"rgb-large-tiles|--count-train 700 --count-test 50 --tile 48x40x3 --sheet 40 --classes 5|cache=32M,batch=100|--epochs 2 --direct"
	"gray-page-tiles|--count-train 600 --count-test 30 --tile 64x64x1 --sheet 50 --classes 4|cache=16M,batch=7|--epochs 1"
)
for row in "${matrix[@]}"; do
	IFS='|' read -r name mk opts chk <<<"$row"
	for where in disk tmpfs; do
		dir=$T/$where
		[[ $where == tmpfs ]] && dir=$(mktemp -d /dev/shm/sfs-test.XXXXXX)
		mkdir -p "$dir"
		# shellcheck disable=SC2086
		"$MKSTORE" "$dir/s.sprites" $mk >"$T/mkstore.log" 2>&1 || fail "[$name/$where] mkstore $mk"
		sfs_mount "$T/spritefs.log" "$dir/s.sprites" "$T/mnt" -o "$opts"
		# shellcheck disable=SC2086
		"$MOUNT_CHECK" "$dir/s.sprites" "$T/mnt" $chk >"$T/check.log" 2>&1 ||
			fail "[$name/$where] mount_check $chk with -o $opts: $(tail -5 "$T/check.log")"
		echo "[$name/$where] $(tail -1 "$T/check.log")"
		if [[ $name == *windowed* ]] && ! grep -q '"order": "windowed"' "$T/mnt/dataset.json"; then
			fail "[$name/$where] expected a windowed order: $(cat "$T/mnt/dataset.json")"
		fi
		direct=$(sed -n 's/.*"direct_io": \([a-z]*\).*/\1/p' "$T/mnt/.spritefs/stats.json")
		if [[ $opts == *direct=0* && $direct != false ]]; then
			fail "[$name/$where] direct=0 but stats say direct_io=$direct"
		fi
		[[ $(stat_field "$T/mnt" uring_reads) -gt 0 ]] || fail "[$name/$where] no io_uring reads counted"
		sfs_umount "$T/mnt"
		[[ $where == tmpfs ]] && rm -rf "$dir"
	done
done
# by-class/ directory names from class names that cannot all be used as they
# are: repeats, numbers, bytes that are not UTF-8, more than 4096 classes.
# docs/FORMAT.md's rule: a class keeps its name when no class before it has
# the same one and the name is UTF-8 and not a number other than its own;
# otherwise its directory is its number. dataset.json stays valid UTF-8 JSON.
printf '%s\n' 3 cat cat 6 4 dog cat "Ankle boot" $'Caf\xe9' $'Caf\xc3\xa9' $'\xc0\xaf' \
	$'\xed\xa0\x80x' $'\xf0\x9f\x98\x80' >"$T/names13"
for _ in $(seq 5000); do echo x; done >"$T/names5000"
for c in 13 5000; do
	"$MKSTORE" "$T/n.sprites" --count-train 300 --count-test 0 --classes "$c" --sheet 64 \
		--class-names "$T/names$c" >"$T/mkstore.log" 2>&1 || fail "[names$c] mkstore"
	sfs_mount "$T/spritefs.log" "$T/n.sprites" "$T/mnt" -o cache=16M
	/usr/bin/python3 - "$T/mnt" "$c" <<'PY' || fail "[names$c] by-class names"
import json, os, sys
m, c = sys.argv[1], int(sys.argv[2])
meta = json.loads(open(f"{m}/dataset.json", "rb").read().decode("utf-8"))
if c == 13:  # Latin-1, UTF-8, an overlong "/", a surrogate, a 4-byte character
    want = ["0", "cat", "2", "3", "4", "dog", "6", "Ankle boot", "8", "Caf\u00e9", "10", "11",
            "\U0001f600"]
    assert meta["classes"][8:] == ["Caf\ufffd", "Caf\u00e9", "\ufffd\ufffd", "\ufffd\ufffd\ufffdx",
                                   "\U0001f600"], meta["classes"]
else:
    want = ["x"] + [str(k) for k in range(1, c)]
assert meta["class_dirs"] == want, ("class_dirs", meta["class_dirs"][:10], want[:10])
raw = open(f"{m}/train/labels.npy", "rb").read()
hl = 10 + int.from_bytes(raw[8:10], "little")
width = 2 if "<u2" in raw[:hl].decode("latin1") else 1
labels = [int.from_bytes(raw[i:i + width], "little") for i in range(hl, len(raw), width)]
# by-class lists the classes with samples in the split (5000 classes, 300 samples: not all)
has = sorted(want[k] for k in set(labels))
listed = os.listdir(f"{m}/train/by-class")
assert sorted(listed) == has, ("listing", sorted(listed)[:10], has[:10])
for k, d in enumerate(want):
    n = len(os.listdir(f"{m}/train/by-class/{d}")) if d in has else 0
    assert n == labels.count(k), (d, n, labels.count(k))
    assert os.path.isdir(f"{m}/train/by-class/{d}") == (n > 0), d
print(f"{c} classes: by-class names unique, as documented; samples per class agree")
PY
	sfs_umount "$T/mnt"
done
# seeds: any 64-bit seed opens (20 digits too) and its views hold its order;
# epochs/ lists every seed looked up so far, afresh after each new one; a
# mount takes 1,024 seeds held at once, the 1,025th gets ENOSPC (logged);
# epochs 0..2046 open under any seed.
"$MKSTORE" "$T/sd.sprites" --count-train 300 --count-test 20 --sheet 64 >"$T/mkstore.log" 2>&1 ||
	fail "[seeds] mkstore"
sfs_mount "$T/spritefs.log" "$T/sd.sprites" "$T/mnt" -o cache=16M,epochs=2
[[ $(ls "$T/mnt/train/epochs") == 0 ]] || fail "[seeds] epochs/ lists $(ls "$T/mnt/train/epochs")"
big=18446744073709551615
"$MOUNT_CHECK" "$T/sd.sprites" "$T/mnt" --seed "$big" --epochs 2 --only epochs >"$T/check.log" 2>&1 ||
	fail "[seeds] views of seed $big: $(tail -5 "$T/check.log")"
[[ -e $T/mnt/train/epochs/18446744073709551616 ]] && fail "[seeds] a seed above 2^64-1 opened"
[[ -d $T/mnt/train/epochs/0/2046 && ! -e $T/mnt/train/epochs/0/2047 ]] ||
	fail "[seeds] epochs 0..2046 should open, 2047 not"
for s in $(seq 1 1022); do
	[[ -d $T/mnt/train/epochs/$s ]] || fail "[seeds] seed $s (of 1024) did not open"
done
listed=$(ls "$T/mnt/train/epochs" | wc -l)
[[ $listed == 1024 ]] || fail "[seeds] epochs/ lists $listed seeds, 1024 looked up"
ls "$T/mnt/train/epochs" | grep -qx "$big" || fail "[seeds] epochs/ does not list $big"
err=$(ls -d "$T/mnt/train/epochs/5000" 2>&1) && fail "[seeds] a 1,025th seed opened"
[[ $err == *"No space left on device"* ]] || fail "[seeds] 1,025th seed: $err"
grep -q "no seed slot for seed 5000" "$T/spritefs.log" || fail "[seeds] no log line for a full seed table"
# one table for the mount: a seed met under train/ opens under test/, a new one does not
[[ -d $T/mnt/test/epochs/777 ]] || fail "[seeds] seed 777 does not open under test/"
[[ -e $T/mnt/test/epochs/6000 ]] && fail "[seeds] a 1,025th seed opened under test/"
"$MOUNT_CHECK" "$T/sd.sprites" "$T/mnt" --seed 1022 --epochs 1 --only epochs >"$T/check.log" 2>&1 ||
	fail "[seeds] views of seed 1022: $(tail -5 "$T/check.log")"
sfs_umount "$T/mnt"
echo "[seeds] 2^64-1 and 1,024 seeds open and list; the next is refused"
echo "PASS"
