/*
 * ranks.c - the gpu backend's rules for several ranks that need no GPU to
 * check: which visible GPU a rank takes, and a bounded wait for work that
 * other ranks must finish (an NCCL communicator's set-up, a collective on
 * a stream), aborted after HNTRAIN_DIST_TIMEOUT as the cpu path is.
 *
 * Plain C without CUDA or NCCL: nccl.c and backend_cuda.c pass their polls
 * and aborts in, and tests/test_gpu_ranks.c drives the same code with fake
 * ones (a peer that never answers, one that fails, one that is late but in
 * time) on a machine without GPUs: the failure is injected below NCCL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/ranks.h"

double cu_dist_timeout(void)
{
	const char *t = getenv("HNTRAIN_DIST_TIMEOUT");
	char *end;
	double v = t && *t ? strtod(t, &end) : 0;
	return t && *t && !*end && v > 0 ? v : 600; /* dist_mpi.c's default */
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cu_wait_bounded(const struct cu_wait *w, char *err)
{
	double t0 = now_s(), deadline = t0 + w->timeout_s;
	long pause_ns =
		2000; /* 2 us, doubling to 0.1 ms: a step waits little longer than the sum */
	for (;;) {
		int rc = w->poll(w->ctx, err);
		if (rc == 0)
			return 0;
		if (rc < 0) {
			if (w->abort)
				w->abort(w->ctx);
			return rc;
		}
		if (now_s() >= deadline) {
			if (w->abort)
				w->abort(w->ctx);
			snprintf(
				err, CU_RANKS_ERR_MAX,
				"gpu: %s: no answer in %g s (HNTRAIN_DIST_TIMEOUT): a rank died or "
				"hangs; the NCCL communicator was aborted",
				w->what, w->timeout_s);
			return -ETIMEDOUT;
		}
		struct timespec ts = {0, pause_ns};
		nanosleep(&ts, NULL);
		if (pause_ns < 100000)
			pause_ns *= 2;
	}
}

int cu_pick_device(int local_rank, int local_ranks, int count, const char *visible,
		   const char *share, char *err)
{
	int L = local_ranks > 1 ? local_ranks : 1;
	if (count < 1 || local_rank < 0 || local_rank >= L) {
		snprintf(err, CU_RANKS_ERR_MAX, "gpu: local rank %d of %d, %d GPUs visible",
			 local_rank, L, count);
		return -EINVAL;
	}
	if (L <= count)
		return local_rank; /* one GPU each, in the order CUDA_VISIBLE_DEVICES gives */
	if (count == 1 && visible && *visible)
		return 0; /* the launcher gave this rank its own GPU */
	if (share && !strcmp(share, "1"))
		return local_rank % count;
	snprintf(err, CU_RANKS_ERR_MAX,
		 "gpu: %d ranks on this machine and %d GPU%s visible%s%.60s%s: run at most %d "
		 "rank%s per machine, give each rank its own GPU (CUDA_VISIBLE_DEVICES per "
		 "rank), or set HNTRAIN_GPU_SHARE=1 to let ranks share GPUs (slower)",
		 L, count, count == 1 ? "" : "s", visible ? " (CUDA_VISIBLE_DEVICES=" : "",
		 visible ? visible : "", visible ? ")" : "", count, count == 1 ? "" : "s");
	return -ENODEV;
}
