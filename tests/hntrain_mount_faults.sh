#!/usr/bin/env bash
# hntrain_mount_faults - hntrain over a spritefs mount that cannot serve all
# it lists. A sheet that fails its checksum: a run whose samples avoid it
# (a --limit pick with none on it) trains with the store's weights; a run that needs it stops before
# training, naming the file (labels.npy of a version-2 store, whose labels
# are in the sheets; images.npy of a version-3 one, whose label table keeps
# labels.npy whole), the sample range and the EIO with what it means.
# Epoch views the mount cannot serve (a seed it has no room for: ENOSPC after
# 1,024 seeds, here a small one and one of 20 digits): hntrain gathers from images.npy with the
# same weights, and says so once; its banner never claims views it cannot read.
# Views that stop opening during a run: the mount replaced by one whose seed
# table is full (ENOSPC), epochs past the views the mount lists (-o epochs=),
# a copy of a mount on local disk holding epoch 0's views only (ENOENT): the
# run switches to gathering, says so once, and ends with the weights of a run
# that gathered from the start. A seed table filled by others during a run
# takes nothing from it: its seed got a slot at start.
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
# --limit draws its samples by the seed: the first seed whose 20 avoid sheet 5
# (the ids from the good store, HNTRAIN_DUMP_IDS; --plan trains nothing)
for s in $(seq 1 40); do
	HNTRAIN_DUMP_IDS="$TMP/ids" "$HNTRAIN" --data "$TMP/good.sprites" --limit 20 --seed "$s" \
		--model mlp --plan >/dev/null 2>&1 || fail "hntrain --plan with HNTRAIN_DUMP_IDS"
	awk '$1 >= 640 && $1 < 768 { hit = 1 } END { exit hit }' "$TMP/ids" && break
	s=
done
[[ -n $s ]] || fail "no seed in 1-40 draws 20 samples outside sheet 5"
avoid=(--model mlp --epochs 2 --batch 4 --limit 20 --seed "$s")
ref=$(hash_of --data "$TMP/good.sprites" "${avoid[@]}")
h=$(hash_of --data "$TMP/mnt" "${avoid[@]}")
[[ $h == "$ref" ]] || fail "mount --limit 20 --seed $s (none on the bad sheet): weights $h, the store gives $ref"
echo "ok: --limit 20 --seed $s trains past the bad sheet: $h"
h=$(hash_of --data "$TMP/mnt" --preload "${avoid[@]}")
[[ $h == "$ref" ]] || fail "mount --limit 20 --seed $s --preload: weights $h, the store gives $ref"
# version 3: labels.npy comes from the label table; the pixels fail
cmp <(/usr/bin/python3 -c 'import sys,numpy as n; sys.stdout.buffer.write(n.load(sys.argv[1]).tobytes())' \
	"$TMP/mnt/train/labels.npy") <("$MOUNT_CHECK" --labels "$TMP/good.sprites" train) ||
	fail "labels.npy of a version-3 store with a bad sheet differs from the store's labels"
expect_fail "train/images.npy: samples? [0-9-]+: Input/output error \(the mount could not verify a sheet" \
	--data "$TMP/mnt" "${common[@]}" --test-split none
grep -q "not a .npy file" "$TMP/err" && fail "a read error is reported as a bad .npy file"
expect_fail "images.npy: samples? (6[4-9][0-9]|7[0-5][0-9]|76[0-7])(-[0-9]+)?: Input/output error" \
	--data "$TMP/mnt" --limit 1000 "${common[@]}"
# version 2: the labels are in the sheets, and labels.npy stops at the bad one
"$MKSTORE" "$TMP/v2.sprites" --count-train 2000 --count-test 300 --sheet 128 --version 2 >/dev/null ||
	fail "mkstore --version 2"
"$MOUNT_CHECK" --corrupt "$TMP/v2.sprites" 5 >/dev/null || fail "corrupt v2"
mount_store "$TMP/v2.sprites" "$TMP/mnt-v2"
expect_fail "train/labels.npy: samples 640-767: Input/output error \(the mount could not verify a sheet" \
	--data "$TMP/mnt-v2" "${common[@]}" --test-split none
expect_fail "train/labels.npy: samples 640-767: Input/output error" --data "$TMP/mnt-v2" --limit 1000 \
	"${common[@]}"
# a pick with none on the bad sheet reads only the labels of the sheets it uses
hash_of --data "$TMP/mnt-v2" "${avoid[@]}" >/dev/null
echo "ok: version 2, --limit 20 --seed $s trains past the bad sheet's labels"

# --- --skip-bad-sheets: train around the bad sheet ------------------------------
# The store, the mount (its epoch views at --batch 64: the view on the bad
# sheet is gathered around it) and both preloaded give the same weights:
# the order is drawn over the same 2,000 indices, and sheet 5's 128 samples
# are left out of every epoch where they fall. Named once, counted in the log.
skip=(--model mlp --epochs 2 --batch 64 --seed 3 --skip-bad-sheets)
skip_run() { # NAME ARGS...: hntrain "${skip[@]}" ARGS, its log checked; prints the hash
	local name=$1 h
	shift
	rm -f "$TMP/skip.jsonl"
	h=$(hash_of "${skip[@]}" --log "$TMP/skip.jsonl" "$@")
	/usr/bin/python3 - "$TMP/skip.jsonl" "$name" <<'PY' || fail "$name: the log does not count the skipped sheet"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
final = lines[-1]
assert final["skipped_sheets"] == 1 and final["skipped_sheet_samples"] == 128, final
assert [l["samples"] for l in lines[:-1]] == [2000 - 128] * 2, [l["samples"] for l in lines[:-1]]
PY
	[[ $(grep -c "skipped .*samples 640-767 of the training split skipped" "$TMP/stderr") -eq 1 ]] ||
		{ cat "$TMP/stderr" >&2; fail "$name: the bad sheet is not named exactly once"; }
	printf '%s\n' "$h"
}
h_store=$(skip_run store --data "$TMP/s.sprites")
grep -q "s.sprites: sheet 5: " "$TMP/stderr" || fail "store: the message does not name sheet 5: $(cat "$TMP/stderr")"
h_mount=$(skip_run mount --data "$TMP/mnt")
grep -q "train/images.npy: sample 7[0-9][0-9]\|train/images.npy: sample 6[4-9][0-9]" "$TMP/stderr" ||
	fail "mount: the message does not name a sample of the bad sheet: $(cat "$TMP/stderr")"
h_spre=$(skip_run "store --preload" --data "$TMP/s.sprites" --preload)
h_mpre=$(skip_run "mount --preload" --data "$TMP/mnt" --preload)
[[ $h_mount == "$h_store" && $h_spre == "$h_store" && $h_mpre == "$h_store" ]] ||
	fail "--skip-bad-sheets: store $h_store, mount $h_mount, store --preload $h_spre, mount --preload $h_mpre"
echo "ok: --skip-bad-sheets: 128 samples of sheet 5 skipped, weights $h_store from store, mount, preloaded"
# without a bad sheet the option changes nothing
h=$(hash_of "${skip[@]}" --data "$TMP/good.sprites")
[[ $h == "$(hash_of "${skip[@]:0:8}" --data "$TMP/good.sprites")" ]] ||
	fail "--skip-bad-sheets on a good store changed the weights"
[[ $h != "$h_store" ]] || fail "the run that skipped a sheet has the weights of the whole store"
# without the option the run stops, and says what would go on
expect_fail "sheet 5: .*--skip-bad-sheets trains without its samples" --data "$TMP/s.sprites" "${skip[@]:0:8}"
expect_fail "Input/output error .*--skip-bad-sheets trains without its samples" --data "$TMP/mnt" "${skip[@]:0:8}"
# a source without sheets refuses it (a usage error)
expect_fail "--skip-bad-sheets does not apply to an image folder" --data "$TMP" "${skip[@]}"

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

# --- epoch views that stop opening during a run -------------------------------
# mid_check NAME SEED NOTES ARGS...: the run ($TMP/out, $TMP/err) said epoch
# views in its banner, NOTES notes that it gathers (naming an epoch past 0: said
# during the run), and ended with the weights of the store and of a run on mnt2
# (full seed table: gathered from the start) with the same seed.
mid_check() {
	local name=$1 seed=$2 want=$3 h ref gathered notes
	shift 3
	ref=$(hash_of --data "$TMP/good.sprites" "$@" --seed "$seed")
	gathered=$(hash_of --data "$TMP/mnt2" "$@" --seed "$seed")
	[[ $gathered == "$ref" ]] || fail "$name: gathered from the start $gathered, the store gives $ref"
	h=$(sed -n 's/^weights xxh3 \([0-9a-f]*\)$/\1/p' "$TMP/out")
	[[ $h == "$ref" ]] || { cat "$TMP/err" >&2; fail "$name: weights '$h', gathering from the start gives $ref"; }
	grep -q "^data: .*epoch views train/epochs/$seed/" "$TMP/out" ||
		fail "$name: banner: $(head -1 "$TMP/out")"
	notes=$(grep -c "note: .*gathering from train/images.npy" "$TMP/err")
	[[ $notes -eq $want ]] || { cat "$TMP/err" >&2; fail "$name: $notes notes that it gathers, want $want"; }
	if ((want)); then
		grep -q "note: [^ ]*/train/epochs/$seed/[1-9]" "$TMP/err" ||
			fail "$name: the note does not name a later epoch: $(grep note: "$TMP/err")"
	fi
	echo "ok: $name: weights $h, $notes note(s) $(grep -o 'note: [^;]*' "$TMP/err" | head -c 150)"
}
# run_paused SEED MOUNT ACTION ARGS...: hntrain on MOUNT, frozen (SIGSTOP) once
# its first epoch is logged, while ACTION runs; then let go and waited for.
run_paused() {
	local seed=$1 mnt=$2 action=$3 pid rc=0
	shift 3
	rm -f "$TMP/log.jsonl"
	"$HNTRAIN" --data "$mnt" "$@" --seed "$seed" --log "$TMP/log.jsonl" >"$TMP/out" 2>"$TMP/err" &
	pid=$!
	HN_PIDS+=("$pid")
	for _ in $(seq 2000); do
		[[ -s $TMP/log.jsonl ]] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.005
	done
	kill -STOP "$pid" 2>/dev/null
	[[ -s $TMP/log.jsonl ]] || { kill -CONT "$pid"; cat "$TMP/err" >&2; fail "seed $seed: no epoch logged"; }
	[[ $(wc -l <"$TMP/log.jsonl") -lt 3 ]] || { kill -CONT "$pid"; fail "seed $seed: caught too late"; }
	"$action"
	kill -CONT "$pid"
	wait "$pid" || rc=$?
	[[ $rc -eq 0 ]] || { cat "$TMP/err" >&2; fail "seed $seed: hntrain exited $rc"; }
}
long=(--model mlp --epochs 12 --batch 64)

# another process fills the seed table while the run is paused: its own seed
# got a slot at start, so its views keep opening
mount_store "$TMP/good.sprites" "$TMP/mnt3"
fill_mnt3() {
	for s in $(seq 100 1121); do # with seeds 0 and 31: 1,024
		[[ -d $TMP/mnt3/train/epochs/$s ]] || fail "mnt3: seed $s did not open"
	done
	ls -d "$TMP/mnt3/train/epochs/5000" >/dev/null 2>&1 && fail "mnt3: the seed table is not full"
}
run_paused 31 "$TMP/mnt3" fill_mnt3 "${long[@]}"
mid_check "seed table filled during the run" 31 0 "${long[@]}"

# the mount is replaced during the run (lazy unmount; the old daemon serves the
# files already open) by one whose seed table is full: ENOSPC from then on
mount_store "$TMP/good.sprites" "$TMP/mnt4"
replace_mnt4() {
	fusermount3 -u -z "$TMP/mnt4" || fail "fusermount3 -u -z mnt4"
	mount_store "$TMP/good.sprites" "$TMP/mnt4"
	for s in $(seq 100 1122); do
		[[ -d $TMP/mnt4/train/epochs/$s ]] || fail "mnt4: seed $s did not open"
	done
}
run_paused 32 "$TMP/mnt4" replace_mnt4 "${long[@]}"
mid_check "mount replaced by a full one during the run" 32 1 "${long[@]}"
grep -q "note: [^ ]*/train/epochs/32/[0-9]*/[0-9]*\.sprite: No space left on device" "$TMP/err" ||
	fail "replaced mount: the note does not say ENOSPC: $(grep note: "$TMP/err")"

# epochs past the views the mount lists (-o epochs=2)
mount_store "$TMP/good.sprites" "$TMP/mnt5" -o epochs=2
short=(--model mlp --epochs 4 --batch 64)
"$HNTRAIN" --data "$TMP/mnt5" "${short[@]}" --seed 33 >"$TMP/out" 2>"$TMP/err" ||
	{ cat "$TMP/err" >&2; fail "hntrain on -o epochs=2 failed"; }
mid_check "epochs past the mount's 2" 33 1 "${short[@]}"
grep -q "note: [^ ]*/train/epochs/33/2: " "$TMP/err" ||
	fail "-o epochs=2: the note does not name epoch 2: $(grep note: "$TMP/err")"

# a copy of a mount in a plain folder, with epoch 0's views only: ENOENT at epoch 1
# (the mount lists zero-padded names, hntrain opens the plain numbers)
mkdir -p "$TMP/copy/train/epochs/34/0" "$TMP/copy/test"
cp "$TMP/mnt5/dataset.json" "$TMP/copy/" &&
	cp "$TMP/mnt5/train/images.npy" "$TMP/mnt5/train/labels.npy" "$TMP/copy/train/" &&
	cp "$TMP/mnt5/test/images.npy" "$TMP/mnt5/test/labels.npy" "$TMP/copy/test/" ||
	fail "copying the mount"
for f in "$TMP/mnt5/train/epochs/34/0/"*.sprite; do
	[[ -f $f ]] || fail "no epoch views of seed 34 on mnt5"
	n=${f##*/}
	cp "$f" "$TMP/copy/train/epochs/34/0/$((10#${n%.sprite})).sprite" || fail "copying $f"
done
[[ $(ls "$TMP/copy/train/epochs/34/0" | wc -l) -eq 32 ]] || fail "copy: not 32 views of epoch 0"
"$HNTRAIN" --data "$TMP/copy" "${short[@]}" --seed 34 >"$TMP/out" 2>"$TMP/err" ||
	{ cat "$TMP/err" >&2; fail "hntrain on a copy of the mount failed"; }
mid_check "copy with epoch 0's views only" 34 1 "${short[@]}"
grep -q "note: [^ ]*/train/epochs/34/1/[0-9]*\.sprite: No such file or directory" "$TMP/err" ||
	fail "copy: the note does not say ENOENT at epoch 1: $(grep note: "$TMP/err")"
echo "PASS"
