#!/usr/bin/env bash
# mount_perms.sh - under -o allow_other the mount answers as its store does.
#
# A store that is 0600 in a 0700 folder: every file and folder of the mount
# is root's with no bit for others, and another user gets EACCES reading it
# through the mount, as on the file; dataset.json and the mount table name
# the store by its file name, never the private folder. A 0640 store of
# group G: a user of G reads, another does not. A world-readable store in
# a public path is read by anyone, and named in full. A user who mounts a
# store they cannot read with allow_other is refused. Without allow_other
# nothing changes (the mounting user's, 0444).
source "$(dirname "$0")/mount_lib.sh"
need_fuse
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (other uids, allow_other)"; exit 77; }

as() { # UID GID COMMAND...: run as another user
	local u=$1 g=$2
	shift 2
	setpriv --reuid="$u" --regid="$g" --clear-groups "$@"
}

chmod 755 "$T"
mkdir -p "$T/priv" "$T/grp" "$T/pub"
"$MKSTORE" "$T/priv/s.sprites" --count-train 300 --count-test 10 --sheet 64 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
cp "$T/priv/s.sprites" "$T/grp/s.sprites"
cp "$T/priv/s.sprites" "$T/pub/s.sprites"
chmod 700 "$T/priv"
chmod 600 "$T/priv/s.sprites"
chgrp 20001 "$T/grp" "$T/grp/s.sprites"
chmod 750 "$T/grp"
chmod 640 "$T/grp/s.sprites"
chmod 755 "$T/pub"
chmod 644 "$T/pub/s.sprites"

# ---- a private store ----------------------------------------------------
as 20001 20001 cat "$T/priv/s.sprites" >/dev/null 2>&1 && fail "setup: uid 20001 reads the store file"
sfs_mount "$T/priv.log" "$T/priv/s.sprites" "$T/mnt" -o allow_other
m=$(stat -c '%u %a' "$T/mnt")
f=$(stat -c '%u %a' "$T/mnt/dataset.json")
i=$(stat -c '%u %a' "$T/mnt/train/images.npy")
echo "private store: root folder $m, dataset.json $f, images.npy $i"
[[ $m == "0 500" && $f == "0 400" && $i == "0 400" ]] || fail "modes do not follow the 0600 store"
as 20001 20001 cat "$T/mnt/train/images.npy" >/dev/null 2>"$T/err.log" &&
	fail "uid 20001 read a 0600 store through the mount"
grep -q "Permission denied" "$T/err.log" || fail "not EACCES: $(cat "$T/err.log")"
as 20001 20001 cat "$T/mnt/train/epochs/0/0/0.sprite" >/dev/null 2>&1 &&
	fail "uid 20001 read a view of a 0600 store"
grep -q "$T/priv" "$T/mnt/dataset.json" && fail "dataset.json names the private folder"
grep -q '"store": "s.sprites"' "$T/mnt/dataset.json" || fail "dataset.json: $(grep store "$T/mnt/dataset.json")"
grep "$T/mnt" /proc/mounts | grep -q "$T/priv" && fail "the mount table names the private folder"
cat "$T/mnt/train/images.npy" >/dev/null || fail "root cannot read its own mount"
sfs_umount "$T/mnt"

# ---- a group's store ----------------------------------------------------
sfs_mount "$T/grp.log" "$T/grp/s.sprites" "$T/mnt" -o allow_other
[[ $(stat -c '%g %a' "$T/mnt/train/labels.npy") == "20001 440" ]] ||
	fail "group store: $(stat -c '%g %a' "$T/mnt/train/labels.npy")"
as 20002 20001 cmp -s "$T/mnt/train/labels.npy" "$T/mnt/train/labels.npy" ||
	fail "a member of the store's group cannot read it"
as 20003 20003 cat "$T/mnt/train/labels.npy" >/dev/null 2>&1 && fail "a user outside the group read it"
echo "group store: its group reads, others do not"
sfs_umount "$T/mnt"

# ---- a public store -----------------------------------------------------
sfs_mount "$T/pub.log" "$T/pub/s.sprites" "$T/mnt" -o allow_other
as 20003 20003 cat "$T/mnt/train/images.npy" >/dev/null || fail "a public store is not readable by others"
grep -q "\"store\": \"$T/pub/s.sprites\"" "$T/mnt/dataset.json" ||
	fail "a public store is not named in full: $(grep store "$T/mnt/dataset.json")"
echo "public store: read by anyone, named in full"
sfs_umount "$T/mnt"

# ---- no allow_other: as before --------------------------------------------
sfs_mount "$T/own.log" "$T/priv/s.sprites" "$T/mnt"
[[ $(stat -c '%u %a' "$T/mnt/train/images.npy") == "0 444" ]] || fail "without allow_other the modes changed"
sfs_umount "$T/mnt"

# ---- a user who cannot read the store ----------------------------------
mkdir -p "$T/umnt"
chmod 777 "$T/umnt"
MOUNTS+=("$T/umnt")
# with CAP_DAC_READ_SEARCH (a wrapper that lends the daemon rights to read
# any file) the store opens, yet the user who ran it could not read it
rc=0
as 20001 20001 --inh-caps=+dac_read_search --ambient-caps=+dac_read_search \
	timeout 30 "$SPRITEFS" -f -o allow_other "$T/priv/s.sprites" "$T/umnt" >"$T/user.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "uid 20001 mounted a store it cannot read (exit $rc)"
grep -q "allow_other would serve it" "$T/user.log" || fail "refusal does not say why: $(cat "$T/user.log")"
grep -q "uid 20001" "$T/user.log" || fail "refusal does not name the uid"
is_mounted "$T/umnt" && fail "left a mount"
echo "uid 20001 (with CAP_DAC_READ_SEARCH) mounting a store it cannot read: $(head -1 "$T/user.log")"
echo PASS
