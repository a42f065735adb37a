#!/usr/bin/env bash
# mount_badstore.sh - spritefs refuses a bad store before mounting: truncated,
# bad magic, a future version, an empty file, a directory of no images, a
# missing file. Each gives a non-zero exit, a message naming the file and
# the problem, and no mount. Bad options and bad mount points (missing, a
# file, a live spritefs mount, one whose daemon was killed) are refused the
# same way; usage errors (bad options, no mount point, a third argument, an
# unknown FUSE option) with exit status 2 and one line, before any packing.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/good.sprites" --count-train 300 --count-test 10 --sheet 64 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
size=$(stat -c %s "$T/good.sprites")
head -c $((size - 5000)) "$T/good.sprites" >"$T/truncated.sprites"
{ printf 'NOTSPRIT'; tail -c +9 "$T/good.sprites"; } >"$T/magic.sprites"
cp "$T/good.sprites" "$T/future.sprites"
printf '\x07\x00\x00\x00' | dd of="$T/future.sprites" bs=1 seek=8 conv=notrunc status=none
: >"$T/empty.sprites"
mkdir -p "$T/mnt" "$T/noimages"

# file | words the message must contain
cases=(
	"truncated.sprites|truncated"
	"magic.sprites|magic"
	"future.sprites|version 7"
	"empty.sprites|magic"
	"missing.sprites|No such file"
)
for c in "${cases[@]}"; do
	IFS='|' read -r f words <<<"$c"
	MOUNTS+=("$T/mnt")
	rc=0
	timeout 60 "$SPRITEFS" -f "$T/$f" "$T/mnt" >"$T/out.log" 2>&1 || rc=$?
	[[ $rc -ne 0 ]] || fail "$f: spritefs exited 0"
	[[ $rc -ne 124 ]] || fail "$f: spritefs mounted it (timed out)"
	grep -q "$T/$f" "$T/out.log" || fail "$f: message does not name the file: $(cat "$T/out.log")"
	grep -qi "$words" "$T/out.log" || fail "$f: message lacks '$words': $(cat "$T/out.log")"
	is_mounted "$T/mnt" && fail "$f: left a mount"
	echo "$f: exit $rc: $(head -1 "$T/out.log")"
done
# an image folder with nothing to pack
rc=0
timeout 60 "$SPRITEFS" -f -o cachedir="$T/cache" "$T/noimages" "$T/mnt" >"$T/out.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "empty image folder: exit $rc"
echo "noimages: exit $rc: $(tail -1 "$T/out.log")"
# bad options: usage errors, exit status 2
for o in cache=lots prefetch=-1 batch=0 epochs=99999999 epochs=2048 direct=2 cache prefetch; do
	rc=0
	timeout 60 "$SPRITEFS" -f -o "$o" "$T/good.sprites" "$T/mnt" >"$T/out.log" 2>&1 || rc=$?
	[[ $rc -eq 2 ]] || fail "-o $o: exit $rc, not 2 (usage)"
	grep -q "${o%%=*}" "$T/out.log" || fail "-o $o: message does not name the option"
	is_mounted "$T/mnt" && fail "-o $o: left a mount"
done
# usage errors: one line naming the problem (no usage text), exit status 2; an
# unknown FUSE option is refused before SOURCE is looked at (no first-use pack)
usage_case() { # WORDS ARGS...
	local words=$1 rc=0
	shift
	timeout 60 "$SPRITEFS" "$@" >"$T/out.log" 2>&1 || rc=$?
	[[ $rc -eq 2 ]] || fail "spritefs $*: exit $rc, not 2 (usage): $(cat "$T/out.log")"
	grep -q -- "$words" "$T/out.log" || fail "spritefs $*: no '$words' in: $(cat "$T/out.log")"
	grep -q '^usage:' "$T/out.log" && fail "spritefs $*: printed the whole usage text"
	grep -q 'packing' "$T/out.log" && fail "spritefs $*: packed before refusing"
	is_mounted "$T/mnt" && fail "spritefs $*: left a mount"
	echo "spritefs $*: exit $rc: $(tail -1 "$T/out.log")"
}
usage_case "spritefs: no mount point given"
usage_case "spritefs: no mount point given" -f -o cache=64M
usage_case "unexpected argument 'three'" one two three
usage_case "bad FUSE options" -f -o no_such_fuse_option -o cachedir="$T/cache" "$T/noimages" "$T/mnt"
usage_case "bad FUSE options" --no-such-flag "$T/good.sprites" "$T/mnt"
# a cache larger than the machine's memory is refused (issue 29): it would bound nothing
rc=0
"$SPRITEFS" -f -o cache=99999999G "$T/good.sprites" "$T/mnt" >"$T/out.log" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "cache=99999999G: exit 0"
grep -q "spritefs: -o cache=.* is more than this machine's memory" "$T/out.log" ||
	fail "cache=99999999G not refused by name: $(cat "$T/out.log")"
is_mounted "$T/mnt" && fail "cache=99999999G: mounted anyway"
# mount points: missing, a file, and a mount whose daemon was killed; each is
# refused at once (before any packing), naming the mount point
: >"$T/plainfile"
for m in "$T/nomnt|No such file" "$T/plainfile|not a folder"; do
	IFS='|' read -r mp words <<<"$m"
	rc=0
	timeout 60 "$SPRITEFS" -f "$T/good.sprites" "$mp" >"$T/out.log" 2>&1 || rc=$?
	[[ $rc -ne 0 && $rc -ne 124 ]] || fail "mount point $mp: exit $rc"
	grep -q "mount point $mp: $words" "$T/out.log" || fail "mount point $mp: $(cat "$T/out.log")"
	echo "mount point ${mp##*/}: exit $rc: $(head -1 "$T/out.log")"
done
sfs_mount "$T/dead.log" "$T/good.sprites" "$T/dead"
# a live spritefs mount: a second on top would hide it
rc=0
timeout 60 "$SPRITEFS" -f "$T/good.sprites" "$T/dead" >"$T/out.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "a live mount was mounted over: exit $rc"
grep -q "already a spritefs mount" "$T/out.log" || fail "live mount: $(cat "$T/out.log")"
[[ $(grep -c " $T/dead " /proc/mounts) == 1 ]] || fail "a second mount was stacked on a live one"
echo "live mount: exit $rc: $(head -1 "$T/out.log")"
kill -KILL "$SFS_PID"
wait "$SFS_PID" 2>/dev/null
rc=0
timeout 60 "$SPRITEFS" -f "$T/good.sprites" "$T/dead" >"$T/out.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "a dead mount was mounted over: exit $rc"
grep -q "daemon has gone.*fusermount3 -u $T/dead" "$T/out.log" || fail "dead mount: $(cat "$T/out.log")"
[[ $(grep -c " $T/dead " /proc/mounts) == 1 ]] || fail "a second mount was stacked on the dead one"
echo "dead mount: exit $rc: $(head -1 "$T/out.log")"
echo "PASS"
