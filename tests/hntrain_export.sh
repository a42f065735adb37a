#!/usr/bin/env bash
# hntrain_export.sh - hntrain --export FILE.npz: after short runs (mlp, cnn,
# lenet5 on a gray store, a spec with stride, padding and dropout on an RGB
# one, one with batchnorm and global average pooling), Debian's numpy loads
# the archive, a numpy forward pass written from
# docs/HNTRAIN.md's layout (members by layer name, PyTorch layouts) over the
# test split of a spritefs mount of the store gets the correct count hntrain
# reported, and so does the PyTorch module loaded as docs/HNTRAIN.md shows
# (when torch imports); 2 MPI ranks export too (rank 0). The file is written atomically (no temp left) and
# bad destinations are refused before training.
source "$(dirname "$0")/hntrain_common.sh"
PY=/usr/bin/python3
[[ -x $PY ]] && $PY -c "import numpy" 2>/dev/null || { echo "SKIP: no numpy for /usr/bin/python3"; exit 77; }
[[ -c /dev/fuse ]] && command -v fusermount3 >/dev/null || { echo "SKIP: no /dev/fuse"; exit 77; }

"$MKSTORE" "$TMP/gray.sprites" --count-train 1200 --count-test 300 --sheet 128 >/dev/null ||
	fail "mkstore gray"
"$MKSTORE" "$TMP/rgb.sprites" --count-train 600 --count-test 200 --tile 20x16x3 --sheet 50 \
	--classes 5 >/dev/null || fail "mkstore rgb"
mount_store "$TMP/gray.sprites" "$TMP/gray"
mount_store "$TMP/rgb.sprites" "$TMP/rgb"

check() { # NAME DATA SPEC HNTRAIN-ARGS...
	local name=$1 data=$2 spec=$3
	shift 3
	rm -f "$TMP/$name.jsonl"
	"${RUNNER[@]}" "$HNTRAIN" --data "$data" --model "$spec" --threads 1 --export "$TMP/$name.npz" \
		--log "$TMP/$name.jsonl" "$@" >"$TMP/$name.out" 2>&1 ||
		fail "[$name] hntrain: $(tail -3 "$TMP/$name.out")"
	grep -q "weights exported to $TMP/$name.npz" "$TMP/$name.out" || fail "[$name] no export line"
	ls "$TMP" | grep -q "$name.npz.tmp" && fail "[$name] a temp file was left"
	$PY - "$TMP/$name.npz" "$data" "$spec" "$TMP/$name.jsonl" "$@" >"$TMP/$name.py" 2>&1 <<'PY' ||
import json, re, sys
import numpy as np
npz, mnt, spec, log = sys.argv[1:5]
builtin = {"mlp": "d256-r-d128-r", "cnn": "c32k3-r-m2-c64k3-r-m2-d128-r",
           "lenet5": "c6k5p2-r-m2-c16k5-r-m2-d120-r-d84-r",
           "cnn-bn": "c32k3p1-bn-r-m2-c64k3p1-bn-r-m2-d256-bn-r-x0.3"}
meta = json.load(open(f"{mnt}/dataset.json"))
h, w, c = meta["tile"]["h"], meta["tile"]["w"], meta["tile"]["c"]
k = meta["nclasses"]
images = np.load(f"{mnt}/test/images.npy").reshape(-1, h, w, c)
labels = np.load(f"{mnt}/test/labels.npy").astype(np.int64)
final = [json.loads(l) for l in open(log)][-1]
n = len(labels)
want = round(final["test_acc"] * n)
z = np.load(npz)
tokens = builtin.get(spec, spec).split("-")
if not (tokens[-1].startswith("d") and int(tokens[-1][1:]) == k):
    tokens.append(f"d{k}")
x = images.astype(np.float32).transpose(0, 3, 1, 2) / np.float32(255)  # NCHW
names = []
if "input.mean" in z.files:  # --normalize: per channel, on the 0..1 scale
    mean, std = z["input.mean"], z["input.std"]
    assert mean.shape == std.shape == (c,), (mean.shape, std.shape)
    if "auto" in sys.argv[5:]:  # every training sample of these small stores is used
        tr = np.load(f"{mnt}/train/images.npy").reshape(-1, c).astype(np.float64) / 255
        assert np.allclose(mean, tr.mean(0), atol=1e-6) and np.allclose(std, tr.std(0), atol=1e-6), \
            (mean, std, tr.mean(0), tr.std(0))
    x = (x - mean[None, :, None, None]) / std[None, :, None, None]
    names += ["input.mean", "input.std"]
for i, t in enumerate(tokens):
    m = re.fullmatch(r"c(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?", t)
    if m:
        out, kk, s, p = int(m[1]), int(m[2]), int(m[3] or 1), int(m[4] or 0)
        W, b = z[f"{i}.conv2d.weight"], z[f"{i}.conv2d.bias"]
        assert W.shape == (out, x.shape[1], kk, kk) and W.dtype == np.float32, (i, W.shape)
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (kk, kk), axis=(2, 3))[:, :, ::s, ::s]
        x = np.einsum("nchwij,ocij->nohw", win, W, optimize=True) + b[None, :, None, None]
        names += [f"{i}.conv2d.weight", f"{i}.conv2d.bias"]
        continue
    m = re.fullmatch(r"m(\d+)(?:s(\d+))?", t)
    if m:
        kk = int(m[1]); s = int(m[2] or kk)
        win = np.lib.stride_tricks.sliding_window_view(x, (kk, kk), axis=(2, 3))[:, :, ::s, ::s]
        x = win.max(axis=(4, 5))
    elif t == "r":
        x = np.maximum(x, 0)
    elif t == "bn":  # evaluation: the running statistics
        p = [z[f"{i}.batchnorm.{q}"] for q in ("weight", "bias", "running_mean", "running_var")]
        shape = (1, -1, 1, 1) if x.ndim == 4 else (1, -1)
        g, b, rm, rv = (v.reshape(shape) for v in p)
        x = (x - rm) / np.sqrt(rv + np.float32(1e-5)) * g + b
        names += [f"{i}.batchnorm.{q}" for q in ("weight", "bias", "running_mean", "running_var")]
    elif t == "gap":
        x = x.mean(axis=(2, 3))
    elif t.startswith("x"):
        pass  # dropout: the identity at evaluation
    elif t.startswith("d"):
        W, b = z[f"{i}.dense.weight"], z[f"{i}.dense.bias"]
        x = x.reshape(len(x), -1)
        assert W.shape == (int(t[1:]), x.shape[1]), (i, W.shape, x.shape)
        x = x @ W.T + b
        names += [f"{i}.dense.weight", f"{i}.dense.bias"]
    else:
        sys.exit(f"unknown token {t}")
assert z.files == names, (z.files, names)
got = int((x.argmax(1) == labels).sum())
print(f"numpy forward: {got}/{n} correct, hntrain {want}/{n}")
# The same float32 sums in another order (einsum vs im2col + sgemm) move logits by
# ~1e-6: only a near-tie could flip a prediction, so at most one sample may differ.
assert abs(got - want) <= 1, f"numpy {got} correct, hntrain {want}"
try:
    import warnings
    warnings.filterwarnings("ignore", "Lazy modules")
    import torch, torch.nn as nn
except ImportError:
    print("torch missing: PyTorch part skipped")
    sys.exit(0)
mods, ch, hw = [], c, (h, w)
for t in tokens:
    m = re.fullmatch(r"c(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?", t)
    if m:
        mods.append(nn.Conv2d(ch, int(m[1]), int(m[2]), stride=int(m[3] or 1), padding=int(m[4] or 0)))
        ch = int(m[1])
    elif t[0] == "m":
        m = re.fullmatch(r"m(\d+)(?:s(\d+))?", t)
        mods.append(nn.MaxPool2d(int(m[1]), int(m[2] or m[1])))
    elif t == "r":
        mods.append(nn.ReLU())
    elif t == "bn":
        flat = any(isinstance(q, (nn.Flatten, nn.LazyLinear)) for q in mods)
        mods.append(nn.LazyBatchNorm1d() if flat else nn.LazyBatchNorm2d())
    elif t == "gap":
        mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    elif t[0] == "x":
        mods.append(nn.Dropout(float(t[1:])))
    else:
        if not any(isinstance(q, nn.Flatten) for q in mods):
            mods.append(nn.Flatten())
        mods.append(nn.LazyLinear(int(t[1:])))
model = nn.Sequential(*mods)
model.eval()(torch.zeros(1, c, h, w))  # size the lazy layers (eval: batchnorm takes one sample)
keys = [k for k in model.state_dict() if not k.endswith("num_batches_tracked")]
files = [f for f in z.files if not f.startswith("input.")]
model.load_state_dict({k: torch.from_numpy(z[f]) for k, f in zip(keys, files)}, strict=False)
xt = torch.from_numpy(images.copy()).permute(0, 3, 1, 2).float().div(255)
if "input.mean" in z.files:
    xt = (xt - torch.from_numpy(z["input.mean"])[None, :, None, None]) / \
        torch.from_numpy(z["input.std"])[None, :, None, None]
with torch.no_grad():
    tg = int((model.eval()(xt).argmax(1).numpy() == labels).sum())
print(f"PyTorch module: {tg}/{n} correct")
assert abs(tg - want) <= 1, f"torch {tg} correct, hntrain {want}"
PY
		fail "[$name] $(tail -5 "$TMP/$name.py")"
	echo "[$name] $(tr '\n' ' ' <"$TMP/$name.py")"
}
RUNNER=()
check mlp "$TMP/gray" mlp --epochs 2
check cnn "$TMP/gray" cnn --epochs 1
check lenet5 "$TMP/gray" lenet5 --epochs 1
check spec "$TMP/rgb" c8k3s2p1-r-m2-x0.25-d32-r --epochs 2
# batch normalisation (after a conv and a dense layer) and global average pooling
check bn "$TMP/rgb" c8k3p1-bn-r-m2-c12k3-bn-r-gap-d16-bn-r --epochs 2
# per-channel input normalisation: computed from the training split, and given
check norm "$TMP/rgb" c8k3p1-bn-r-gap --epochs 1 --normalize auto
check normgiven "$TMP/gray" cnn --epochs 1 --normalize 0.3:0.25
# 2 MPI ranks: rank 0 writes the archive of the weights they share
if command -v mpirun >/dev/null && "$HNTRAIN" -V | grep -q "^ranks: MPI"; then
	source "$(dirname "$0")/mpi_env.sh"
	RUNNER=(timeout 150 "${MPIRUN[@]}" -np 2)
	check mpi "$TMP/gray" cnn --epochs 1 --batch 32
	RUNNER=()
else
	echo "hntrain built without MPI: the ranks part skipped"
fi

# the archive is replaced atomically, and a bad destination fails before training
ino=$(stat -c %i "$TMP/mlp.npz")
"$HNTRAIN" --data "$TMP/gray.sprites" --model mlp --export "$TMP/mlp.npz" --quiet >/dev/null ||
	fail "export over an existing archive"
[[ $(stat -c %i "$TMP/mlp.npz") != "$ino" ]] || fail "the archive was rewritten in place, not renamed"
rc=0
"$HNTRAIN" --data "$TMP/gray.sprites" --model mlp --export "$TMP/nodir/w.npz" >"$TMP/err" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q "nodir" "$TMP/err" && ! grep -q "^epoch" "$TMP/err" ||
	fail "--export into a missing folder: exit $rc, $(cat "$TMP/err")"
rc=0
"$HNTRAIN" --data "$TMP/gray.sprites" --model mlp --export "$TMP/gray.sprites" >"$TMP/err" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -q "is the --data store" "$TMP/err" ||
	fail "--export naming the data: exit $rc, $(cat "$TMP/err")"
rc=0
"$HNTRAIN" --data "$TMP/gray.sprites" --model mlp --export "$TMP/l.jsonl" --log "$TMP/l.jsonl" >"$TMP/err" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "--export naming the --log file: exit $rc, $(cat "$TMP/err")"
echo "PASS"
