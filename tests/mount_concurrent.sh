#!/usr/bin/env bash
# mount_concurrent.sh - 8 reader processes at once, some on the same files,
# some on different ones, with O_DIRECT opens (every read reaches the
# daemon) and a cache small enough that sheets are evicted and reloaded
# while others read them: every byte must still be exact.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/s.sprites" --count-train 6000 --count-test 1000 --tile 28x28x1 --sheet 200 \
	>"$T/mkstore.log" 2>&1 || fail "mkstore"
# ~5.5 MB decoded; a 2 MiB cache holds about 12 of the 35 sheets
sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o cache=2M,batch=500,window=4,prefetch=4,workers=2
views=(batches images batches images labels,sheets epochs batches,epochs images,labels)
pids=()
for k in "${!views[@]}"; do
	"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" --direct --order $((k + 1)) --only "${views[$k]}" \
		--epochs 1 >"$T/check$k.log" 2>&1 &
	pids+=($!)
done
bad=0
for k in "${!pids[@]}"; do
	if ! wait "${pids[$k]}"; then
		echo "reader $k (${views[$k]}): $(tail -3 "$T/check$k.log")" >&2
		bad=1
	fi
done
[[ $bad -eq 0 ]] || fail "a concurrent reader saw wrong bytes"
ev=$(stat_field "$T/mnt" evictions)
echo "8 readers exact; evictions during the run: $ev"
[[ $ev -gt 0 ]] || fail "no evictions: the test did not exercise the budget"
rss=$(stat_field "$T/mnt" rss)
kill -0 "$SFS_PID" || fail "the daemon died"
sfs_umount "$T/mnt"
echo "PASS (daemon RSS $((rss >> 20)) MiB)"
