# larger.sh - spritefs-bench --dataset larger: data several times the cache budget.
#
# Sourced by spritefs-bench once it has checked the options and made OUT, SSD
# and MNT, with its helpers (msg, note, fail, rec, json_str, mount_sfs,
# umount_sfs, drop_caches, sfs_rss) defined; it ends the bench (report and
# exit status) itself. Steps:
#
#  1. Fashion-MNIST packed at 224x224x1 on the disk (all of it; --limit N
#     samples per split), with the store's default order (quick: windows of
#     2 sheets, so that a small store still has a working set below its size).
#  2. The bound: fio O_DIRECT on the store file (MB/s) x the compression
#     ratio (decoded bytes over stored bytes of the train split), and the
#     decode rate of one thread (spritefs-readbench --decode lz4: what a decode
#     worker does, stored bytes already in memory, each sheet decoded into
#     its own buffer as into the cache's blocks) x the mount's decode
#     workers (its default: one per CPU); the smaller of the two.
#  3. A cold epoch (page cache dropped, fresh mount, -o cache=CACHE, all else
#     default) over train/epochs/1/0 read with O_DIRECT by NCPU threads, as
#     hntrain reads views: decoded tiles/s against the bound, and the read
#     amplification, store bytes read and decode time from stats.json; the
#     daemon's CPU time says where the time went.
#  4. hntrain on the mount (defaults, cold) against --preload of the store
#     file: samples/s, data-wait share, and the same weights hash.
#  5. The budget swept from the smallest the mount takes to the whole split:
#     one cold epoch each, throughput and read amplification (larger.png).
#
# Records go to OUT/raw.jsonl as the other scenarios' do (kind "larger-*");
# report.py turns them into tables, results.json and the plot.

L_STORE=$SSD/larger.sprites
L_VIEWS=$MNT/train/epochs/1/0
L_TILE=$((224 * 224))

larger_stat() { # FIELD: a top-level number of the mount's stats.json
	$PY -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
		"$MNT/.spritefs/stats.json" "$1"
}
larger_cpu() { # the daemon's user + system CPU time, in clock ticks
	awk '{ print $14 + $15 }' "/proc/$SFS_PID/stat" 2>/dev/null || echo 0
}
# One cold epoch over the views with -o cache=$1 (with VIEWS, only the first
# VIEWS of them); records larger-epoch with the reader's result, the epoch
# fields of stats.json and the daemon's CPU.
larger_epoch() { # CACHE TAG [VIEWS]
	local out stats cpu0 cpu1 tick lim=()
	[[ -n ${3:-} ]] && lim=(--limit "$3")
	umount_sfs
	drop_caches
	mount_sfs "$L_STORE" "$1" || { mount_failed "$L_STORE"; return 1; }
	cpu0=$(larger_cpu)
	if ! out=$(timeout 600 "$READBENCH" --decode batch --direct --threads "$NCPU" "${lim[@]}" \
		--label "$2" "$L_VIEWS" 2>>"$OUT/logs/larger-readbench.err"); then
		fail "cold epoch over $L_VIEWS with cache=$1 (see logs/larger-readbench.err)"
		return 1
	fi
	cpu1=$(larger_cpu)
	tick=$(getconf CLK_TCK)
	stats=$(tr -d '\n' <"$MNT/.spritefs/stats.json")
	rec larger-epoch spritefs "$COLD" 0 "\"cache\":\"$1\",\"tag\":\"$2\",\"views_limit\":${3:-0},\"daemon_cpu_s\":$(awk -v a="$cpu0" -v b="$cpu1" -v t="$tick" 'BEGIN { printf "%.3f", (b - a) / t }'),\"stats\":$stats" "$out"
}

msg "1/5 larger than memory: packing Fashion-MNIST at 224x224x1$( ((LIMIT)) && echo ", $LIMIT samples per split")"
L_WIN=()
((QUICK)) && L_WIN=(--window 2)
if ((LIMIT > 0)); then
	run_logged pack-base "$PACK" "$FMNIST" "$SSD/base.sprites" &&
		run_logged export-small "$PACK" --export "$SSD/small" --format png --limit "$LIMIT" \
			"$SSD/base.sprites" &&
		run_logged pack-larger "$PACK" --tile 224x224x1 "${L_WIN[@]}" "$SSD/small" "$L_STORE" ||
		{ echo "spritefs-bench: packing failed (see $OUT/logs/pack-*.log)" >&2; exit 1; }
	rm -rf "$SSD/small" "$SSD/base.sprites"
else
	run_logged pack-larger "$PACK" --tile 224x224x1 "${L_WIN[@]}" "$FMNIST" "$L_STORE" ||
		{ echo "spritefs-bench: packing failed (see $OUT/logs/pack-larger.log)" >&2; exit 1; }
fi
rec store larger na 0 "\"bytes\":$(stat -c %s "$L_STORE")" null

msg "2/5 the bound: fio O_DIRECT on the store, one decode thread (spritefs-readbench --decode lz4)"
if command -v fio >/dev/null; then
	L_ENGINE=io_uring
	fio --name=probe --filename="$L_STORE" --rw=read --bs=4k --size=4k --ioengine=io_uring \
		--direct=1 >/dev/null 2>&1 || L_ENGINE=libaio
	drop_caches
	if fio --name=larger --filename="$L_STORE" --rw=read --bs=1M --iodepth=16 --ioengine=$L_ENGINE \
		--direct=1 --runtime=$((QUICK ? 3 : 10)) --time_based --output-format=json \
		>"$OUT/logs/fio-larger.json" 2>"$OUT/logs/fio-larger.err"; then
		rec ceiling fio-store-larger "$COLD" 0 "" "$(cat "$OUT/logs/fio-larger.json" | tr -d '\n')"
	else
		fail "fio on $L_STORE (see logs/fio-larger.err)"
	fi
else
	note "fio not installed: no disk bound (apt-get install fio)"
fi
if out=$("$READBENCH" --decode lz4 --seconds $((QUICK ? 2 : 5)) --threads 1 --limit 64 \
	--label lz4 "$L_STORE" 2>"$OUT/logs/larger-lz4.err"); then
	rec larger-lz4 store warm 0 "\"workers\":$(nproc)" "$out"
else
	fail "decode rate (see logs/larger-lz4.err)"
fi

if ((HAVE_MOUNT)); then
	msg "3/5 a cold epoch over the views, -o cache=$CACHE, read with O_DIRECT by $NCPU threads"
	larger_epoch "$CACHE" main
fi

if ((HAVE_MOUNT)) && [[ -n $HNTRAIN ]]; then
	msg "4/5 hntrain $MODEL on the mount (cold, defaults) and with --preload of the store"
	L_TRAIN=(--model "$MODEL" --epochs "$EPOCHS" --seed 1)
	umount_sfs
	drop_caches
	if mount_sfs "$L_STORE" "$CACHE"; then
		for what in mount preload; do
			data=$MNT extra=()
			[[ $what == preload ]] && data=$L_STORE extra=(--preload)
			log=logs/train-larger-$what.jsonl
			if "$HNTRAIN" --data "$data" "${L_TRAIN[@]}" "${extra[@]}" --log "$OUT/$log" \
				>"$OUT/logs/train-larger-$what.out" 2>&1; then
				rec larger-train "$what" "$COLD" 0 "\"name\":\"larger-$what\",\"log\":\"$log\",\"args\":$(json_str "${L_TRAIN[*]} ${extra[*]}")" null
			else
				fail "hntrain on $data (see logs/train-larger-$what.out)"
			fi
		done
	else
		mount_failed "$L_STORE"
	fi
fi

if ((HAVE_MOUNT)); then
	umount_sfs
	# the smallest budget the mount takes, from its refusal of 1 MiB
	L_MIN=$({ "$SPRITEFS" -f -o cache=1M "$L_STORE" "$MNT" 2>&1 || true; } |
		sed -n 's/.*smallest budget that works is \([0-9.]*\) MiB.*/\1/p')
	if mountpoint -q "$MNT"; then fusermount3 -u "$MNT"; fi
	mount_sfs "$L_STORE" "$CACHE" && L_WS=$(larger_stat working_set) &&
		L_WHOLE=$(stat -c %s "$MNT/train/images.npy") &&
		L_VIEWS_N=$(find "$L_VIEWS" -name '*.sprite' | wc -l) || L_WS=""
	umount_sfs
	if [[ -z $L_MIN || -z $L_WS ]]; then
		fail "budget sweep: no smallest budget or working set (see logs/spritefs.log)"
	else
		L_BUDGETS=$($PY -c '
import sys
mn, ws, whole = (float(sys.argv[1]) + 0.05) * 2**20, int(sys.argv[2]), int(sys.argv[3])  # said to 0.1 MiB
pts = sorted({max(mn, x) for x in (mn, ws / 4, ws / 2, ws, 2 * ws, whole)})
pts = [x for k, x in enumerate(pts) if x <= whole and (k == len(pts) - 1 or pts[k + 1] > 1.1 * x)]
print(" ".join("%dK" % -(-int(x) // 1024) for x in pts))' "$L_MIN" "$L_WS" "$L_WHOLE")
		# Below half the working set each view may load most of its window's
		# sheets again: the first 1/16 of the epoch, at least 8 views (their
		# amplification is over what they need) keeps such points to seconds.
		msg "5/5 budget sweep: $L_BUDGETS (working set $((L_WS >> 20)) MiB)"
		for b in $L_BUDGETS; do
			part=""
			if (($(numfmt --from=iec "$b") * 2 < L_WS)); then
				part=$(((L_VIEWS_N + 15) / 16))
				((part >= 8)) || part=$((L_VIEWS_N < 8 ? L_VIEWS_N : 8))
			fi
			larger_epoch "$b" sweep $part || break
		done
	fi
fi
umount_sfs

msg "report: results.json, tables, larger.png"
rrc=0
$PY "$REPORT" "$OUT" || rrc=$?
((rrc == 0 || rrc == 3)) || { echo "spritefs-bench: report failed" >&2; exit 1; }
msg "done in $((SECONDS - T0)) s: $OUT/results.json, $OUT/report.md"
if ((rrc == 3)); then
	echo "spritefs-bench: hntrain on the mount and with --preload gave different weights (see $OUT/report.md)" >&2
	exit 3
fi
if ((FAILED)); then
	echo "spritefs-bench: some measurements failed (see the notes above and $OUT/logs)" >&2
	exit 1
fi
exit 0
