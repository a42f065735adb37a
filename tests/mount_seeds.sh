#!/usr/bin/env bash
# mount_seeds.sh - one user of an allow_other mount cannot take every seed
# slot: a uid holds at most 128 seeds at once (the rest get ENOSPC, counted),
# other users and root still get theirs, and a slot whose inodes the kernel
# has forgotten (FUSE forget, here after drop_caches) serves again: to the
# same user, and once the table of 1,024 is full, to a new seed, whose
# views then read exactly (mount_check against the store).
source "$(dirname "$0")/mount_lib.sh"
need_fuse
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (other uids, allow_other)"; exit 77; }
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

"$MKSTORE" "$T/s.sprites" --count-train 500 --count-test 10 --sheet 64 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
chmod 755 "$T"
sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o allow_other

# as UID: stat seeds FIRST..LAST; prints "ok enospc other"
stat_seeds() { # UID FIRST LAST
	setpriv --reuid="$1" --regid="$1" --clear-groups "$PY" -c '
import errno, os, sys
mnt, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = {"ok": 0, "enospc": 0, "other": 0}
for s in range(a, b + 1):
    try:
        os.stat("%s/train/epochs/%d" % (mnt, s))
        n["ok"] += 1
    except OSError as e:
        n["enospc" if e.errno == errno.ENOSPC else "other"] += 1
print(n["ok"], n["enospc"], n["other"])
' "$T/mnt" "$2" "$3"
}
forget_all() {
	sync
	echo 2 >/proc/sys/vm/drop_caches
	sleep 1
}

read -r ok nospc other <<<"$(stat_seeds 20001 1 1100)"
echo "uid 20001 stats 1,100 seeds: $ok found, $nospc ENOSPC, $other other errors"
[[ $ok -eq 128 && $nospc -eq 972 && $other -eq 0 ]] || fail "expected 128 found, 972 ENOSPC"
read -r ok nospc other <<<"$(stat_seeds 20002 5000 5009)"
[[ $ok -eq 10 ]] || fail "uid 20002 locked out: $ok of 10 seeds"
stat "$T/mnt/train/epochs/6000" >/dev/null || fail "root locked out"
refused=$(stat_field "$T/mnt" seed_refusals)
[[ $refused -ge 972 ]] || fail "seed_refusals $refused, expected >= 972"
echo "another uid and root still get seeds; stats.json counts $refused refusals"

if ! (echo 2 >/proc/sys/vm/drop_caches) 2>/dev/null; then
	echo "drop_caches not writable: the forget path is not exercised here"
	sfs_umount "$T/mnt"
	echo PASS
	exit 0
fi
forget_all
read -r ok nospc other <<<"$(stat_seeds 20001 2001 2100)"
[[ $ok -eq 100 ]] || fail "after the kernel forgot them, uid 20001 got $ok of 100 new seeds"
echo "after forget: uid 20001 gets new seeds again"
# fill the table: 1 + 128 + 10 + 1 + 100 slots used so far, 8 uids x 128 more
for u in $(seq 20011 20018); do
	stat_seeds "$u" $((u * 1000)) $((u * 1000 + 127)) >/dev/null
done
read -r ok nospc other <<<"$(stat_seeds 20020 9000000 9000000)"
[[ $nospc -eq 1 ]] || fail "the table did not fill (a new seed was found: $ok)"
forget_all
read -r ok nospc other <<<"$(stat_seeds 20020 7777777 7777777)"
[[ $ok -eq 1 ]] || fail "no slot recycled after forget"
rec=$(stat_field "$T/mnt" seeds_recycled)
[[ $rec -ge 1 ]] || fail "seeds_recycled $rec"
echo "table full, then forgotten: a new seed got a recycled slot ($rec recycled)"
"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" --only epochs --seed 7777777 --epochs 2 >"$T/check.log" 2>&1 ||
	fail "views of a recycled slot's seed: $(tail -3 "$T/check.log")"
tail -1 "$T/check.log"
sfs_umount "$T/mnt"
echo PASS
