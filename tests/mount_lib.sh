# mount_lib.sh - shared helpers of the spritefs mount tests (sourced, not run).
#
# Every test gets a private temp directory; an EXIT trap unmounts whatever
# the test mounted (fusermount3 -u, then a lazy umount) and stops the daemons
# it started, by pid, so that no path of a test leaves a mount behind.
# Environment (set by tests/meson.build): SPRITEFS, MKSTORE, MOUNT_CHECK, SRCDIR,
# MKTREE, SPRITEFS_PACK.

set -u
T=$(mktemp -d "${TMPDIR:-/tmp}/sfs-test.XXXXXX")
MOUNTS=()
PIDS=()

cleanup() {
	local m p
	for m in "${MOUNTS[@]}"; do
		if grep -qs " $m " /proc/mounts; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		fi
	done
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	for l in "$T"/*.log; do
		[[ -f $l ]] && { echo "--- $l" >&2; tail -20 "$l" >&2; }
	done
	exit 1
}

need_fuse() {
	if [[ ! -c /dev/fuse ]] || ! command -v fusermount3 >/dev/null; then
		echo "SKIP: no /dev/fuse or fusermount3"
		exit 77
	fi
}

is_mounted() {
	grep -qs " $1 fuse" /proc/mounts
}

# sfs_mount LOG SOURCE MOUNTPOINT [spritefs args...]: start spritefs -f in the
# background, wait until the mount is up; the daemon's pid is in SFS_PID.
sfs_mount() {
	local log=$1 src=$2 mnt=$3
	shift 3
	mkdir -p "$mnt"
	MOUNTS+=("$mnt")
	"$SPRITEFS" -f "$@" "$src" "$mnt" >"$log" 2>&1 &
	SFS_PID=$!
	PIDS+=("$SFS_PID")
	for _ in $(seq 200); do
		is_mounted "$mnt" && return 0
		kill -0 "$SFS_PID" 2>/dev/null || fail "spritefs exited before mounting $mnt: $(cat "$log")"
		sleep 0.05
	done
	fail "timed out mounting $mnt"
}

# sfs_umount MOUNTPOINT: unmount and check that the daemon (SFS_PID) exits 0.
sfs_umount() {
	fusermount3 -u "$1" || fail "fusermount3 -u $1"
	local rc=0
	wait "$SFS_PID" || rc=$?
	[[ $rc -eq 0 ]] || fail "spritefs exited with $rc after unmount"
}

source "$(dirname "${BASH_SOURCE[0]}")/stat_field.sh"
