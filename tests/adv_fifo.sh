#!/usr/bin/env bash
# adv_fifo.sh - issue 29, item 10: readers given a FIFO fail at once with a
# message instead of hanging (spritefs-pack --verify and --info, hntrain
# --data and --resume, a mount); a checkpoint temporary left by a writer
# killed with -9 is removed by the next save; -o cache= above the machine's
# memory is refused; a live daemon says when its store is replaced at its
# path or written in place; --verify finds a non-zero byte in declared
# padding.
source "$(dirname "$0")/mount_lib.sh"
: "${HNTRAIN:?HNTRAIN not set (run through meson test)}"

"$MKSTORE" "$T/d.sprites" --count-train 200 --count-test 40 --tile 8x8x1 --classes 3 \
	--sheet 64 >/dev/null || fail "mkstore"
mkfifo "$T/fifo"

# fast_fail WHAT WANT CMD...: CMD exits non-zero within 10 s, saying WANT
fast_fail() {
	local what=$1 want=$2 rc=0
	shift 2
	timeout 10 "$@" >"$T/out" 2>&1 </dev/null || rc=$?
	[[ $rc -ne 124 ]] || fail "$what: hung on the FIFO (killed after 10 s)"
	[[ $rc -ne 0 ]] || fail "$what: exit 0"
	grep -q "$want" "$T/out" || fail "$what: no '$want' in: $(cat "$T/out")"
	echo "$what: exit $rc, $(grep -m1 "$want" "$T/out")"
}
fast_fail "--verify FIFO" "FIFO" "$SPRITEFS_PACK" --verify "$T/fifo"
fast_fail "--info FIFO" "FIFO" "$SPRITEFS_PACK" --info "$T/fifo"
fast_fail "hntrain --resume FIFO" "regular file\|FIFO" "$HNTRAIN" --data "$T/d.sprites" --resume "$T/fifo"
fast_fail "hntrain --data FIFO" "neither a store file nor a folder\|FIFO" "$HNTRAIN" --data "$T/fifo" --epochs 1
mkdir -p "$T/mnt"
MOUNTS+=("$T/mnt")
fast_fail "spritefs FIFO" "not a store file or an image folder\|FIFO" "$SPRITEFS" -f "$T/fifo" "$T/mnt"

# ---- a checkpoint temporary of a writer killed with -9 is removed -------------
true &
dead=$!
wait $dead
printf 'half a checkpoint' >"$T/ck.bin.tmp.$dead"
"$HNTRAIN" --data "$T/d.sprites" --model mlp --epochs 1 --threads 1 --checkpoint "$T/ck.bin" \
	>"$T/hn.out" 2>&1 || fail "hntrain --checkpoint: $(tail -3 "$T/hn.out")"
[[ -e $T/ck.bin.tmp.$dead ]] && fail "the killed writer's ck.bin.tmp.$dead was left"
[[ $(head -c 6 "$T/ck.bin") == HNCKPT ]] || fail "no checkpoint written"
echo "stale ck.bin.tmp.$dead removed by the next save"

# ---- -o cache= beyond memory is refused ---------------------------------------
fast_fail "cache=99999999G" "is more than this machine's memory" \
	"$SPRITEFS" -f -o cache=99999999G "$T/d.sprites" "$T/mnt"
is_mounted "$T/mnt" && fail "cache=99999999G: mounted"

size=$(stat -c %s "$T/d.sprites")
# ---- a store replaced at its path, or written in place, is said by the daemon --
# wait_log FILE TEXT: TEXT appears in FILE within 5 s
wait_log() {
	for _ in $(seq 400); do grep -q "$2" "$1" && return 0; sleep 0.05; done
	fail "no '$2' in $1: $(cat "$1")"
}
need_fuse
cp "$T/d.sprites" "$T/live.sprites"
sfs_mount "$T/live.log" "$T/live.sprites" "$T/mnt"
"$MKSTORE" "$T/new.sprites" --count-train 50 --count-test 10 --tile 8x8x1 --classes 3 >/dev/null
mv "$T/new.sprites" "$T/live.sprites"
wait_log "$T/live.log" "live.sprites was replaced by another file since the mount.*mount again"
grep -q '"train": {"count": 200,' "$T/mnt/dataset.json" ||
	fail "the mount stopped serving the store it opened: $(head -c 300 "$T/mnt/dataset.json")"
sfs_umount "$T/mnt"
cp "$T/d.sprites" "$T/live2.sprites"
sfs_mount "$T/live2.log" "$T/live2.sprites" "$T/mnt"
printf '\x01' | dd of="$T/live2.sprites" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
wait_log "$T/live2.log" "live2.sprites was written to in place since the mount"
sfs_umount "$T/mnt"
echo "a replaced and an overwritten store: both said by the live daemon"

# ---- --verify checks the padding the format declares zero --------------------
"$SPRITEFS_PACK" --verify "$T/d.sprites" >/dev/null 2>&1 || fail "--verify of a good store"
cp "$T/d.sprites" "$T/pad.sprites"
printf '\x5a' | dd of="$T/pad.sprites" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
fast_fail "--verify, a byte in the last padding" "must be zero" "$SPRITEFS_PACK" --verify "$T/pad.sprites"
echo PASS
