# pack_lib.sh - what the spritefs-pack end-to-end tests share (sourced by
# test_pack.sh and test_fit.sh): a temporary folder $T removed on exit, a
# fail that counts instead of stopping, expect_rc, and the final verdict.
# The sourcing script sets NAME first.

T=$(mktemp -d "${TMPDIR:-/tmp}/$NAME.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}

# expect_rc WANT CMD... : run, keep output in $T/out, check the exit status.
expect_rc() {
	local want=$1
	shift
	"$@" >"$T/out" 2>&1
	local rc=$?
	if [[ $rc -ne $want ]]; then
		fail "exit $rc (want $want): $*"
		sed 's/^/    /' "$T/out" >&2
		return 1
	fi
	return 0
}

# The last line of the script: exit 1 naming the count, or say ok.
finish() {
	if ((fails)); then
		echo "$NAME: $fails failures" >&2
		exit 1
	fi
	echo "$NAME: ok"
}
