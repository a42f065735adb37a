#!/usr/bin/env bash
# bench_checks.sh - spritefs-bench's edges, cheaply (bench_quick.sh runs the whole quick bench):
#   * every bad option or environment variable is refused before anything is prepared: exit 2,
#     one line naming it, no output folder, no data folder;
#   * `spritefs-bench report DIR` without gnuplot: the report and results without plots, a note,
#     no traceback;
#     with different weights (or samples) between media: everything written, exit 3;
#   * small runs (--quick --limit 300: a store smaller than 1 MiB, which fio must read in blocks
#     that fit) as root: pinned to the last CPU this process may use (the cores sweep pins to
#     the CPUs we may use, not 0..N-1); with folders of killed benches left in /dev/shm and the
#     disk folder, one holding a dead mount (unmounted and removed, kept data left alone);
#     with a spritefs that may not mount (a note, not a failure) and an hntrain whose weights
#     differ on one medium (exit 3 after writing everything);
#   * as the user nobody (where it exists and can run the build): what cannot be done without
#     root is skipped with a note, and the run exits 0.
#   usage: bench_checks.sh BENCH_SCRIPT BUILD_DIR   (SPRITEFS, MKSTORE in the environment)
source "$(dirname "$0")/mount_lib.sh"
BENCH=${1:?bench script}
BUILD=${2:?build dir}
export SPRITEFS_BUILD=$BUILD
PY=/usr/bin/python3
[[ -x $PY ]] || { echo "SKIP: no $PY"; exit 77; }
QUICK=(--quick --limit 300 --no-torch --no-gpu) # should a check fail to stop it: a short run
FMNIST=${SPRITEFS_FMNIST:-/usr/share/datasets/fashion-mnist}

# ---- options and environment, refused up front ------------------------------------------
shm_before=$(ls -d /dev/shm/spritefs-bench.* 2>/dev/null | wc -l)
bad_case() { # WORDS ENV-ASSIGNMENT|- ARGS...
	local words=$1 envv=$2 rc=0 what
	shift 2
	what="${envv#-} $*"
	rm -rf "$T/out"
	if [[ $envv == - ]]; then
		timeout 120 "$BENCH" "${QUICK[@]}" --out "$T/out" "$@" >"$T/bad.log" 2>&1 || rc=$?
	else
		timeout 120 env "$envv" "$BENCH" "${QUICK[@]}" --out "$T/out" "$@" >"$T/bad.log" 2>&1 || rc=$?
	fi
	[[ $rc -eq 2 ]] || fail "spritefs-bench $what: exit $rc, not 2: $(tail -3 "$T/bad.log")"
	[[ $(wc -l <"$T/bad.log") -eq 1 ]] || fail "spritefs-bench $what: not one line: $(cat "$T/bad.log")"
	grep -q -- "$words" "$T/bad.log" || fail "spritefs-bench $what: no '$words' in: $(cat "$T/bad.log")"
	[[ -e $T/out ]] && fail "spritefs-bench $what: made the output folder before refusing"
	[[ $(ls -d /dev/shm/spritefs-bench.* 2>/dev/null | wc -l) -le $shm_before ]] ||
		fail "spritefs-bench $what: prepared data before refusing"
	echo "refused:$what: $(cat "$T/bad.log")"
}
bad_case "--runs abc: expected a whole number" - --runs abc
bad_case "--runs 0: expected a whole number" - --runs 0
bad_case "--runs needs a value" - --runs=
bad_case "--epochs abc: expected a whole number" - --epochs abc
bad_case "--amp fp8: expected fp16 or bf16" - --dataset accuracy --amp fp8
bad_case "--amp goes with --dataset accuracy" - --amp bf16
bad_case "--epochs 0: expected a whole number" - --epochs 0
bad_case "--limit abc: expected a whole number" - --limit abc
bad_case "--limit -1: expected a whole number" - --limit -1
bad_case "--model c8k3;rm: expected cnn" - --model 'c8k3;rm'
bad_case "--dataset needs a value" - --dataset
bad_case "--dataset small: expected fashion-mnist, large, larger, photos, accelerators, review, accuracy or pytorch" - --dataset small
bad_case "--data $T/nowhere: no such folder or store file" - --data "$T/nowhere"
mkdir -p "$T/notree/cls"
bad_case "--data $T/notree: an ImageFolder tree needs a train/ folder" - --data "$T/notree"
bad_case "--data and --dataset large: give one of them" - --dataset large --data "$T/notree"
bad_case "--tile 64: expected HxW or HxWxC" - --dataset photos --tile 64
bad_case "--tile goes with --data or --dataset photos" - --tile 64x64
bad_case "--out needs a value" - --out
bad_case "--quick takes no value" - --quick=yes
bad_case "unknown argument '--fast'" - --fast
bad_case "SPRITEFS_BENCH_DISK=$T/nowhere" "SPRITEFS_BENCH_DISK=$T/nowhere"
bad_case "SPRITEFS_BENCH_CACHE=lots" "SPRITEFS_BENCH_CACHE=lots"
bad_case "SPRITEFS_BENCH_SMALL_CACHE=64K: at least 1M" "SPRITEFS_BENCH_SMALL_CACHE=64K"
bad_case "HNTRAIN=$T/nothing" "HNTRAIN=$T/nothing"
if [[ -d $FMNIST ]]; then # hntrain checks the model on Fashion-MNIST's shape
	bad_case "--model foo" - --model foo
	bad_case "--model c8k3-r-dzz" - --model c8k3-r-dzz
else
	echo "no $FMNIST: --model and the bench runs are not checked"
fi

# ---- spritefs-bench report on a made-up run ------------------------------------------------
fake_run() { # DIR HASH-OF-THE-SPRITEFS-RUN SAMPLE-SUM-OF-SPRITEFS
	mkdir -p "$1/logs"
	echo '{"config": {"quick": 1, "dataset": "fashion-mnist", "runs": 1, "model": "cnn", "epochs": 1}}' >"$1/machine.json"
	echo '{"files": 600, "tree_bytes": 564160, "store_bytes": 327680, "format": "tiff"}' >"$1/data.json"
	: >"$1/notes.txt"
	{
		echo '{"kind":"decode","medium":"tiff-tmpfs","state":"warm","run":1,"result":{"samples_s":1000,"samples":600,"sample_sum":"00000000000000aa"}}'
		echo "{\"kind\":\"decode\",\"medium\":\"spritefs\",\"state\":\"warm\",\"run\":1,\"result\":{\"samples_s\":9000,\"samples\":600,\"sample_sum\":\"$3\"}}"
		for m in tiff-tmpfs spritefs; do
			echo "{\"kind\":\"train\",\"medium\":\"$m\",\"state\":\"warm\",\"run\":0,\"name\":\"cpu-$m\",\"device\":\"cpu\",\"log\":\"logs/train-$m.jsonl\",\"args\":\"\",\"result\":null}"
		done
	} >"$1/raw.jsonl"
	for m in tiff-tmpfs spritefs; do
		h=1111222233334444
		[[ $m == spritefs ]] && h=$2
		{
			echo '{"epoch": 1, "samples": 300, "wall_s": 0.1, "compute_s": 0.08, "data_wait_s": 0.01, "eval_s": 0.05, "test_acc": 0.5}'
			echo "{\"final\": true, \"weights_xxh3\": \"$h\", \"test_acc\": 0.5}"
		} >"$1/logs/train-$m.jsonl"
	done
}
run_report() { # DIR [env...]: the report's exit status in rc
	rc=0
	env "${@:2}" "$PY" "$BENCH" report "$1" >"$1.out" 2>"$1.err" || rc=$?
	grep -q Traceback "$1.err" && fail "report.py on $1: a traceback: $(cat "$1.err")"
	[[ -s $1/results.json && -s $1/report.md ]] || fail "report.py on $1: results.json or report.md missing"
}
fake_run "$T/r-same" 1111222233334444 00000000000000aa
run_report "$T/r-same" PATH=/nonexistent
[[ $rc -eq 0 ]] || fail "report.py without gnuplot: exit $rc: $(cat "$T/r-same.err")"
grep -q "gnuplot not installed" "$T/r-same/report.md" || fail "report.py without gnuplot: no note in report.md"
[[ -s $T/r-same/plot.gp && -s $T/r-same/epoch_split.dat ]] || fail "report.py without gnuplot: plot.gp and data not left"
grep -q MISMATCH "$T/r-same.out" && fail "report.py: a mismatch where there is none"
# the epoch plot shows the evaluation apart (a training pass of 0.1 s, then 0.05 s of evaluation)
grep -q '"cpu-spritefs" 0.080000 0.010000 0.010000 0.050000' "$T/r-same/epoch_split.dat" ||
	fail "epoch_split.dat: no evaluation column: $(cat "$T/r-same/epoch_split.dat")"
echo "report.py without gnuplot: report, results and a note; exit 0"
fake_run "$T/r-weights" 5555666677778888 00000000000000aa
run_report "$T/r-weights"
[[ $rc -eq 3 ]] || fail "report.py with different weights: exit $rc, not 3"
grep -q "WEIGHTS MISMATCH" "$T/r-weights.out" || fail "report.py with different weights: no WEIGHTS MISMATCH"
if command -v gnuplot >/dev/null; then # the plots, though one panel has no data
	grep -q "gnuplot failed" "$T/r-weights.err" && fail "report.py: $(cat "$T/r-weights.err")"
	for p in throughput.png epoch_split.png; do
		[[ $(head -c 4 "$T/r-weights/$p" 2>/dev/null | od -An -tx1 | tr -d ' \n') == 89504e47 ]] ||
			fail "report.py: $p not drawn"
	done
fi
fake_run "$T/r-samples" 1111222233334444 00000000000000bb
run_report "$T/r-samples"
[[ $rc -eq 3 ]] || fail "report.py with different samples: exit $rc, not 3"
grep -q "NO - MISMATCH" "$T/r-samples.out" || fail "report.py with different samples: no MISMATCH"
echo "report.py with different weights, then samples: everything written, exit 3"

# ---- short runs as root -------------------------------------------------------------------
if [[ $(id -u) -ne 0 || ! -c /dev/fuse || ! -d $FMNIST ]]; then
	echo "not root, no /dev/fuse or no Fashion-MNIST: the bench runs are not checked here"
	echo PASS
	exit 0
fi
BPID=""
bench_cleanup() { # a bench still running, and whatever the runs left
	[[ -n $BPID ]] && kill "$BPID" 2>/dev/null && wait "$BPID" 2>/dev/null
	for d in "${STALE[@]}"; do
		grep -F " $d/" /proc/mounts | awk '{print $2}' | while read -r m; do
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
		done
		rm -rf "$d"
	done
	cleanup
}
trap bench_cleanup EXIT
mkdir -p "$T/disk"
STALE=()
dead_pid() { # a PID that ran and is gone
	(:) &
	local p=$!
	wait $p
	echo $p
}
# folders of a killed bench: a dead mount in one; kept data (--keep) in another
p1=$(dead_pid)
p2=$(dead_pid)
STALE=("/dev/shm/spritefs-bench.$p1" "$T/disk/spritefs-bench.$p1" "$T/disk/spritefs-bench.$p2")
mkdir -p "/dev/shm/spritefs-bench.$p1/tree" "$T/disk/spritefs-bench.$p1/mnt" "$T/disk/spritefs-bench.$p2"
: >"/dev/shm/spritefs-bench.$p1/tree/x.tiff"
touch "$T/disk/spritefs-bench.$p2/.kept"
"$MKSTORE" "$T/s.sprites" --count-train 100 --count-test 10 --sheet 64 >"$T/mkstore.log" 2>&1 || fail mkstore
sfs_mount "$T/dead.log" "$T/s.sprites" "$T/disk/spritefs-bench.$p1/mnt"
kill -KILL "$SFS_PID"
wait "$SFS_PID" 2>/dev/null
# the last CPU this process may use (the cores sweep must use it, not CPU 0)
last=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr ',' '\n' | tail -1)
last=${last##*-}
PIN=()
[[ $last != 0 ]] && PIN=(taskset -c "$last")

rc=0
SPRITEFS_BENCH_DISK=$T/disk "${PIN[@]}" "$BENCH" "${QUICK[@]}" --out "$T/run1" >"$T/run1.out" 2>"$T/run1.err" &
BPID=$!
wait $BPID || rc=$?
BPID=""
[[ $rc -eq 0 ]] || fail "bench --quick --limit 300 exited $rc: $(tail -20 "$T/run1.err")"
grep -q FAILED "$T/run1/notes.txt" && fail "run 1 noted a failure: $(cat "$T/run1/notes.txt")"
grep -E 'spritefs-bench: line [0-9]+:' "$T/run1.err" && fail "run 1: errors from bash itself"
for d in "/dev/shm/spritefs-bench.$p1" "$T/disk/spritefs-bench.$p1"; do
	[[ -e $d ]] && fail "a killed bench's folder $d was left"
	grep -q "removed $d" "$T/run1/notes.txt" || fail "no note of removing $d"
done
grep -qF " $T/disk/spritefs-bench.$p1/" /proc/mounts && fail "a killed bench's dead mount was left"
[[ -e $T/disk/spritefs-bench.$p2/.kept ]] || fail "data kept with --keep was removed"
if command -v fio >/dev/null; then
	grep -q "fio reads .* in 256 KiB blocks" "$T/run1/notes.txt" || fail "no note of fio's smaller blocks"
fi
$PY - "$T/run1/results.json" "$last" <<'PY' || fail "run 1: results.json"
import json, sys
r = json.load(open(sys.argv[1]))
s, last = r["summary"], sys.argv[2]
bad = []
import shutil
if shutil.which("fio") and not (s["ceilings"].get("fio_store_mb_s") or 0) > 0:
    bad.append("no fio ceiling on the store (smaller than 1 MiB)")
sweep = [t for t in s["train"] if t["name"].startswith("sweep-cores")]
if not sweep:
    bad.append("no cores sweep")
for t in sweep:
    if last != "0" and f"--affinity {last}" not in t.get("args", ""):
        bad.append(f"{t['name']} not pinned to CPU {last}: {t.get('args')}")
if s.get("weights_mismatch") or s.get("samples_same") is not True:
    bad.append("a mismatch")
if bad:
    print("FAIL:", "; ".join(bad)); sys.exit(1)
PY
store=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["store_bytes"])' "$T/run1/data.json")
echo "run 1 (CPU $last, a store of $store bytes): exit 0; killed benches' folders removed, kept data left"

# a spritefs that may not mount, and an hntrain whose weights differ on the disk tree
mkdir -p "$T/bin"
cat >"$T/bin/spritefs" <<'EOF'
#!/bin/sh
echo "fuse: failed to open /dev/fuse: Permission denied" >&2
exit 1
EOF
cat >"$T/bin/hntrain" <<EOF
#!/usr/bin/env bash
# the real hntrain; a run on the disk's TIFF tree gets other weights in its log
real=\$(find "$BUILD" -maxdepth 3 -type f -name hntrain -perm -u+x | head -1)
log="" data=""
a=("\$@")
for ((i = 0; i < \${#a[@]}; i++)); do
	[[ \${a[i]} == --log ]] && log=\${a[i + 1]}
	[[ \${a[i]} == --data ]] && data=\${a[i + 1]}
done
"\$real" "\$@" || exit
if [[ -n \$log && \$data == $T/disk/*/tree ]]; then
	sed -i 's/"weights_xxh3": "[0-9a-f]*"/"weights_xxh3": "00000000deadbeef"/' "\$log"
fi
EOF
chmod +x "$T/bin/spritefs" "$T/bin/hntrain"
rc=0
SPRITEFS=$T/bin/spritefs HNTRAIN=$T/bin/hntrain SPRITEFS_BENCH_DISK=$T/disk \
	"$BENCH" "${QUICK[@]}" --out "$T/run2" >"$T/run2.out" 2>"$T/run2.err" &
BPID=$!
wait $BPID || rc=$?
BPID=""
[[ $rc -eq 3 ]] || fail "bench with a weights mismatch exited $rc, not 3: $(tail -20 "$T/run2.err")"
grep -q "WEIGHTS MISMATCH" "$T/run2.out" || fail "run 2: no WEIGHTS MISMATCH in the report"
for f in results.json report.md; do
	[[ -s $T/run2/$f ]] || fail "run 2: $f not written"
done
grep -q "spritefs may not mount here (fuse: failed to open /dev/fuse: Permission denied)" "$T/run2/notes.txt" ||
	fail "run 2: no note of the mount that was not allowed: $(cat "$T/run2/notes.txt")"
grep -q FAILED "$T/run2/notes.txt" && fail "run 2: a mount not allowed was taken for a failure"
echo "run 2 (weights differ on one medium, spritefs may not mount): a note, everything written, exit 3"

# ---- as a user without root ----------------------------------------------------------------
if id nobody >/dev/null 2>&1 && command -v runuser >/dev/null &&
	runuser -u nobody -- test -x "$BENCH" -a -r "$BENCH" -a -x "$BUILD/trainer/hntrain" 2>/dev/null; then
	U=$(mktemp -d /tmp/bench-nobody.XXXXXX)
	STALE+=("$U")
	chmod 755 "$U"
	mkdir "$U/disk" "$U/out"
	chown nobody "$U/disk" "$U/out"
	rc=0
	(cd "$U" && runuser -u nobody -- env SPRITEFS_BUILD="$BUILD" SPRITEFS_BENCH_DISK="$U/disk" \
		"$BENCH" "${QUICK[@]}" --out "$U/out/r" >"$T/run3.out" 2>"$T/run3.err") || rc=$?
	[[ $rc -eq 0 ]] || fail "bench as nobody exited $rc: $(tail -20 "$T/run3.err")"
	grep -q FAILED "$U/out/r/notes.txt" && fail "bench as nobody noted a failure: $(cat "$U/out/r/notes.txt")"
	if ! runuser -u nobody -- test -r /dev/fuse -a -w /dev/fuse; then
		grep -q "may not read and write /dev/fuse: the spritefs medium is skipped" "$U/out/r/notes.txt" ||
			fail "bench as nobody: no note of /dev/fuse"
	fi
	echo "run 3 (as nobody): what needs root skipped with a note, exit 0"
else
	echo "no user nobody who can run the build: the run without root is not checked"
fi
echo PASS
