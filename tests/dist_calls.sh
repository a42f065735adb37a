#!/usr/bin/env bash
# dist_calls - test_dist, the collective calls of trainer/dist_mpi.c, alone
# (the world of one rank) and on 3 MPI ranks: rank 0's bytes shared, the
# gradient sum in rank order bit for bit, the gather in rank order.
source "$(dirname "$0")/hntrain_common.sh"
source "$(dirname "$0")/mpi_lib.sh"
T=${TEST_DIST:?TEST_DIST not set (run through meson test)}
"$T" >"$TMP/one" 2>&1 || { cat "$TMP/one"; fail "test_dist alone"; }
grep -q "test_dist: rank 0 of 1 (local): ok" "$TMP/one" || { cat "$TMP/one"; fail "alone: not ok"; }
timeout "$MPI_LIMIT" "${MPIRUN[@]}" -np 3 "$T" >"$TMP/out" 2>&1 ||
	{ cat "$TMP/out"; fail "test_dist on 3 ranks"; }
cat "$TMP/out"
[[ $(grep -c "test_dist: rank [0-2] of 3 (mpi): ok" "$TMP/out") -eq 3 ]] ||
	fail "not every one of the 3 ranks said ok"
echo ok
