#!/usr/bin/env bash
# mount_torch_resume.sh - a PyTorch job over a spritefs mount resumes
# mid-epoch: a small model trained 2 epochs from spritefs.torch.EpochDataset
# (CPU, fixed seeds, deterministic algorithms) is stopped inside epoch 1
# and at the end of an epoch, its model, optimizer and the dataset's
# state_dict() saved; a new Python process loads them (load_state_dict)
# and goes on. The ids of the samples it trains on, joined to those before
# the stop, are the uninterrupted run's, and so are the final weights: with
# DataLoader(num_workers=2) (the loop passes the batches it took) and with
# num_workers=0 (the dataset counts them). A rank of 2 x half the batch
# takes the state of 1 x the batch (the same global batch); state_dict()
# without the count under workers, and a state of another seed, are
# refused. Skips without torch for /usr/bin/python3.
source "$(dirname "$0")/mount_lib.sh"
source "$(dirname "$0")/py_lib.sh"
need_fuse
[[ -x $PY ]] && $PY -c "import numpy, torch" 2>/dev/null || { echo "SKIP: no numpy/torch for /usr/bin/python3"; exit 77; }
echo "reader: $PY_READER"

"$MKSTORE" "$T/s.sprites" --count-train 700 --count-test 50 --tile 12x12x1 --sheet 64 \
	--classes 5 >"$T/mkstore.log" 2>&1 || fail "mkstore"
sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/m" -o cache=16M
cat >"$T/train.py" <<'PY'
# train.py MNT OUT MODE WORKERS [STOP_EPOCH STOP_BATCH]: MODE full, stop or resume
import hashlib, sys
import torch
from torch.utils.data import DataLoader
from spritefs.torch import EpochDataset

mnt, out, mode, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stop = (int(sys.argv[5]), int(sys.argv[6])) if mode == "stop" else None
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)
EPOCHS = 2


def make(world=1):
    ds = EpochDataset(mnt, "train", seed=3, batch=32 // world, rank=0, world=world)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(144, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 5))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return ds, model, opt


def step(model, opt, x, y):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def weights(model):
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


ds, model, opt = make()
ids = []
first = 0
if mode == "resume":
    ck = torch.load(f"{out}/ck.pt")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    ds.load_state_dict(ck["data"])
    first = ds.epoch
dl = DataLoader(ds, batch_size=None, num_workers=workers)
for e in range(first, EPOCHS):
    if e != ds.epoch:
        ds.set_epoch(e)
    for k, (x, y, i) in enumerate(dl):
        step(model, opt, x, y)
        ids += i.tolist()
        if stop and (e, k + 1) == stop:
            data = ds.state_dict(batches=k + 1) if workers else ds.state_dict()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "data": data},
                       f"{out}/ck.pt")
            print("stopped", data)
            print("ids", " ".join(map(str, ids)))
            sys.exit(0)
print("ids", " ".join(map(str, ids)))
print("weights", weights(model))
PY
cat >"$T/refuse.py" <<'PY'
import sys
from torch.utils.data import DataLoader
from spritefs.torch import EpochDataset
mnt = sys.argv[1]
ds = EpochDataset(mnt, "train", seed=3, batch=32)
for _ in DataLoader(ds, batch_size=None, num_workers=2):
    break
try:
    ds.state_dict()
    sys.exit("state_dict() under workers, without batches=, was not refused")
except ValueError as e:
    print("refused:", e)
other = EpochDataset(mnt, "train", seed=4, batch=32)
try:
    other.load_state_dict(ds.state_dict(batches=3))
    sys.exit("a state of seed 3 loaded into seed 4")
except ValueError as e:
    print("refused:", e)
half = EpochDataset(mnt, "train", seed=3, batch=16, rank=1, world=2)
half.load_state_dict(ds.state_dict(batches=3))
assert (half.epoch, half.start_batch) == (0, 3), (half.epoch, half.start_batch)
print("2 ranks x 16 take the state of 1 x 32: epoch 0, batch 3")
PY

run() { # OUT-NAME ARGS...: train.py, its stdout into $T/NAME.out
	local name=$1
	shift
	$PY "$T/train.py" "$T/m" "$T" "$@" >"$T/$name.out" 2>"$T/$name.err" ||
		fail "train.py $*: $(tail -5 "$T/$name.err")"
}
field() { sed -n "s/^$1 //p" "$T/$2.out"; }

for workers in 2 0; do
	run full full $workers
	want_ids=$(field ids full) want_w=$(field weights full)
	[[ -n $want_w && $(wc -w <<<"$want_ids") -eq 1400 ]] || fail "the full run: $(head -c 300 "$T/full.out")"
	# 700 samples, batches of 32: 22 per epoch. Inside epoch 1 (7 of them), after its last
	# (22: the state moves on to epoch 2), and after the first batch of epoch 2.
	for at in "0 7" "0 22" "1 1"; do
		read -r e b <<<"$at"
		run stop stop $workers "$e" "$b"
		run resume resume $workers
		got_ids="$(field ids stop) $(field ids resume)"
		[[ $got_ids == "$want_ids" ]] ||
			fail "workers $workers, stopped at epoch $e batch $b: other samples after the resume"
		[[ $(field weights resume) == "$want_w" ]] ||
			fail "workers $workers, stopped at epoch $e batch $b: weights $(field weights resume), uninterrupted $want_w"
		echo "workers $workers: $(field stopped stop); resumed: the same $(wc -w <<<"$got_ids") sample ids, weights $want_w"
	done
done
$PY "$T/refuse.py" "$T/m" || fail "refuse.py"
echo "PASS"
