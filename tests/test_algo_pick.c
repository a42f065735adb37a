/*
 * test_algo_pick - the GPU backend's choice of convolution algorithm
 * (cuda/algo.h), without a GPU: deterministic by default, the first
 * deterministic one of cuDNN's ranking that ran and fits the workspace;
 * with --fast the first that ran and fits, whatever its determinism.
 */
#include <stdio.h>

#include "cuda/algo.h"

#define MiB ((size_t)1 << 20)

static int bad;

static void expect(const char *what, const struct hn_algo_cand *c, int n, size_t limit, int det,
		   int want)
{
	int got = hn_algo_pick(c, n, limit, det);
	if (got != want) {
		fprintf(stderr, "FAIL: %s (%s): picked %d, want %d\n", what,
			det ? "deterministic" : "--fast", got, want);
		bad++;
	}
}

int main(void)
{
	/* a backward-filter ranking as cuDNN gives it: ALGO_0 and ALGO_3 use atomics */
	const struct hn_algo_cand bwd[] = {
		{.algo = 0, .ok = 1, .memory = 0, .deterministic = 0},
		{.algo = 3, .ok = 1, .memory = 4 * MiB, .deterministic = 0},
		{.algo = 1, .ok = 1, .memory = 64 * MiB, .deterministic = 1},
		{.algo = 5, .ok = 1, .memory = 2 * MiB, .deterministic = 1},
	};
	expect("atomics first", bwd, 4, 1024 * MiB, 1, 2);
	expect("atomics first", bwd, 4, 1024 * MiB, 0, 0);
	expect("over the workspace limit", bwd, 4, 32 * MiB, 1, 3);
	expect("no deterministic one fits", bwd, 4, 1 * MiB, 1, -1);
	expect("no deterministic one fits", bwd, 4, 1 * MiB, 0, 0);

	const struct hn_algo_cand fwd[] = {
		{.algo = 6, .ok = 0, .memory = 0, .deterministic = 1}, /* not supported here */
		{.algo = 1, .ok = 1, .memory = 0, .deterministic = 1},
	};
	expect("a failed status", fwd, 2, 1024 * MiB, 1, 1);
	expect("a failed status", fwd, 2, 1024 * MiB, 0, 1);
	expect("empty ranking", fwd, 0, 1024 * MiB, 1, -1);

	/* the choice is a function of the ranking alone: the same input, the same answer */
	for (int i = 0; i < 1000; i++)
		if (hn_algo_pick(bwd, 4, 1024 * MiB, 1) != 2) {
			fprintf(stderr, "FAIL: the choice changed between calls\n");
			return 1;
		}
	if (bad)
		return 1;
	printf("PASS\n");
	return 0;
}
