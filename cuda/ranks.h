/*
 * ranks.h - the gpu backend's rank rules that need no GPU (cuda/ranks.c):
 * the GPU of a rank, and bounded waits with an abort.
 */
#ifndef CU_RANKS_H
#define CU_RANKS_H

#define CU_RANKS_ERR_MAX 256 /* HN_ERR_MAX */

/* HNTRAIN_DIST_TIMEOUT in seconds (a number > 0), else 600, as the cpu path reads it. */
double cu_dist_timeout(void);

/*
 * Something other ranks must finish: poll returns 1 while it is pending, 0
 * when done, -errno on a failure (with err set); abort (may be NULL) gives
 * it up (ncclCommAbort).
 */
struct cu_wait {
	int (*poll)(void *ctx, char *err);
	void (*abort)(void *ctx);
	void *ctx;
	double timeout_s;
	const char *what; /* "summing the gradients", for the message */
};

/*
 * Poll w until done (0). On a failure, or when timeout_s passes first
 * (-ETIMEDOUT, err saying what did not answer), abort and return -errno.
 */
int cu_wait_bounded(const struct cu_wait *w, char *err);

/*
 * The visible GPU (0..count-1: the CUDA runtime numbers those that
 * CUDA_VISIBLE_DEVICES leaves) of local rank l of local_ranks on this
 * machine: GPU l when there are enough; GPU 0 when only one is visible and
 * CUDA_VISIBLE_DEVICES is set (a launcher that gives each rank its own);
 * l % count when share is "1" (HNTRAIN_GPU_SHARE); else -ENODEV with err
 * saying that there are more ranks than GPUs and the three ways out.
 */
int cu_pick_device(int local_rank, int local_ranks, int count, const char *visible,
		   const char *share, char *err);

#endif
