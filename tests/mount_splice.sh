#!/usr/bin/env bash
# mount_splice.sh - reads answered through a pipe (-o splice=1, the default:
# vmsplice of the sheets' pages, then splice to /dev/fuse) serve exactly the
# store's bytes, and the same bytes as writev (-o splice=0): mount_check over
# every file with O_DIRECT and buffered reads, and the epoch views read with
# O_DIRECT in 512 KiB and 1 MiB pieces, after readers were killed in the
# middle of theirs, hash the same on both mounts. With
# splice on, the 512 KiB replies go through the pipe even where a pipe
# cannot grow past 1 MiB (pipe-max-size without CAP_SYS_RESOURCE), so
# bytes_spliced must grow; with it off, nothing is spliced.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

# 64x64x3 tiles (12 KiB, three pages each) in raw sheets: replies of many page-sized pieces
"$MKSTORE" "$T/s.sprites" --count-train 1500 --count-test 200 --sheet 128 --tile 64x64x3 \
	--codec none >"$T/mkstore.log" 2>&1 || fail "mkstore"
hashes() { # MOUNTPOINT: a hash per epoch-view file, read with O_DIRECT in 512 KiB, then 1 MiB
	local f
	for f in "$1"/train/epochs/3/0/* "$1"/test/epochs/3/0/*; do
		dd if="$f" bs=512K iflag=direct status=none | sha256sum | cut -d' ' -f1
		dd if="$f" bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1
	done
}
for sp in 1 0; do
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o "cache=16M,seed=3,batch=200,splice=$sp"
	# readers killed in the middle of O_DIRECT reads first: a reply cut short must leave
	# nothing in a thread's pipe that a later reply would carry
	views=("$T/mnt"/train/epochs/3/0/*)
	for round in 1 2 3 4 5 6; do
		kids=()
		for k in 1 2 3; do
			dd if="${views[$(((round * 3 + k) % ${#views[@]}))]}" of=/dev/null bs=512K \
				iflag=direct status=none &
			kids+=($!)
		done
		sleep "0.0$round"
		kill -9 "${kids[@]}" 2>/dev/null
		wait "${kids[@]}" 2>/dev/null
	done
	hashes "$T/mnt" >"$T/splice$sp.txt"
	"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" --seed 3 --epochs 1 --direct >"$T/check-d.log" 2>&1 ||
		fail "splice=$sp: mount_check --direct: $(tail -3 "$T/check-d.log")"
	"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" --seed 3 --epochs 1 >"$T/check.log" 2>&1 ||
		fail "splice=$sp: mount_check: $(tail -3 "$T/check.log")"
	spliced=$(stat_field "$T/mnt" bytes_spliced)
	fallbacks=$(stat_field "$T/mnt" splice_fallbacks)
	on=$(grep -c '"splice_write": true' "$T/mnt/.spritefs/stats.json")
	echo "splice=$sp: splice_write $on, $spliced bytes spliced, $fallbacks fallbacks"
	if ((sp)); then
		[[ $on -eq 1 ]] || fail "splice=1 but the kernel took no spliced replies"
		[[ $spliced -gt 0 ]] || fail "splice=1 but no 512 KiB reply went through the pipe"
	else
		[[ $on -eq 0 && $spliced -eq 0 ]] || fail "splice=0 but $spliced bytes were spliced"
	fi
	sfs_umount "$T/mnt"
done
[[ $(wc -l <"$T/splice1.txt") -gt 10 ]] || fail "too few epoch-view files read"
cmp -s "$T/splice1.txt" "$T/splice0.txt" || fail "epoch views differ with and without splice"
echo "PASS"
