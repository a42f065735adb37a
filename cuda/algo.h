/*
 * algo.h - which cuDNN convolution algorithm to use, as a pure function of
 * cuDNN's answers, so that the rule is tested without a GPU
 * (tests/test_algo_pick.c).
 *
 * Deterministic mode (the default): the candidates are cuDNN's heuristic
 * ranking (cudnnGet*Algorithm_v7), which depends only on the GPU, the cuDNN
 * version and the shapes, never on timings; the first one that succeeded,
 * fits the workspace limit and is marked CUDNN_DETERMINISTIC is taken. Two
 * runs then run the same algorithms, and none of them adds with atomics, so
 * the same seed gives the same weights. Fast mode (--fast): the candidates
 * are cudnnFind*'s timings, fastest first, and the first that succeeded and
 * fits is taken, deterministic or not.
 */
#ifndef HN_CUDA_ALGO_H
#define HN_CUDA_ALGO_H

#include <stddef.h>

/* One cudnn*AlgoPerf_t entry, as far as the choice is concerned. */
struct hn_algo_cand {
	int algo;
	int ok;		   /* status == CUDNN_STATUS_SUCCESS */
	size_t memory;	   /* workspace bytes it needs */
	int deterministic; /* determinism == CUDNN_DETERMINISTIC */
};

/* Index of the candidate to use among cand[0..n), or -1 when none will do. */
static inline int hn_algo_pick(const struct hn_algo_cand *cand, int n, size_t ws_limit,
			       int need_deterministic)
{
	for (int i = 0; i < n; i++)
		if (cand[i].ok && cand[i].memory <= ws_limit &&
		    (!need_deterministic || cand[i].deterministic))
			return i;
	return -1;
}

#endif
