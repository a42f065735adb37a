#!/usr/bin/env bash
# mount_faults.sh - a sheet whose checksum fails gives EIO for exactly the
# files that need it (its batch file, the images.npy ranges over it, its
# sheet image, its samples' by-class images, the epoch batches holding one
# of its samples; labels.npy over it only in a version-2 store, whose labels
# are in the sheets: a version-3 one serves them from its label table) while
# every other file reads exactly; one log line names the sheet; stats.json
# counts it; the daemon keeps serving. Also: writes, creates, unlinks, mkdir,
# rename, truncate, chmod give EROFS.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

"$MKSTORE" "$T/s.sprites" --count-train 2000 --count-test 300 --sheet 128 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
read -r split first count < <("$MOUNT_CHECK" --corrupt "$T/s.sprites" 5) || fail "corrupt"
echo "corrupted sheet 5: split $split, samples $first..+$count"
# batch=1000: epoch 0's two batches then both need the bad sheet, so the
# checker sees EIO there; the other views must still read exactly.
sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o cache=32M
"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" --epochs 1 >"$T/check.log" 2>&1 ||
	fail "mount_check with a bad sheet: $(tail -5 "$T/check.log")"
tail -1 "$T/check.log"
grep -q "sheet 5 " "$T/spritefs.log" || fail "no log line names sheet 5"
[[ $(grep -c "sheet 5 " "$T/spritefs.log") -eq 1 ]] || fail "sheet 5 logged more than once"
# the line says where the sheet is and what failed, once: no "sheet 5: sheet 5"
grep -qE "sheet 5 \(split $split, samples $first\.\.[0-9]+, offset [0-9]+\): [a-z]+[^:]*; files that need it give EIO" \
	"$T/spritefs.log" || fail "the log line is not as documented: $(grep "sheet 5" "$T/spritefs.log")"

cf=$(stat_field "$T/mnt" checksum_failures)
[[ $cf -eq 1 ]] || fail "stats.json checksum_failures=$cf, expected 1"
[[ $(stat_field "$T/mnt" eio) -gt 0 ]] || fail "stats.json counts no EIO replies"
# the bad batch file fails, its neighbours read
cat "$T/mnt/train/batches/05.sprite" >/dev/null 2>&1 && fail "batches/05.sprite read without error"
err=$(cat "$T/mnt/train/batches/05.sprite" 2>&1 >/dev/null)
[[ $err == *"Input/output error"* ]] || fail "batches/05.sprite: expected EIO, got: $err"
cat "$T/mnt/train/batches/04.sprite" "$T/mnt/train/batches/06.sprite" >/dev/null ||
	fail "neighbours of the bad sheet do not read"
kill -0 "$SFS_PID" || fail "the daemon died"
# a reader that has just had EIO finds it counted in stats.json at once, not
# in the page the kernel cached for the last 10 ms tick (kernel_open=1)
/usr/bin/python3 - "$T/mnt" <<'PY' || fail "stats.json lags behind an EIO"
import json, sys
m = sys.argv[1]
def eio():
    with open(m + "/.spritefs/stats.json") as f:
        return json.load(f)["eio"]
for i in range(50):
    before = eio()
    try:
        open(m + "/train/batches/05.sprite", "rb").read()
        sys.exit("batches/05.sprite read without error")
    except OSError:
        pass
    after = eio()
    if after <= before:
        sys.exit(f"try {i}: eio {before} before the failed read, {after} after it")
print("stats.json counts each EIO before the reader reads it")
PY

# read-only: every kind of change is refused with EROFS
/usr/bin/python3 - "$T/mnt" <<'PY' || fail "EROFS checks"
import errno, os, sys
m = sys.argv[1]
f = m + "/train/batches/00.sprite"
def erofs(what, fn):
    try:
        fn()
    except OSError as e:
        if e.errno != errno.EROFS:
            sys.exit(f"{what}: errno {e.errno} ({e.strerror}), expected EROFS")
        return
    sys.exit(f"{what}: succeeded on a read-only mount")
erofs("open for writing", lambda: os.open(f, os.O_WRONLY))
erofs("create", lambda: os.open(m + "/train/new.sprite", os.O_CREAT | os.O_WRONLY, 0o644))
erofs("unlink", lambda: os.unlink(f))
erofs("mkdir", lambda: os.mkdir(m + "/train/newdir"))
erofs("rmdir", lambda: os.rmdir(m + "/train/batches"))
erofs("rename", lambda: os.rename(f, m + "/train/batches/x.sprite"))
erofs("truncate", lambda: os.truncate(f, 0))
erofs("chmod", lambda: os.chmod(f, 0o666))
erofs("symlink", lambda: os.symlink("x", m + "/train/link"))
print("EROFS for open-write, create, unlink, mkdir, rmdir, rename, truncate, chmod, symlink")
PY
sfs_umount "$T/mnt"

# version 2: labels.npy over the bad sheet fails too, and by-class/ leaves its samples out
"$MKSTORE" "$T/v2.sprites" --count-train 2000 --count-test 300 --sheet 128 --version 2 \
	>"$T/mkstore.log" 2>&1 || fail "mkstore --version 2"
"$MOUNT_CHECK" --corrupt "$T/v2.sprites" 5 >/dev/null || fail "corrupt v2"
sfs_mount "$T/spritefs-v2.log" "$T/v2.sprites" "$T/mnt2" -o cache=32M
"$MOUNT_CHECK" "$T/v2.sprites" "$T/mnt2" --epochs 1 --only json,labels,byclass >"$T/check2.log" 2>&1 ||
	fail "mount_check of a version-2 store with a bad sheet: $(tail -5 "$T/check2.log")"
tail -1 "$T/check2.log"
cat "$T/mnt2/train/labels.npy" >/dev/null 2>&1 && fail "version 2: labels.npy read past a bad sheet"
sfs_umount "$T/mnt2"
echo "PASS"
