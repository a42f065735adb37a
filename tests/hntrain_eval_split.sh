#!/usr/bin/env bash
# hntrain_eval_split - without --test-split, hntrain evaluates on the data's
# own held-out split: val, valid, validation or test (the first present), or
# the one split besides train; from an image folder, its store and a mount
# of it alike. Two candidates and none of those names are an error naming
# them; only train means training without evaluation, said in a note. An
# explicit --test-split wins, and --resume keeps the split of the run.
source "$(dirname "$0")/hntrain_common.sh"

"$MKTREE" gray "$TMP/t" 40 >/dev/null || fail "mktree"
mv "$TMP/t/test" "$TMP/t/val"
run() { # ARGS...: hntrain, output in $TMP/out, exit status in rc
	rc=0
	"$HNTRAIN" --model mlp --epochs 1 --batch 16 --seed 3 "$@" >"$TMP/out" 2>&1 || rc=$?
}
split_of() { sed -n 's/^ *[0-9]* train + [0-9]* \([^ ]*\) samples.*/\1/p' "$TMP/out"; }

# a train/val folder, its store, a mount of the store: val, with a test accuracy
run --data "$TMP/t"
[[ $rc -eq 0 && $(split_of) == val ]] || { cat "$TMP/out"; fail "train/val folder: not evaluated on val"; }
grep -Eq "test [0-9.]+%" "$TMP/out" || { cat "$TMP/out"; fail "train/val folder: no evaluation"; }
folder=$(grep -o "weights xxh3 [0-9a-f]*" "$TMP/out")
"$SPRITEFS_PACK" -q "$TMP/t" "$TMP/t.sprites" || fail "spritefs-pack"
run --data "$TMP/t.sprites"
[[ $rc -eq 0 && $(split_of) == val ]] || { cat "$TMP/out"; fail "train/val store: not evaluated on val"; }
[[ $(grep -o "weights xxh3 [0-9a-f]*" "$TMP/out") == "$folder" ]] || fail "store and folder differ"
mount_store "$TMP/t.sprites" "$TMP/mnt"
run --data "$TMP/mnt"
[[ $rc -eq 0 && $(split_of) == val ]] || { cat "$TMP/out"; fail "train/val mount: not evaluated on val"; }
[[ $(grep -o "weights xxh3 [0-9a-f]*" "$TMP/out") == "$folder" ]] || fail "mount and folder differ"

# val before test; one other split of any name; the usual names before it
cp -r "$TMP/t/val" "$TMP/t/test"
run --data "$TMP/t"
[[ $(split_of) == val ]] || { cat "$TMP/out"; fail "train/val/test: $(split_of), want val"; }
mkdir -p "$TMP/u" && cp -r "$TMP/t/train" "$TMP/u/" && cp -r "$TMP/t/val" "$TMP/u/holdout"
run --data "$TMP/u"
[[ $rc -eq 0 && $(split_of) == holdout ]] || { cat "$TMP/out"; fail "train/holdout: $(split_of)"; }

# two others, none of the usual names: an error naming both; --test-split picks
cp -r "$TMP/t/val" "$TMP/u/extra"
run --data "$TMP/u"
[[ $rc -eq 1 ]] || { cat "$TMP/out"; fail "train/holdout/extra: exit $rc, want 1"; }
grep -q "which split is the evaluation one? extra, holdout (give --test-split NAME, or none)" \
	"$TMP/out" || { cat "$TMP/out"; fail "train/holdout/extra: message"; }
run --data "$TMP/u" --test-split extra --checkpoint "$TMP/u.ckpt"
[[ $rc -eq 0 && $(split_of) == extra ]] || { cat "$TMP/out"; fail "--test-split extra: $(split_of)"; }
# --resume evaluates on the run's split, not on what the data would give
run --data "$TMP/u" --resume "$TMP/u.ckpt" --epochs 2
[[ $rc -eq 0 && $(split_of) == extra ]] || { cat "$TMP/out"; fail "--resume: $(split_of), want extra"; }

# only train: a note, no evaluation
run --data "$TMP/t/train"
[[ $rc -eq 0 ]] || { cat "$TMP/out"; fail "a flat class folder: exit $rc"; }
grep -q "note: $TMP/t/train has no split besides train: training without evaluation" "$TMP/out" ||
	{ cat "$TMP/out"; fail "a flat class folder: no note"; }
grep -q "test -" "$TMP/out" || { cat "$TMP/out"; fail "a flat class folder: evaluated"; }
echo "PASS"
