#!/usr/bin/env bash
# gpu_check.sh - issue 31's GPU checks and timings in one run, for a machine
# with a GPU and PyTorch but none of the project's build dependencies: the
# binaries and their libraries come prepared in BIN (bench/gpu_pack.sh).
#
#   bench/gpu_check.sh BIN FMNIST OUT [PHASE...]
#
# BIN: hntrain, hntrain-cuda.so, test_gpu_layers, test_gpu_train, mkstore and
# lib/ (the Debian libraries they link). FMNIST: Fashion-MNIST's IDX .gz
# files. OUT: logs, JSON lines and results.md. Phases (all by default):
#   checks    the plugin's layer and training tests (residual blocks and the
#             bottleneck against the cpu backend), two runs of one seed give
#             one weights hash (fp32 and bf16)
#   resume    a run stopped inside an epoch and resumed ends with the
#             uninterrupted run's weights
#   accuracy  residual presets on Fashion-MNIST, 15 epochs (in the background
#             while checks and resume run; waited for before the timings)
#   timing    resnet18 at 224x224x3, batch 256, fp32 / fp16 / bf16: hntrain's
#             samples/s against PyTorch eager (bench/torch_step.py)
#   review    the review's experiment on the GPU: resnet50 at 32x32x3, batch
#             128, GA 2, AMP fp16/bf16, pinned/pageable, both frameworks
#   ab        a baseline plugin (BASE_PLUGIN, say a build of the last commit)
#             against BIN's, interleaved: the weights of resnet-fm (Fashion-
#             MNIST) and of resnet18 (224x224x3) in fp32, tf32, fp16 and bf16
#             must be the same bits, and resnet18's samples/s side by side,
#             with PyTorch eager's beside them (not in the default phases)
# PY (default python3) is the Python with torch and torchvision. ACC_RUNS:
# the accuracy runs, "NAME MODEL AUGMENT [HNTRAIN-OPTION]" separated by ';';
# ACC_TIMEOUT: seconds each may take (300). RESULTS: where results.md goes.
set -uo pipefail
if (($# < 3)); then
	sed -n 2,29p "$0" >&2
	exit 2
fi
BIN=$(realpath "$1") FM=$(realpath "$2") OUT=$3
shift 3
PHASES=" ${*:-checks resume accuracy timing review} "
HERE=$(dirname "$(realpath "$0")")
PY=${PY:-python3}
HN=$BIN/hntrain
export LD_LIBRARY_PATH=$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HNTRAIN_CUDA_PLUGIN=$BIN/hntrain-cuda.so
export HN_FASHION_MNIST=$FM # test_gpu_train's data
# cuDNN where PyTorch's wheels keep it, for the tests (hntrain finds it itself)
CUDNN=$("$PY" -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null) &&
	[[ -d $CUDNN ]] && LD_LIBRARY_PATH+=:$CUDNN
mkdir -p "$OUT"
W=$(mktemp -d /tmp/gpu_check.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
RES=${RESULTS:-$OUT/results.md}
: >"$RES"
say() { echo "$*" | tee -a "$RES"; }
log() { echo "== $(date +%T) $*"; }
has() { [[ $PHASES == *" $1 "* ]]; }
# hn NAME ARGS...: hntrain --device gpu ARGS, output in OUT/NAME.log, JSON in OUT/NAME.jsonl
hn() {
	local name=$1
	shift
	rm -f "$OUT/$name.jsonl"
	"$HN" --device gpu "$@" --log "$OUT/$name.jsonl" >"$OUT/$name.log" 2>&1
}
# last_epoch NAME: samples/s of the last epoch line, and compute-only samples/s
last_epoch() {
	"$PY" - "$OUT/$1.jsonl" <<'EOF' 2>/dev/null || echo "- - -"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
e = [r for r in rows if "epoch" in r][-1]
print("%.0f samples/s | compute only %.0f samples/s | compute %.2f s of %.2f s" % (
    e["samples_per_s"], e["samples"] / e["compute_s"], e["compute_s"], e["wall_s"]))
EOF
}

log "machine"
nvidia-smi -L | tee "$OUT/machine.txt"
"$HN" -V | tee -a "$OUT/machine.txt"
"$PY" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cudnn", torch.backends.cudnn.version())' | tee -a "$OUT/machine.txt"

# the stores: 224x224x3 and 32x32x3 random tiles, raw sheets (no decode cost)
(has ab && "$BIN/mkstore" "$W/ab224.sprites" --count-train 6144 --count-test 0 --tile 224x224x3 \
	--classes 10 --codec none >/dev/null
 has timing && "$BIN/mkstore" "$W/s224.sprites" --count-train 3072 --count-test 0 --tile 224x224x3 \
	--classes 10 --codec none >/dev/null
 has review && "$BIN/mkstore" "$W/s32.sprites" --count-train 5120 --count-test 0 --tile 32x32x3 \
	--classes 10 --codec none >/dev/null) &
STORES=$!

ACC=()
if has accuracy; then
	log "accuracy runs started (background)"
	IFS=';' read -ra specs <<<"${ACC_RUNS:-r18-flip-bf16 resnet18 flip --amp=bf16;r18-crop-flip-bf16 resnet18 crop:2,flip --amp=bf16;fm-flip resnet-fm flip}"
	for spec in "${specs[@]}"; do
		read -r name model aug amp <<<"$spec"
		timeout "${ACC_TIMEOUT:-300}" "$HN" --device gpu --data "$FM" --model "$model" --epochs 15 --augment "$aug" \
			${amp:+$amp} --log "$OUT/acc-$name.jsonl" >"$OUT/acc-$name.log" 2>&1 &
		ACC+=($!)
	done
fi

# ab_rate NAME: the median samples/s of the epochs after the first
ab_rate() {
	"$PY" - "$OUT/$1.jsonl" <<'EOF' 2>/dev/null || echo "-"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
e = [r["samples_per_s"] for r in rows if "epoch" in r][1:]
print("%.0f" % statistics.median(e))
EOF
}
hash_of() { grep -o 'weights xxh3 [0-9a-f]*' "$OUT/$1.log" | awk '{print $3}'; }
# ab_hn SIDE NAME ARGS...: hn with the baseline plugin (SIDE base) or BIN's (new)
ab_hn() {
	local side=$1 plug=$HNTRAIN_CUDA_PLUGIN
	shift
	[[ $side == base ]] && plug=$BASE_PLUGIN
	HNTRAIN_CUDA_PLUGIN=$plug hn "$@"
}

if has ab; then
	[[ -f ${BASE_PLUGIN:-} ]] || { echo "gpu_check.sh: phase ab needs BASE_PLUGIN (a hntrain-cuda.so)" >&2; exit 2; }
	wait $STORES
	log "ab: the same bits, baseline and new"
	for amp in "" --tf32 --amp=fp16 --amp=bf16; do
		for side in base new; do
			ab_hn $side "abfm-$side$amp" --data "$FM" --model resnet-fm --limit 8192 \
				--test-split none $amp --quiet
		done
		a=$(hash_of "abfm-base$amp") b=$(hash_of "abfm-new$amp")
		say "| resnet-fm ${amp:-fp32} weights | base $a / new $b | $([[ -n $a && $a == "$b" ]] && echo same || echo DIFFERENT) |"
	done
	log "ab: resnet18 224x224x3 batch 256, interleaved"
	for amp in "" --tf32 --amp=fp16 --amp=bf16; do
		for side in base new; do
			ab_hn $side "ab18-$side$amp" --data "$W/ab224.sprites" --model resnet18 \
				--batch 256 --epochs 4 --test-split none $amp
		done
		a=$(hash_of "ab18-base$amp") b=$(hash_of "ab18-new$amp")
		ra=$(ab_rate "ab18-base$amp") rb=$(ab_rate "ab18-new$amp")
		say "| resnet18 224 b256 ${amp:-fp32} | base $ra / new $rb samples/s | $("$PY" -c "print('%.2fx' % ($rb / $ra))" 2>/dev/null) | weights $([[ -n $a && $a == "$b" ]] && echo same || echo "DIFFERENT ($a / $b)") |"
	done
	HNTRAIN_CUDA_PROFILE=layers hn ab-prof-fp16 --data "$W/ab224.sprites" --model resnet18 --batch 256 \
		--epochs 1 --test-split none --amp=fp16
	grep "gpu layer profile" "$OUT/ab-prof-fp16.log" | sed "s/^/| new fp16 | /; s/$/ |/" | tee -a "$RES"
	M=$W/ab.matrix
	: >"$M"
	for amp in "" fp16 bf16; do
		echo "--name torch-${amp:-tf32} --model resnet18 --tile 224x224x3 --batch 256 --steps 40 ${amp:+--amp $amp}" >>"$M"
	done
	echo "--name torch-fp32 --model resnet18 --tile 224x224x3 --batch 256 --steps 40 --no-tf32" >>"$M"
	"$PY" "$HERE/torch_step.py" --matrix "$M" | tee "$OUT/torch-ab.jsonl" | sed 's/^/| /; s/$/ |/' | tee -a "$RES"
fi

if has checks; then
	for t in test_gpu_layers test_gpu_train; do
		log "$t"
		timeout 200 "$BIN/$t" >"$OUT/$t.log" 2>&1
		rc=$?
		say "| $t | exit $rc | $(tail -1 "$OUT/$t.log") |"
	done
	for amp in "" --amp=bf16 --tf32; do
		h=()
		for i in 1 2; do
			hn "det$i$amp" --data "$FM" --model resnet-fm --limit 8192 --test-split none $amp --quiet
			h+=("$(grep -o 'weights xxh3 [0-9a-f]*' "$OUT/det$i$amp.log")")
		done
		say "| determinism resnet-fm ${amp:-fp32} | ${h[0]} / ${h[1]} | $([[ ${h[0]} == "${h[1]}" && -n ${h[0]} ]] && echo same || echo DIFFERENT) |"
	done
fi

if has resume; then
	log "resume inside an epoch"
	R=(--data "$FM" --model resnet-fm --limit 4096 --batch 64 --epochs 2 --test-split none --quiet)
	hn resume-full "${R[@]}"
	full=$(grep -o 'weights xxh3 [0-9a-f]*' "$OUT/resume-full.log")
	rc=0
	HNTRAIN_RAISE_AT_BATCH=90 "$HN" --device gpu "${R[@]}" --checkpoint "$W/c.ckpt" >"$OUT/resume-stop.log" 2>&1 || rc=$?
	hn resume-rest "${R[@]}" --resume "$W/c.ckpt"
	got=$(grep -o 'weights xxh3 [0-9a-f]*' "$OUT/resume-rest.log")
	say "| resume at batch 90 of 128 (stop exit $rc) | $got / uninterrupted $full | $([[ $rc == 75 && $got == "$full" && -n $got ]] && echo same || echo DIFFERENT) |"
fi

if ((${#ACC[@]})); then
	log "waiting for the accuracy runs"
	wait "${ACC[@]}"
	for f in "$OUT"/acc-*.jsonl; do
		"$PY" - "$f" <<'EOF' | tee -a "$RES"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ep = [r for r in rows if "epoch" in r]
best = max((r.get("test_acc") or 0 for r in ep), default=0)
first94 = next((r["epoch"] for r in ep if (r.get("test_acc") or 0) >= 0.94), None)
print(f"| accuracy {sys.argv[1].rsplit('/', 1)[-1]} | epochs {len(ep)} | best {best:.4f} | first >= 94% at epoch {first94} | "
      f"{sum(r['wall_s'] for r in ep):.0f} s |")
EOF
	done
fi
wait $STORES

if has timing; then
	log "timing: resnet18 224x224x3 batch 256"
	for v in "fp32" "tf32 --tf32" "fp16 --amp=fp16" "bf16 --amp=bf16" "tf32-fast --tf32 --fast" \
		"fp16-fast --amp=fp16 --fast"; do
		read -r name args <<<"$v"
		hn "t-$name" --data "$W/s224.sprites" --model resnet18 --batch 256 --epochs 2 --test-split none $args
		say "| hntrain resnet18 224 b256 $name | $(last_epoch "t-$name") |"
	done
	# where the step's device time goes, per layer kind (the runs' own rates are not the step's)
	for v in "tf32 --tf32" "fp16 --amp=fp16"; do
		read -r name args <<<"$v"
		HNTRAIN_CUDA_PROFILE=layers hn "prof-$name" --data "$W/s224.sprites" --model resnet18 --batch 256 \
			--epochs 1 --test-split none $args
		grep "gpu layer profile" "$OUT/prof-$name.log" | sed "s/^/| $name | /; s/$/ |/" | tee -a "$RES"
	done
	M=$W/t.matrix
	: >"$M"
	for amp in "" fp16 bf16; do
		echo "--name torch-${amp:-tf32} --model resnet18 --tile 224x224x3 --batch 256 ${amp:+--amp $amp}" >>"$M"
		echo "--name torch-${amp:-tf32}-tuned --model resnet18 --tile 224x224x3 --batch 256 --channels-last --benchmark ${amp:+--amp $amp}" >>"$M"
	done
	echo "--name torch-fp32 --model resnet18 --tile 224x224x3 --batch 256 --no-tf32" >>"$M"
	"$PY" "$HERE/torch_step.py" --matrix "$M" | tee "$OUT/torch-timing.jsonl"
fi

if has review; then
	log "review: resnet50 32x32x3 batch 128"
	for v in "ga1-off 1" "ga2-off 2" "ga1-fp16 1 --amp=fp16" "ga2-fp16 2 --amp=fp16" "ga1-bf16 1 --amp=bf16"; do
		read -r name ga args <<<"$v"
		hn "rv-$name" --data "$W/s32.sprites" --model resnet50 --batch $((128 / ga)) --accum "$ga" --epochs 2 \
			--test-split none $args
		say "| hntrain review resnet50 32 b128 $name | $(last_epoch "rv-$name") |"
	done
	M=$W/r.matrix
	: >"$M"
	for ga in 1 2; do
		for amp in "" fp16; do
			for mem in pageable pinned; do
				echo "--name rv-torch-ga$ga-${amp:-off}-$mem --model resnet50 --tile 32x32x3 --batch 128 --accum $ga --memory $mem --steps 40 ${amp:+--amp $amp}" >>"$M"
			done
		done
	done
	echo "--name rv-torch-ga1-bf16-pinned --model resnet50 --tile 32x32x3 --batch 128 --memory pinned --steps 40 --amp bf16" >>"$M"
	"$PY" "$HERE/torch_step.py" --matrix "$M" | tee "$OUT/torch-review.jsonl"
fi
log "done"
cat "$RES"
