#!/usr/bin/env bash
# hntrain_fmnist - a short real training run: the mlp on the first 10,000
# Fashion-MNIST training images (IDX folder), 2 epochs, must reach at least
# 78% accuracy on the 10,000 test images (PyTorch gets ~78% after one such
# epoch with the same settings; hntrain reaches ~81% after two).
source "$(dirname "$0")/hntrain_common.sh"
FM=/usr/share/datasets/fashion-mnist
if [[ ! -f $FM/train-images-idx3-ubyte.gz ]]; then
	echo "SKIP: $FM is missing (Debian package dataset-fashion-mnist)"
	exit 77
fi
"$HNTRAIN" --data "$FM" --model mlp --limit 10000 --epochs 2 --lr 0.05 --log "$TMP/log" \
	|| fail "training exited $?"
acc=$(/usr/bin/python3 -c '
import json, sys
l = [json.loads(x) for x in open(sys.argv[1])]
print(l[-2]["test_acc"])' "$TMP/log") || fail "no log"
echo "test accuracy after 2 epochs: $acc"
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.78 else 1)" "$acc" \
	|| fail "test accuracy $acc < 0.78"
echo "PASS"
