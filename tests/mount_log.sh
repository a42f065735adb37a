#!/usr/bin/env bash
# mount_log.sh - -o log=FILE: the daemon's messages reach a file, with their
# time, also once it has detached (stderr is /dev/null then); a relative path
# is the one given at mount, not one under /; a file that cannot be opened
# stops the mount before it mounts, naming the file.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/s.sprites" --count-train 600 --count-test 100 --sheet 100 >/dev/null 2>&1 ||
	fail "mkstore"
"$MOUNT_CHECK" --corrupt "$T/s.sprites" 2 >/dev/null || fail "corrupt"

# detached (no -f), the log named relative to the working folder
mkdir -p "$T/mnt"
MOUNTS+=("$T/mnt")
(cd "$T" && "$SPRITEFS" -o log=daemon.log s.sprites mnt) || fail "spritefs (detached) exited $?"
is_mounted "$T/mnt" || fail "not mounted"
cat "$T/mnt/train/batches/2.sprite" >/dev/null 2>&1 && fail "the bad sheet read without error"
cat "$T/mnt/train/batches/1.sprite" >/dev/null || fail "a good sheet does not read"
for _ in $(seq 50); do grep -q "sheet 2 " "$T/daemon.log" 2>/dev/null && break; sleep 0.1; done
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[+-][0-9]{4} \[[0-9]+\] spritefs: .*s\.sprites: sheet 2 \(split train, .*files that need it give EIO$' \
	"$T/daemon.log" || fail "no timed line naming sheet 2 in the log: $(cat "$T/daemon.log" 2>&1)"
[[ $(grep -c "sheet 2 " "$T/daemon.log") -eq 1 ]] || fail "sheet 2 logged more than once"
fusermount3 -u "$T/mnt" || fail "fusermount3 -u"

# in the foreground: stderr and the file both; a second mount appends
sfs_mount "$T/fg.err" "$T/s.sprites" "$T/mnt" -o "log=$T/daemon.log"
cat "$T/mnt/train/batches/2.sprite" >/dev/null 2>&1 && fail "the bad sheet read without error (-f)"
sfs_umount "$T/mnt"
grep -q "sheet 2 " "$T/fg.err" || fail "-f: the line is not on stderr: $(cat "$T/fg.err")"
[[ $(grep -c "sheet 2 " "$T/daemon.log") -eq 2 ]] || fail "the second mount did not append"

# a log that cannot be opened: exit 1 before mounting, the file named
for bad in "$T/nowhere/x.log" "$T"; do
	rc=0
	"$SPRITEFS" -f -o "log=$bad" "$T/s.sprites" "$T/mnt" >"$T/bad.err" 2>&1 || rc=$?
	[[ $rc -eq 1 ]] || fail "-o log=$bad: exit $rc, want 1"
	grep -q "spritefs: -o log=$bad: " "$T/bad.err" || fail "-o log=$bad: $(cat "$T/bad.err")"
	is_mounted "$T/mnt" && fail "-o log=$bad: mounted anyway"
done
echo "PASS"
