#!/usr/bin/env bash
# hntrain_resnet.sh - residual networks (issue 31): the presets' trained
# parameter counts against torchvision's for the same layout (pinned below,
# taken with Debian's python3-torchvision 0.14: the ImageNet layout for tiles
# of 64x64 and up, the CIFAR layout, a 3x3 stride-1 stem and no max-pool,
# below); clear messages for specs whose shapes do not chain or whose
# shortcut changes shape without a projection; weights bit-identical run to
# run for a thread count, and through a checkpoint and --resume; and
# --export archives that load, by name and strictly, into
# torchvision.models.resnet18 / resnet50 (conv1 swapped for the CIFAR stem
# where the layout is CIFAR's) and give hntrain's test loss and accuracy
# from the logits, read through a spritefs mount of the store.
source "$(dirname "$0")/hntrain_common.sh"
PY=/usr/bin/python3

"$MKSTORE" "$TMP/c32.sprites" --count-train 48 --count-test 32 --tile 32x32x3 --classes 10 \
	--sheet 16 >/dev/null || fail "mkstore 32x32x3"
"$MKSTORE" "$TMP/i64.sprites" --count-train 48 --count-test 32 --tile 64x64x3 --classes 1000 \
	--sheet 16 >/dev/null || fail "mkstore 64x64x3"
"$MKSTORE" "$TMP/e64.sprites" --count-train 48 --count-test 32 --tile 64x64x3 --classes 7 \
	--sheet 16 >/dev/null || fail "mkstore 64x64x3, 7 classes"
"$MKSTORE" "$TMP/g28.sprites" --count-train 48 --count-test 32 --tile 28x28x1 --classes 10 \
	--sheet 16 >/dev/null || fail "mkstore 28x28x1"

# 1. parameter counts: sum(p.numel() for p in model.parameters()) of torchvision's models
trained() { # STORE MODEL -> the trained count --plan prints
	"$HNTRAIN" --data "$1" --model "$2" --plan 2>&1 |
		sed -n 's/.*parameters: \([0-9]*\) trained.*/\1/p'
}
while read -r store model want layout; do
	got=$(trained "$TMP/$store.sprites" "$model")
	echo "$model on $store ($layout): $got trained parameters, torchvision $want"
	[[ $got == "$want" ]] || fail "$model on $store: $got trained parameters, torchvision $want"
done <<'EOF'
i64 resnet18 11689512 imagenet-3ch-1000
c32 resnet18 11173962 cifar-3ch-10
g28 resnet18 11172810 cifar-1ch-10
i64 resnet50 25557032 imagenet-3ch-1000
c32 resnet50 23520842 cifar-3ch-10
g28 resnet50 23519690 cifar-1ch-10
EOF
# resnet-fm on 28x28x1: stem 32*9 + 64 | res32: 2*(32*32*9) + 128 | res64s2p: 32*64*9 +
# 64*64*9 + 32*64 + 384 | res128s2p: 64*128*9 + 128*128*9 + 64*128 + 768 | fc 128*10 + 10
got=$(trained "$TMP/g28.sprites" resnet-fm)
[[ $got == 308074 ]] || fail "resnet-fm: $got trained parameters, want 308074"

# 2. bad specs: clear messages before any training
expect_model_error() { # SPEC PATTERN
	local rc=0
	"$HNTRAIN" --data "$TMP/c32.sprites" --model "$1" --epochs 1 >"$TMP/err" 2>&1 || rc=$?
	[[ $rc -ne 0 ]] && grep -q -- "$2" "$TMP/err" && ! grep -q "^epoch" "$TMP/err" ||
		fail "--model $1: exit $rc, want '$2': $(cat "$TMP/err")"
	echo "--model $1: $(tail -1 "$TMP/err")"
}
expect_model_error c8k3p1-res16 "needs a projection (add 'p'"
expect_model_error c8k3p1-res8s2 "from 8x32x32 into 8x16x16: a different shape needs a projection"
expect_model_error c8k3p1-bot8 "into 32x32x32: a different shape needs a projection"
expect_model_error c8k3p1-m4-m4-m4-res8 "a 4x4 window does not fit a 2x2 input"
expect_model_error c8k3p1-res8x0 "bad layer 'res8x0'"
expect_model_error c8k3p1-m3s2p2 "maxpool: at most k / 2"

# 3. determinism: run to run, 1 and 2 threads, and a checkpoint + --resume
common=(--data "$TMP/g28.sprites" --model resnet-fm --epochs 2 --batch 16 --seed 3)
a=$(hash_of "${common[@]}" --threads 2)
b=$(hash_of "${common[@]}" --threads 2)
c=$(hash_of "${common[@]}" --threads 1)
d=$(hash_of "${common[@]}" --threads 1)
echo "resnet-fm: 2 threads $a, again $b; 1 thread $c, again $d"
[[ $a == "$b" ]] || fail "resnet-fm, 2 threads: two runs end with $a and $b"
[[ $c == "$d" ]] || fail "resnet-fm, 1 thread: two runs end with $c and $d"
half=$(hash_of "${common[@]}" --threads 2 --stop-after 1 --checkpoint "$TMP/fm.ckpt")
resumed=$(hash_of --data "$TMP/g28.sprites" --threads 2 --resume "$TMP/fm.ckpt")
echo "resnet-fm: 1 epoch $half, 1 + resume 1: $resumed"
[[ $resumed == "$a" ]] || fail "resnet-fm: resumed run ends with $resumed, the full run with $a"

# 4. --export into torchvision, through the mount
if ! $PY -c "import torch, torchvision" 2>/dev/null; then
	echo "no torch/torchvision for $PY: the export part skipped"
	echo "PASS"
	exit 0
fi
[[ -c /dev/fuse ]] && command -v fusermount3 >/dev/null || {
	echo "no /dev/fuse: the export part skipped"
	echo "PASS"
	exit 0
}
mount_store "$TMP/c32.sprites" "$TMP/c32"
mount_store "$TMP/e64.sprites" "$TMP/e64"
check_export() { # NAME DATA MODEL HNTRAIN-ARGS...
	local name=$1 data=$2 model=$3
	shift 3
	"$HNTRAIN" --data "$data" --model "$model" --threads 2 --export "$TMP/$name.npz" \
		--log "$TMP/$name.jsonl" "$@" >"$TMP/$name.out" 2>&1 ||
		fail "[$name] hntrain: $(tail -3 "$TMP/$name.out")"
	$PY - "$TMP/$name.npz" "$data" "$model" "$TMP/$name.jsonl" >"$TMP/$name.py" 2>&1 <<'PY' ||
import json, sys
import numpy as np
import torch, torch.nn as nn, torchvision
npz, mnt, model, log = sys.argv[1:5]
meta = json.load(open(f"{mnt}/dataset.json"))
h, w, c, k = meta["tile"]["h"], meta["tile"]["w"], meta["tile"]["c"], meta["nclasses"]
net = getattr(torchvision.models, model)(num_classes=k)
if h < 64 or w < 64:  # the CIFAR layout: a 3x3 stride-1 stem, no max-pool
    net.conv1 = nn.Conv2d(c, 64, 3, 1, 1, bias=False)
    net.maxpool = nn.Identity()
z = np.load(npz)
sd = {f[:-len(".npy")] if f.endswith(".npy") else f: torch.from_numpy(z[f]) for f in z.files}
want = {k2 for k2 in net.state_dict() if not k2.endswith("num_batches_tracked")}
assert set(sd) == want, (sorted(set(sd) - want), sorted(want - set(sd)))
net.load_state_dict(sd, strict=False)  # strict but for num_batches_tracked, checked above
images = np.load(f"{mnt}/test/images.npy").reshape(-1, h, w, c)
labels = torch.from_numpy(np.load(f"{mnt}/test/labels.npy").astype(np.int64))
x = torch.from_numpy(images.copy()).permute(0, 3, 1, 2).float().div(255)
with torch.no_grad():
    logits = net.eval()(x)
loss = float(nn.functional.cross_entropy(logits.double(), labels))
got = int((logits.argmax(1) == labels).sum())
final = [r for r in map(json.loads, open(log)) if r.get("test_loss") is not None][-1]
n = len(labels)
print(f"torchvision {model}: loss {loss:.7f} ({got}/{n}), hntrain {final['test_loss']:.7f} "
      f"({round(final['test_acc'] * n)}/{n})")
assert abs(loss - final["test_loss"]) <= 1e-4 * max(1.0, abs(loss)), "losses differ"
assert abs(got - round(final["test_acc"] * n)) <= 1, "accuracies differ"
PY
		fail "[$name] $(tail -5 "$TMP/$name.py")"
	echo "[$name] $(cat "$TMP/$name.py")"
}
check_export r18-imagenet "$TMP/e64" resnet18 --epochs 1 --batch 16
check_export r18-cifar "$TMP/c32" resnet18 --epochs 1 --batch 16
check_export r50-imagenet "$TMP/e64" resnet50 --epochs 1 --batch 16
echo "PASS"
