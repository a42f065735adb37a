#!/usr/bin/env bash
# mount_budget.sh - the memory budget holds with a store larger than it:
# a ~157 MB (decoded) store served with cache=32M; after every batch file,
# images.npy, labels.npy and a windowed epoch have been read (bytes checked
# by mount_check), the daemon's peak resident memory (VmHWM) must stay within
# budget + 64 MiB, and the cache must have evicted.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/big.sprites" --count-train 45000 --count-test 5000 --tile 56x56x1 --sheet 1024 --window 3 \
	>"$T/mkstore.log" 2>&1 || fail "mkstore"
budget=$((32 << 20))
sfs_mount "$T/spritefs.log" "$T/big.sprites" "$T/mnt" -o cache=32M,batch=512
grep -q '"order": "windowed"' "$T/mnt/dataset.json" || fail "a split larger than the cache should be windowed"
"$MOUNT_CHECK" "$T/big.sprites" "$T/mnt" --direct --only batches,images,labels >"$T/check.log" 2>&1 ||
	fail "mount_check: $(tail -3 "$T/check.log")"
tail -1 "$T/check.log"
cat "$T/mnt/train/epochs/0/0/"*.sprite | wc -c >"$T/epoch.bytes" || fail "reading epoch 0"
cat "$T/mnt/test/images.npy" >/dev/null || fail "reading test/images.npy"
hwm=$(awk '/VmHWM/ {print $2 * 1024}' "/proc/$SFS_PID/status")
rss=$(awk '/VmRSS/ {print $2 * 1024}' "/proc/$SFS_PID/status")
ev=$(stat_field "$T/mnt" evictions)
res=$(stat_field "$T/mnt" bytes_resident)
mapped=$(stat_field "$T/mnt" bytes_mapped)
echo "budget $((budget >> 20)) MiB: peak RSS $((hwm >> 20)) MiB, RSS now $((rss >> 20)) MiB, cache $((res >> 20)) MiB, $ev evictions, epoch 0 $(cat "$T/epoch.bytes") bytes"
[[ $ev -gt 0 ]] || fail "no evictions with a store larger than the budget"
[[ $res -le $budget ]] || fail "cache holds $res bytes, over the budget $budget"
[[ $mapped -ge $res && $mapped -le $((budget + (64 << 20))) ]] ||
	fail "sheet memory mapped $mapped bytes: below the cache's $res or over budget + 64 MiB"
[[ $hwm -le $((budget + (64 << 20))) ]] || fail "peak RSS $hwm > budget + 64 MiB"
sfs_umount "$T/mnt"
echo "PASS"
