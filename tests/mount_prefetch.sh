#!/usr/bin/env bash
# mount_prefetch.sh - sheets are read ahead in store order, and on past the
# end of a split into the next one: after a cold pass over train/batches (or
# train/images.npy), the first sheets of test are in memory, so reading test
# then costs no cache miss. With -o prefetch=0 nothing is read ahead: the
# same pass decodes exactly the train sheets. Reads use O_DIRECT so that each
# one reaches the daemon (no page cache, no push).
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/s.sprites" --count-train 6000 --count-test 1000 --sheet 200 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
read_direct() { # FILE...: read each file whole with O_DIRECT
	local f
	for f in "$@"; do
		dd if="$f" of=/dev/null bs=1M iflag=direct status=none || fail "reading $f"
	done
}
wait_decoded() { # MOUNTPOINT N: until N sheets are decoded (10 s at most); prints the count
	local n
	for _ in $(seq 200); do
		n=$(stat_field "$1" sheets_decoded)
		((n >= $2)) && break
		sleep 0.05
	done
	echo "$n"
}

for what in batches images.npy; do
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o cache=64M
	ntrain=$(find "$T/mnt/train/batches" -name '*.sprite' | wc -l)
	ntest=$(find "$T/mnt/test/batches" -name '*.sprite' | wc -l)
	((ntrain == 30 && ntest == 5)) || fail "expected 30 train and 5 test batch files, got $ntrain and $ntest"
	if [[ $what == batches ]]; then
		read_direct "$T"/mnt/train/batches/*.sprite
	else
		read_direct "$T/mnt/train/images.npy"
	fi
	# prefetch=8 (the default) reaches all 5 test sheets from train's last ones
	decoded=$(wait_decoded "$T/mnt" $((ntrain + ntest)))
	echo "$what: after a pass over train, $decoded sheets decoded ($ntrain train, $ntest test)"
	((decoded == ntrain + ntest)) ||
		fail "$what: test's sheets were not read ahead at the end of train ($decoded decoded)"
	misses=$(stat_field "$T/mnt" cache_misses)
	read_direct "$T"/mnt/test/batches/*.sprite
	after=$(stat_field "$T/mnt" cache_misses)
	((after == misses)) || fail "$what: reading test after train missed the cache $((after - misses)) times"
	sfs_umount "$T/mnt"
done

sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o cache=64M,prefetch=0
read_direct "$T"/mnt/train/batches/*.sprite
sleep 0.2
decoded=$(stat_field "$T/mnt" sheets_decoded)
echo "prefetch=0: $decoded sheets decoded by a pass over train"
((decoded == 30)) || fail "prefetch=0 decoded $decoded sheets for a pass over 30"
sfs_umount "$T/mnt"
echo "PASS"
