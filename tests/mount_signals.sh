#!/usr/bin/env bash
# mount_signals.sh - SIGTERM, SIGINT and SIGHUP unmount cleanly (mount gone
# from /proc/mounts, daemon exits 0), the mount point given as an absolute or
# a relative path; without -f the daemon detaches after the
# store is validated and serves until unmounted; with -o auto_unmount a
# daemon killed by SIGKILL leaves no mount behind. SIGTERM and SIGINT while
# an image folder is packed on first use (the daemon started as a background
# job, so with SIGINT ignored): killed by that signal, saying so, with no
# temp file, no store and no mount left; the next spritefs packs the folder
# to spritefs-pack's bytes and serves them exactly.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/s.sprites" --count-train 700 --count-test 50 --sheet 64 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
# each signal, with the mount point given as an absolute and a relative path
# (the daemon works in /, so it must unmount by the absolute one)
mkdir -p "$T/mnt"
MOUNTS+=("$T/mnt")
for c in "TERM $T/mnt" "INT $T/mnt" "HUP $T/mnt" "TERM mnt" "INT mnt"; do
	read -r sig mp <<<"$c"
	(cd "$T" && exec env --default-signal=HUP "$SPRITEFS" -f s.sprites "$mp") >"$T/spritefs.log" 2>&1 &
	SFS_PID=$!
	PIDS+=("$SFS_PID")
	for _ in $(seq 200); do
		is_mounted "$T/mnt" && break
		kill -0 "$SFS_PID" 2>/dev/null || fail "spritefs exited before mounting $mp"
		sleep 0.05
	done
	cat "$T/mnt/train/batches/"*.sprite >/dev/null || fail "reading before SIG$sig ($mp)"
	exec 3<"$T/mnt/train/images.npy" # an open file must not hold the exit up
	kill -s "$sig" "$SFS_PID"
	rc=0
	timeout 20 tail --pid="$SFS_PID" -f /dev/null || fail "daemon still running 20 s after SIG$sig"
	wait "$SFS_PID" || rc=$?
	exec 3<&-
	[[ $rc -eq 0 ]] || fail "exit status $rc after SIG$sig ($mp)"
	is_mounted "$T/mnt" && fail "still mounted after SIG$sig with mount point $mp"
	echo "SIG$sig, mount point $mp: unmounted, exit 0"
done

# daemon mode: the command returns once mounted
"$SPRITEFS" -o cache=8M "$T/s.sprites" "$T/mnt" >"$T/daemon.log" 2>&1 || fail "daemon mode: $(cat "$T/daemon.log")"
MOUNTS+=("$T/mnt")
is_mounted "$T/mnt" || fail "daemon mode: not mounted after spritefs returned"
cmp <(cat "$T/mnt/train/batches/00.sprite") <(cat "$T/mnt/train/batches/0.sprite") ||
	fail "daemon mode: reads differ"
"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" --only batches,json >"$T/check.log" 2>&1 ||
	fail "daemon mode: $(tail -3 "$T/check.log")"
fusermount3 -u "$T/mnt" || fail "daemon mode: fusermount3 -u"
for _ in $(seq 100); do is_mounted "$T/mnt" || break; sleep 0.05; done
is_mounted "$T/mnt" && fail "daemon mode: still mounted"
echo "daemon mode: mounted, served, unmounted"

# -o auto_unmount (FUSE's): a daemon killed outright takes its mount with it
sfs_mount "$T/auto.log" "$T/s.sprites" "$T/mnt" -o auto_unmount
cat "$T/mnt/train/batches/0.sprite" >/dev/null || fail "auto_unmount: read"
kill -KILL "$SFS_PID"
wait "$SFS_PID" 2>/dev/null
for _ in $(seq 100); do is_mounted "$T/mnt" || break; sleep 0.05; done
is_mounted "$T/mnt" && fail "auto_unmount: still mounted 5 s after SIGKILL"
echo "auto_unmount: SIGKILL, mount removed"

# ---- a signal while an image folder is packed on first use ---------------------
# A 256x256 image and -o tile=256x256 make every tile 256x256, so the pack of these
# 901 images takes a good part of a second. The daemon is frozen (SIGSTOP) as
# soon as its temp file is there, so the signal is known to land mid-pack.
"$MKTREE" gray "$T/imgs" 200 >/dev/null || fail "mktree"
{
	printf 'P5\n256 256\n255\n'
	seq 100000 | head -c 65536
} >"$T/imgs/train/ant/a-first.pgm"
mkdir -p "$T/cache" "$T/pmnt"
MOUNTS+=("$T/pmnt")
for sig in TERM INT; do
	"$SPRITEFS" -f -o cachedir="$T/cache",tile=256x256 "$T/imgs" "$T/pmnt" >"$T/pack-$sig.log" 2>&1 &
	SFS_PID=$!
	PIDS+=("$SFS_PID")
	tmp="$T/cache/*.sprites.tmp.$SFS_PID"
	for _ in $(seq 2000); do
		compgen -G "$tmp" >/dev/null && break
		kill -0 "$SFS_PID" 2>/dev/null || break
		sleep 0.005
	done
	kill -STOP "$SFS_PID" 2>/dev/null
	if ! compgen -G "$tmp" >/dev/null; then
		kill -CONT "$SFS_PID" 2>/dev/null
		fail "SIG$sig: no pack under way to interrupt (temp file $tmp): $(cat "$T/pack-$sig.log")"
	fi
	kill -s "$sig" "$SFS_PID"
	kill -CONT "$SFS_PID"
	timeout 10 tail --pid="$SFS_PID" -f /dev/null ||
		fail "SIG$sig during the pack: daemon still running 10 s later: $(cat "$T/pack-$sig.log")"
	rc=0
	wait "$SFS_PID" || rc=$?
	[[ $rc -eq $((128 + $(kill -l "$sig"))) ]] ||
		fail "SIG$sig during the pack: exit status $rc, want killed by SIG$sig"
	grep -q "^spritefs: cannot pack $T/imgs: stopped by SIG$sig$" "$T/pack-$sig.log" ||
		fail "SIG$sig during the pack: not said: $(cat "$T/pack-$sig.log")"
	[[ -z $(ls -A "$T/cache") ]] || fail "SIG$sig during the pack left $(ls -A "$T/cache")"
	is_mounted "$T/pmnt" && fail "SIG$sig during the pack: $T/pmnt is mounted"
	echo "SIG$sig during the first-use pack: killed by it, nothing left"
done
sfs_mount "$T/pack-again.log" "$T/imgs" "$T/pmnt" -o cachedir="$T/cache",tile=256x256
grep -q "packing $T/imgs into" "$T/pack-again.log" || fail "not packed again: $(cat "$T/pack-again.log")"
grep -q "temp file" "$T/pack-again.log" && fail "killed packs left temp files: $(cat "$T/pack-again.log")"
"$SPRITEFS_PACK" --tile 256x256 "$T/imgs" "$T/ref.sprites" >"$T/ref.log" 2>&1 || fail "spritefs-pack: $(cat "$T/ref.log")"
cmp -s "$T/ref.sprites" "$T/cache/"*.sprites || fail "the cache store differs from spritefs-pack's"
"$MOUNT_CHECK" "$T/ref.sprites" "$T/pmnt" --only json,batches,images,labels,byclass --step 7 \
	>"$T/check.log" 2>&1 || fail "packed again after the signals: $(tail -3 "$T/check.log")"
sfs_umount "$T/pmnt"
echo "after the signals: packed again to spritefs-pack's store, served exactly"
echo "PASS"
