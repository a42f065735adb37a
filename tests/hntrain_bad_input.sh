#!/usr/bin/env bash
# hntrain_bad_input - every bad input ends with a clear message naming the
# problem and a non-zero exit, never a crash: options, paths, files that are
# not data, a model that does not fit the tiles, a loss that diverges.
source "$(dirname "$0")/hntrain_common.sh"

"$MKSTORE" "$TMP/d.sprites" --count-train 200 --count-test 40 --tile 28x28x1 --classes 4 \
	--sheet 64 >/dev/null || fail "mkstore"
"$MKSTORE" "$TMP/tiny.sprites" --count-train 100 --count-test 10 --tile 4x4x1 --classes 3 \
	>/dev/null || fail "mkstore"
D=(--data "$TMP/d.sprites")

expect_fail "--data PATH is required"
expect_fail "unknown.*--bogus" "${D[@]}" --bogus
expect_fail "--batch: expected" "${D[@]}" --batch 0
expect_fail "--batch: expected" "${D[@]}" --batch abc
expect_fail "--lr: expected" "${D[@]}" --lr -1
expect_fail "--optim: expected sgd, momentum or adam" "${D[@]}" --optim rmsprop
expect_fail "--schedule: expected" "${D[@]}" --schedule linear
expect_fail "--device: expected cpu or gpu" "${D[@]}" --device tpu
expect_fail "--fast needs --device gpu" "${D[@]}" --fast
expect_fail "--tf32 needs --device gpu" "${D[@]}" --tf32
expect_fail "--tf32 and --amp: choose one" "${D[@]}" --tf32 --amp --device gpu
expect_fail "--amp needs --device gpu" "${D[@]}" --amp
expect_fail "--amp needs --device gpu" "${D[@]}" --amp=bf16
expect_fail "--amp=fp8: fp16 or bf16" "${D[@]}" --amp=fp8 --device gpu
expect_fail "--affinity: expected a CPU list" "${D[@]}" --affinity 1-x
# A CPU the machine does not have is a usage error naming the CPUs there are.
expect_fail "--affinity 0,1023: no such CPU 1023 \(this process may use [0-9]" "${D[@]}" \
	--affinity 0,1023
grep -q "^exit 2$" <("$HNTRAIN" "${D[@]}" --affinity 1023 2>/dev/null; echo "exit $?") ||
	fail "--affinity 1023: exit status is not 2"
expect_fail "--loader-affinity 1023: no such CPU 1023" "${D[@]}" --loader-affinity 1023
# A negative number is out of range like any other.
expect_fail '--epochs: expected an integer in \[1, 1000000\], got "-1"' "${D[@]}" --epochs -1
expect_fail "unexpected argument" "${D[@]}" extra
expect_fail "needs a value" "${D[@]}" --epochs
expect_fail "--stop-after" "${D[@]}" --epochs 2 --stop-after 3
expect_fail "No such file" --data "$TMP/missing"
head -c 10000 /dev/urandom >"$TMP/noise.bin"
expect_fail "noise.bin.*not a readable store" --data "$TMP/noise.bin"
head -c 5000 "$TMP/d.sprites" >"$TMP/trunc.sprites"
expect_fail "trunc.sprites" --data "$TMP/trunc.sprites"
mkdir -p "$TMP/empty"
expect_fail "no class folders" --data "$TMP/empty"
mkdir -p "$TMP/junk/train/a" "$TMP/junk/test/a"
echo "not an image" >"$TMP/junk/train/a/x.png"
echo "not an image" >"$TMP/junk/test/a/y.png"
expect_fail "junk: no file of the training split decodes" --data "$TMP/junk"
grep -q "skipped .*/junk/train/a/x.png: not a PNG/TIFF/JPEG/PNM file" "$TMP/err" ||
	fail "the file that does not decode is not named"
# Where a checkpoint cannot be written is found before training, as --log's.
expect_fail "--checkpoint $TMP/nodir/c.ckpt: folder $TMP/nodir: No such file" "${D[@]}" \
	--checkpoint "$TMP/nodir/c.ckpt"
grep -q "^epoch 1" "$TMP/out" && fail "--checkpoint into a missing folder: trained first"
expect_fail "--checkpoint $TMP: .* is a folder" "${D[@]}" --checkpoint "$TMP"
# Outputs that would destroy an input are refused before anything is read (exit 2): the
# store as --checkpoint (replaced) or --log (appended to), also by another name; a file that
# is not a checkpoint as --checkpoint; --log on the --resume checkpoint; one file for both
# outputs; an output inside a --data folder. An empty file or a checkpoint may be replaced.
cp "$TMP/d.sprites" "$TMP/d.orig"
expect_rc2() {
	local pat=$1
	shift
	expect_fail "$pat" "$@"
	grep -q "^exit 2$" <("$HNTRAIN" "$@" >/dev/null 2>&1; echo "exit $?") ||
		fail "hntrain $*: exit status is not 2"
	grep -q "^epoch 1" "$TMP/out" && fail "hntrain $*: trained first"
	return 0
}
# --normalize: the spelling at once, the channel count once the data is open (exit 2 both)
for bad in 0.5 0.5:0 0.5:-1 a:b 0.1:0.2, 1:1,1:1,1:1,1:1,1:1 nan:1; do
	expect_rc2 "^hntrain: --normalize $bad: expected none, auto or MEAN:STD" "${D[@]}" --normalize "$bad"
done
expect_rc2 "^hntrain: --normalize: 3 mean:std pairs for tiles of 1 channel" "${D[@]}" \
	--normalize 0.4:0.2,0.4:0.2,0.4:0.2
# batchnorm and global average pooling: a bad token is named, and gap then conv does not fit
expect_rc2 "bad layer 'bnx'" "${D[@]}" --model c8k3-bnx-r
expect_fail "layer 'c8k3'.*window does not fit a 1x1 input" "${D[@]}" --model gap-c8k3
expect_rc2 "^hntrain: --checkpoint $TMP/d.sprites is the --data store" "${D[@]}" --model mlp \
	--checkpoint "$TMP/d.sprites"
expect_rc2 "^hntrain: --log $TMP/./d.sprites is the --data store" "${D[@]}" --model mlp \
	--log "$TMP/./d.sprites"
ln -s d.sprites "$TMP/link.sprites"
expect_rc2 "^hntrain: --log $TMP/d.sprites is the --data store" --data "$TMP/link.sprites" \
	--model mlp --log "$TMP/d.sprites"
cmp -s "$TMP/d.sprites" "$TMP/d.orig" || fail "a refused run changed the store"
echo "my notes" >"$TMP/notes.jsonl"
expect_rc2 "^hntrain: --checkpoint: $TMP/notes.jsonl exists and is not an hntrain checkpoint" \
	"${D[@]}" --model mlp --checkpoint "$TMP/notes.jsonl"
[[ $(cat "$TMP/notes.jsonl") == "my notes" ]] || fail "--checkpoint replaced a file of notes"
expect_rc2 "^hntrain: --log $TMP/notes.jsonl: a file that is not a JSON-lines log" \
	"${D[@]}" --model mlp --log "$TMP/notes.jsonl"
[[ $(cat "$TMP/notes.jsonl") == "my notes" ]] || fail "--log appended to a file of notes"
"$HNTRAIN" --quiet "${D[@]}" --model mlp --log "$TMP/two.jsonl" >/dev/null &&
	"$HNTRAIN" --quiet "${D[@]}" --model mlp --log "$TMP/two.jsonl" >/dev/null ||
	fail "--log on an existing log"
[[ $(grep -c '"final"' "$TMP/two.jsonl") -eq 2 ]] || fail "--log did not append: $(cat "$TMP/two.jsonl")"
expect_rc2 "^hntrain: --checkpoint and --log both name $TMP/new" "${D[@]}" --model mlp \
	--checkpoint "$TMP/new" --log "$TMP/../${TMP##*/}/new"
mkdir -p "$TMP/tree/train/a"
expect_rc2 "^hntrain: --log $TMP/tree/train/a/l is inside the --data folder $TMP/tree" \
	--data "$TMP/tree" --log "$TMP/tree/train/a/l"
: >"$TMP/empty.ckpt"
"$HNTRAIN" --quiet "${D[@]}" --model mlp --checkpoint "$TMP/empty.ckpt" >/dev/null ||
	fail "--checkpoint on an empty file"
cp "$TMP/empty.ckpt" "$TMP/e2.ckpt"
"$HNTRAIN" --quiet "${D[@]}" --model mlp --checkpoint "$TMP/e2.ckpt" --epochs 2 >/dev/null ||
	fail "--checkpoint on a checkpoint"
cp "$TMP/e2.ckpt" "$TMP/e2.orig"
expect_rc2 "^hntrain: --log $TMP/e2.ckpt is the --resume checkpoint" "${D[@]}" \
	--resume "$TMP/e2.ckpt" --log "$TMP/e2.ckpt"
cmp -s "$TMP/e2.ckpt" "$TMP/e2.orig" || fail "--log appended to the --resume checkpoint"
expect_fail "no split.*valid" "${D[@]}" --test-split valid
expect_fail "cnn with 4x4x1 tiles.*does not fit" --data "$TMP/tiny.sprites" --model cnn
# A model spec that does not parse is a usage error found before the data is opened (exit 2);
# one that does not fit the tiles (above) needs the data (exit 1).
expect_rc2 "^hntrain: --model q17: model: bad layer 'q17'" --data "$TMP/missing" --model q17
expect_rc2 "^hntrain: --model foo: model: bad layer 'foo'" "${D[@]}" --model foo
# --threads: the CPU backend's limit, 64, is the parser's.
expect_rc2 '^hntrain: --threads: expected an integer in \[1, 64\] \(the CPU backend runs at most 64\), got "1000"' \
	"${D[@]}" --threads 1000
expect_rc2 '^hntrain: --threads: expected an integer in \[1, 64\]' "${D[@]}" --threads 65
# A learning rate far too high: the loss explodes (NaN, or a mean above 1e4);
# the message names the epoch and step and suggests a lower --lr.
expect_fail "loss became (NaN|infinite|huge) at epoch 1, step [0-9]+.*lower --lr" \
	"${D[@]}" --model mlp --optim sgd --lr 1000 --epochs 3
# An option that only one kind of source reads is refused for the others (exit 2), before
# the data is opened: --tile, --fit and --strict (image folders), --cache (store files).
mkdir -p "$TMP/idx" "$TMP/imgs/a"
: >"$TMP/idx/train-images-idx3-ubyte"
expect_rc2 "^hntrain: --tile does not apply to a store file \($TMP/d.sprites\)" "${D[@]}" \
	--tile 8x8
expect_rc2 "^hntrain: --strict does not apply to a store file" "${D[@]}" --strict
expect_rc2 "^hntrain: --fit does not apply to a store file \($TMP/d.sprites\)" "${D[@]}" --fit pad
expect_rc2 "^hntrain: --fit: expected crop, pad or stretch, got \"squash\"" "${D[@]}" --fit squash
expect_rc2 "^hntrain: --background does not apply to a store file \($TMP/d.sprites\)" "${D[@]}" \
	--background white
expect_rc2 "^hntrain: --background: expected none, black, white or R,G,B \(each 0-255\), got \"1,2\"" \
	"${D[@]}" --background 1,2
expect_rc2 "^hntrain: --tile does not apply to an IDX folder" --data "$TMP/idx" --tile 8x8
expect_rc2 "^hntrain: --cache does not apply to an image folder \($TMP/imgs\)" \
	--data "$TMP/imgs" --cache 1M
expect_rc2 "^hntrain: --cache does not apply to an IDX folder" --data "$TMP/idx" --cache 1M

# Images of several sizes and no --tile: refused as spritefs-pack refuses them, both
# sizes named (ant/f0000.tif is 8x8; the other is the first read of another size), not
# fitted to whichever sorts first.
"$MKTREE" mixed "$TMP/mixed" 6 >/dev/null || fail "mktree mixed"
expect_fail "images differ in size, 8x8 and [0-9]+x[0-9]+, and no --tile is given .*ant/f0000.tif is 8x8, .*ant/f0[0-9]+\.[a-z]+ is [0-9]+x[0-9]+" \
	--data "$TMP/mixed" --model mlp --epochs 1 --test-split none

# A folder inside a spritefs mount (a split folder, its batches/ ...) is not an image folder
# whose classes are batches, by-class, epochs, sheets: refused, naming the mount's root (exit
# 2); <split>/by-class is one and trains. Without FUSE, a tree laid out as a mount's.
if [[ -n ${SPRITEFS:-} && -e /dev/fuse ]]; then
	mount_store "$TMP/d.sprites" "$TMP/mnt"
else
	echo "note: no spritefs or /dev/fuse: a folder laid out as a mount stands in for one"
	mkdir -p "$TMP/mnt/.spritefs" "$TMP/mnt/train/"{batches,epochs,sheets} \
		"$TMP/mnt/train/by-class/"{a,b}
	echo '{}' >"$TMP/mnt/dataset.json"
fi
for sub in train train/batches train/sheets .spritefs; do
	expect_rc2 "^hntrain: --data: $TMP/mnt/$sub is the folder $sub of the spritefs mount $TMP/mnt, not a data set: give --data $TMP/mnt " \
		--data "$TMP/mnt/$sub" --model mlp
done
expect_rc2 "^hntrain: --cache does not apply to a spritefs mount \($TMP/mnt\): .*-o cache=SIZE" \
	--data "$TMP/mnt" --cache 1M
expect_rc2 "^hntrain: --tile does not apply to a spritefs mount" --data "$TMP/mnt" --tile 8x8
expect_rc2 "^hntrain: --strict does not apply to a spritefs mount" --data "$TMP/mnt" --strict
if [[ -n ${SPRITEFS:-} && -e /dev/fuse ]]; then
	"$HNTRAIN" --data "$TMP/mnt/train/by-class" --model mlp >"$TMP/out" 2>&1 ||
		fail "--data MOUNT/train/by-class: $(cat "$TMP/out")"
	grep -q "^data: image folder $TMP/mnt/train/by-class" "$TMP/out" ||
		fail "--data MOUNT/train/by-class is not read as an image folder: $(cat "$TMP/out")"
	grep -q "200 train + 0 test samples, tiles 28x28x1, 4 classes" "$TMP/out" ||
		fail "--data MOUNT/train/by-class: $(cat "$TMP/out")"
fi

# --version: the project's version and store format (as spritefs says them) and the backends,
# without touching a GPU; -V the same.
v=$("$HNTRAIN" --version) || fail "--version exited $?"
[[ $("$HNTRAIN" -V) == "$v" ]] || fail "-V differs from --version"
grep -qE '^hntrain [0-9]+\.[0-9]+\.[0-9]+ \(store format [0-9]+\)$' <<<"$v" || fail "--version: $v"
grep -q '^cpu: OpenBLAS [0-9]' <<<"$v" || fail "--version names no OpenBLAS: $v"
if [[ ${HNTRAIN_CUDA_BUILT:-0} == 1 ]]; then
	grep -q '^gpu: CUDA plugin /.*hntrain-cuda.so' <<<"$v" || fail "--version: the built plugin is not named: $v"
else
	grep -q '^gpu: ' <<<"$v" || fail "--version: no gpu line: $v"
fi
if [[ -n ${SPRITEFS:-} ]]; then
	sv=$("$SPRITEFS" --version) || fail "spritefs --version"
	want="hntrain ${sv#spritefs }"
	want="${want%%,*})"
	[[ ${v%%$'\n'*} == "$want" ]] || fail "hntrain says '${v%%$'\n'*}', spritefs '$sv'"
fi
# OpenBLAS's core: a generic one forced by the user is kept, and the fast one named
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
	OPENBLAS_CORETYPE=Prescott "$HNTRAIN" -V >"$TMP/v" 2>"$TMP/verr" || fail "-V with OPENBLAS_CORETYPE"
	grep -q '^cpu: OpenBLAS .* Prescott ' "$TMP/v" || fail "the user's core not kept: $(cat "$TMP/v")"
	grep -Eq '^hntrain: warning: OPENBLAS_CORETYPE=Prescott makes OpenBLAS use its Prescott kernels; this CPU has AVX(2|-512): OPENBLAS_CORETYPE=(Haswell|SkylakeX) is faster$' \
		"$TMP/verr" || fail "no warning about the generic core: $(cat "$TMP/verr")"
	# the run hntrain executes again after OpenBLAS fell back (the variable it sets is how it
	# knows): the cpu line says so, and stderr stays empty (scripts read notes there as faults)
	HNTRAIN_BLAS_REEXEC=Prescott OPENBLAS_CORETYPE=Haswell "$HNTRAIN" -V >"$TMP/v" 2>"$TMP/verr" ||
		fail "-V after a restart"
	grep -q '^cpu: OpenBLAS .* Haswell .*(OPENBLAS_CORETYPE set by hntrain: OpenBLAS took Prescott on this CPU)$' \
		"$TMP/v" || fail "the restart not on the cpu line: $(cat "$TMP/v")"
	[[ ! -s $TMP/verr ]] || fail "a restart printed on stderr: $(cat "$TMP/verr")"
fi
echo "ok: $(head -1 <<<"$v")"
echo "PASS"
