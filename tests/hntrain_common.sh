# hntrain_common.sh - sourced by the hntrain_*.sh tests.
#
# meson passes the binaries in the environment: HNTRAIN, MKSTORE, and when
# built SPRITEFS_PACK and SPRITEFS. Every test works in its own temporary
# folder, removed on exit (and unmounts what it mounted, see mount_store).
set -u
: "${HNTRAIN:?HNTRAIN not set (run through meson test)}"
: "${MKSTORE:?MKSTORE not set (run through meson test)}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hntrain-test.XXXXXX")
source "$(dirname "${BASH_SOURCE[0]}")/stat_field.sh"
HN_MOUNTS=()
HN_PIDS=()

hn_cleanup() {
	local m p
	for m in "${HN_MOUNTS[@]}"; do
		fusermount3 -u "$m" 2>/dev/null || umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done
	for p in "${HN_PIDS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap hn_cleanup EXIT
trap 'exit 1' INT TERM

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# hash ARGS...: run hntrain --quiet and print the weights hash (fails the test on error)
hash_of() {
	local out rc=0
	out=$("$HNTRAIN" --quiet "$@" 2>"$TMP/stderr") || rc=$?
	if [[ $rc -ne 0 ]]; then
		cat "$TMP/stderr" >&2
		fail "hntrain $* exited $rc"
	fi
	out=$(printf '%s\n' "$out" | sed -n 's/^weights xxh3 \([0-9a-f]\{16\}\)$/\1/p')
	[[ -n $out ]] || fail "hntrain $* printed no weights hash"
	printf '%s\n' "$out"
}

# same_hash NAME WANT ARGS...: hntrain ARGS must end with the weights hash WANT (the
# reference run's); prints the name and the hash either way.
same_hash() {
	local name=$1 want=$2 h
	shift 2
	h=$(hash_of "$@")
	printf '%-17s %s\n' "$name:" "$h"
	[[ $h == "$want" ]] || fail "$name gives weights $h, the reference run $want"
}

# expect_fail PATTERN ARGS...: hntrain must exit non-zero and say PATTERN on stderr
expect_fail() {
	local pat=$1 rc=0
	shift
	"$HNTRAIN" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
	[[ $rc -ne 0 ]] || fail "hntrain $* succeeded, expected an error matching '$pat'"
	[[ $rc -lt 128 ]] || fail "hntrain $* died of signal $((rc - 128))"
	grep -qiE -- "$pat" "$TMP/err" || {
		cat "$TMP/err" >&2
		fail "hntrain $*: stderr does not match '$pat'"
	}
	echo "ok: exit $rc, $(head -c 160 "$TMP/err" | head -n 1)"
}

# mount_store STORE MOUNTPOINT [-o OPTS]: mount with spritefs in the background
mount_store() {
	local store=$1 mnt=$2
	shift 2
	mkdir -p "$mnt"
	"$SPRITEFS" -f "$@" "$store" "$mnt" >"$TMP/spritefs.log" 2>&1 &
	HN_PIDS+=($!)
	HN_MOUNTS+=("$mnt")
	local i
	for i in $(seq 1 100); do
		[[ -f $mnt/dataset.json ]] && return 0
		kill -0 "${HN_PIDS[-1]}" 2>/dev/null || break
		sleep 0.1
	done
	cat "$TMP/spritefs.log" >&2
	fail "spritefs did not mount $store on $mnt"
}
