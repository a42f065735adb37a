#!/usr/bin/env bash
# hntrain_pinned.sh - the weights hashes docs/HNTRAIN.md ("Pinned weights")
# cites, pinned: a change in the maths (a layer, an optimizer, the order,
# augmentation, dropout, the data path) that moves a single bit of the final
# weights fails here, where a reader of the docs would otherwise find it.
#
# OpenBLAS picks its kernels by CPU model, and different kernels sum in a
# different order, so the pins hold for its Haswell kernels
# (OPENBLAS_CORETYPE=Haswell), which every x86-64 CPU with AVX2 and FMA runs;
# hntrain's own hot loops take their x86-64-v3 clones there too. Other CPUs
# skip (77): they cannot run these kernels.
source "$(dirname "$0")/hntrain_common.sh"
FMNIST=${SPRITEFS_FMNIST:-/usr/share/datasets/fashion-mnist}
[[ $(uname -m) == x86_64 ]] && grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo ||
	{ echo "SKIP: the pins are for x86-64 with AVX2 and FMA"; exit 77; }
[[ -f $FMNIST/train-images-idx3-ubyte.gz || -f $FMNIST/train-images-idx3-ubyte ]] ||
	{ echo "SKIP: no Fashion-MNIST at $FMNIST (Debian's dataset-fashion-mnist)"; exit 77; }
export OPENBLAS_CORETYPE=Haswell

# name | hash | options (each run: 1 epoch of 1,000 training and 200 test samples, the
# seeded sample --limit and --test-limit draw)
PINS=(
	"mlp|b5fea663dadb3117|--model mlp --threads 1"
	"cnn|6e531324409dedc9|--model cnn --threads 1"
	"cnn, 2 threads|6bf63c45b4c08a95|--model cnn --threads 2"
	"cnn, adam|bd6d149d6dc1cdf5|--model cnn --threads 1 --optim adam"
	"cnn-bn, augment|c01bc1610479b6ac|--model cnn-bn --threads 1 --augment crop:2,flip"
	"resnet-fm|94c51ab112872d2a|--model resnet-fm --threads 1"
)
common=(--epochs 1 --limit 1000 --test-limit 200)
for row in "${PINS[@]}"; do
	IFS='|' read -r name want opts <<<"$row"
	# shellcheck disable=SC2086 # opts is a list of words
	same_hash "$name" "$want" --data "$FMNIST" "${common[@]}" $opts
done

# The same pin from the store packed of these files, and from its mount.
if [[ -n ${SPRITEFS_PACK:-} ]]; then
	"$SPRITEFS_PACK" -q "$FMNIST" "$TMP/f.sprites" >/dev/null 2>&1 || fail "spritefs-pack $FMNIST"
	same_hash "cnn, store" 6e531324409dedc9 --data "$TMP/f.sprites" "${common[@]}" --model cnn --threads 1
	if [[ -n ${SPRITEFS:-} && -e /dev/fuse ]]; then
		mount_store "$TMP/f.sprites" "$TMP/m"
		same_hash "cnn, mount" 6e531324409dedc9 --data "$TMP/m" "${common[@]}" --model cnn --threads 1
	fi
fi
echo PASS
