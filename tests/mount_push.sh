#!/usr/bin/env bash
# mount_push.sh - sheets loaded ahead of a reader going through batches/ are
# pushed into the kernel's page cache (-o push=1, the default), and the pages
# hold exactly the bytes the daemon serves: the batch files read on a cold
# mount with push, then with -o push=0, then with O_DIRECT reads (no page
# cache at all), hash the same; the daemon counts pushed sheets only when
# pushing is on, and never for a reader that reads with O_DIRECT (it has no
# page cache to fill).
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/s.sprites" --count-train 6000 --count-test 1000 --sheet 200 --tile 20x20x3 \
	>"$T/mkstore.log" 2>&1 || fail "mkstore"
hashes() { # MOUNTPOINT [dd flags]: one hash line per batch file, in order
	local f
	for f in "$1"/train/batches/*.sprite "$1"/test/batches/*.sprite; do
		if [[ -n ${2:-} ]]; then
			dd if="$f" bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1
		else
			sha256sum <"$f" | cut -d' ' -f1
		fi
	done
}
for push in 1 0; do
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o "cache=64M,push=$push"
	hashes "$T/mnt" >"$T/push$push.txt"
	pushed=$(stat_field "$T/mnt" sheets_pushed)
	echo "push=$push: $(wc -l <"$T/push$push.txt") batch files, $pushed sheets pushed"
	if ((push)); then
		[[ $pushed -gt 0 ]] || fail "push=1 but no sheet was pushed on a sequential cold read"
		hashes "$T/mnt" direct >"$T/direct.txt"
	else
		[[ $pushed -eq 0 ]] || fail "push=0 but $pushed sheets were pushed"
	fi
	sfs_umount "$T/mnt"
done
sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o "cache=64M,push=1"
hashes "$T/mnt" direct >"$T/direct-cold.txt"
pushed=$(stat_field "$T/mnt" sheets_pushed)
echo "O_DIRECT reads on a cold mount: $pushed sheets pushed"
[[ $pushed -eq 0 ]] || fail "an O_DIRECT reader got $pushed sheets pushed into a page cache it does not use"
sfs_umount "$T/mnt"
cmp -s "$T/direct.txt" "$T/direct-cold.txt" || fail "O_DIRECT reads on a cold mount differ"
cmp -s "$T/push1.txt" "$T/push0.txt" || fail "batch files differ with and without push"
cmp -s "$T/push1.txt" "$T/direct.txt" || fail "pushed page cache differs from O_DIRECT reads"
echo "PASS"
