#!/usr/bin/env bash
# mount_helper.sh - `mount -t fuse.spritefs SOURCE MOUNTPOINT -o ...` works
# (mount.fuse3 runs spritefs from PATH with our options mixed with FUSE's),
# the options reach the daemon, the mount is read-only, and umount ends it.
source "$(dirname "$0")/mount_lib.sh"
need_fuse
command -v mount.fuse3 >/dev/null || [[ -x /sbin/mount.fuse3 ]] || { echo "SKIP: no mount.fuse3"; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "SKIP: mount(8) with a helper needs root"; exit 77; }

"$MKSTORE" "$T/s.sprites" --count-train 400 --count-test 40 --sheet 64 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
mkdir -p "$T/bin" "$T/mnt"
ln -s "$SPRITEFS" "$T/bin/spritefs"
MOUNTS+=("$T/mnt")

check_mount() { # what: the mount is ours, read-only, options arrived, bytes exact
	local line
	line=$(grep " $T/mnt " /proc/mounts) || fail "$1: not in /proc/mounts"
	echo "$1: $line"
	[[ $line == *"fuse.spritefs"* ]] || fail "$1: type is not fuse.spritefs"
	[[ $line == *" ro,"* ]] || fail "$1: not mounted read-only"
	[[ $line == *"allow_other"* ]] || fail "$1: allow_other did not pass through"
	grep -q '"batch": 40' "$T/mnt/dataset.json" || fail "$1: batch=40 did not reach spritefs"
	grep -q '"seed": 3' "$T/mnt/dataset.json" || fail "$1: seed=3 did not reach spritefs"
	"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" --seed 3 --epochs 1 >"$T/check.log" 2>&1 ||
		fail "$1: mount_check: $(tail -3 "$T/check.log")"
	umount "$T/mnt" || fail "$1: umount"
	for _ in $(seq 100); do is_mounted "$T/mnt" || break; sleep 0.05; done
	is_mounted "$T/mnt" && fail "$1: still mounted after umount"
}

# What mount(8) runs for -t fuse.spritefs, with our build on PATH (mount(8)
# itself resets PATH to the system's for its helpers).
PATH="$T/bin:$PATH" mount.fuse3 "$T/s.sprites" "$T/mnt" -t spritefs \
	-o cache=8M,batch=40,seed=3,allow_other,nosuid,nodev,rw >"$T/mount.log" 2>&1 ||
	fail "mount.fuse3 -t spritefs: $(cat "$T/mount.log")"
check_mount "mount.fuse3"

# mount -t fuse.spritefs itself, when spritefs is installed where mount(8) looks
if [[ -x /usr/local/bin/spritefs || -x /usr/bin/spritefs ]]; then
	mount -t fuse.spritefs "$T/s.sprites" "$T/mnt" -o cache=8M,batch=40,seed=3,allow_other \
		>"$T/mount.log" 2>&1 || fail "mount -t fuse.spritefs: $(cat "$T/mount.log")"
	check_mount "mount -t fuse.spritefs (installed spritefs)"
else
	echo "spritefs not installed: mount -t fuse.spritefs checked through mount.fuse3 only"
fi
echo "PASS"
