# mpi_lib.sh - sourced (after hntrain_common.sh) by the hntrain_mpi*.sh
# tests: an mpirun for one machine that also runs as root (CI containers),
# with shared-memory transport only, and ranks that may outnumber cores.
if ! command -v mpirun >/dev/null 2>&1; then
	echo "SKIP: mpirun not found (openmpi-bin)"
	exit 77
fi
if ! "$HNTRAIN" -V 2>/dev/null | grep -q "^ranks: MPI"; then
	echo "SKIP: hntrain built without MPI (-Dmpi=disabled, as the TSan build is)"
	exit 77
fi
source "$(dirname "${BASH_SOURCE[0]}")/mpi_env.sh"
# No test waits forever on a rank: every mpirun is bounded.
MPI_LIMIT=${MPI_LIMIT:-150}

# mpi_hash NP ARGS...: hntrain --quiet on NP ranks; prints rank 0's weights hash
mpi_hash() {
	local np=$1 out rc=0
	shift
	out=$(timeout "$MPI_LIMIT" "${MPIRUN[@]}" -np "$np" "$HNTRAIN" --quiet "$@" \
		2>"$TMP/stderr") || rc=$?
	if [[ $rc -ne 0 ]]; then
		cat "$TMP/stderr" >&2
		fail "mpirun -np $np hntrain $* exited $rc"
	fi
	out=$(printf '%s\n' "$out" | sed -n 's/^weights xxh3 \([0-9a-f]\{16\}\)$/\1/p')
	[[ $(printf '%s\n' "$out" | grep -c .) -eq 1 ]] ||
		fail "mpirun -np $np hntrain $*: expected one weights hash (rank 0's), got '$out'"
	printf '%s\n' "$out"
}

# mpi_fail PATTERN MPIRUN-ARGS...: the run must fail within MPI_LIMIT, saying PATTERN
mpi_fail() {
	local pat=$1 rc=0
	shift
	timeout "$MPI_LIMIT" "${MPIRUN[@]}" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
	[[ $rc -ne 124 ]] || fail "mpirun $* hung (killed after $MPI_LIMIT s)"
	[[ $rc -ne 0 ]] || fail "mpirun $* succeeded, expected an error matching '$pat'"
	grep -qiE -- "$pat" "$TMP/err" || {
		cat "$TMP/err" >&2
		fail "mpirun $*: stderr does not match '$pat'"
	}
	echo "ok: exit $rc, $(grep -iE -m1 -- "$pat" "$TMP/err" | head -c 200)"
}
