/*
 * test_gpu_ranks.c - the gpu backend's rank rules on a machine without a
 * GPU (cuda/ranks.c, built without CUDA): the GPU each local rank takes,
 * honouring CUDA_VISIBLE_DEVICES and refusing more ranks than GPUs unless
 * HNTRAIN_GPU_SHARE=1; and the bounded wait that nccl.c puts around the
 * communicator's set-up and every gradient sum, driven with injected polls
 * below NCCL: a peer that never answers is given up after the timeout and
 * the communicator aborted once, a failing one at once, a late one in time
 * waited for.
 *
 * Left unexercised here (a run on 2 GPUs does it, tests/hntrain_gpu_mpi.sh):
 * that NCCL's non-blocking communicator reports a dead peer through
 * ncclCommGetAsyncError or leaves the stream pending, and that
 * ncclCommAbort then releases the stream's kernels.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/ranks.h"
#include "tests/check.h"

struct fake {
	int polls, done_after, fail_after; /* -1: never */
	int aborts;
};

static int fake_poll(void *ctx, char *err)
{
	struct fake *f = ctx;
	f->polls++;
	if (f->fail_after >= 0 && f->polls > f->fail_after) {
		snprintf(err, CU_RANKS_ERR_MAX, "gpu: injected: rank 1's NCCL call failed");
		return -EIO;
	}
	return f->done_after >= 0 && f->polls > f->done_after ? 0 : 1;
}

static void fake_abort(void *ctx)
{
	((struct fake *)ctx)->aborts++;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int wait_fake(struct fake *f, double timeout, char *err, double *secs)
{
	struct cu_wait w = {.poll = fake_poll,
			    .abort = fake_abort,
			    .ctx = f,
			    .timeout_s = timeout,
			    .what = "summing the gradients"};
	double t0 = now_s();
	int rc = cu_wait_bounded(&w, err);
	*secs = now_s() - t0;
	return rc;
}

static void pick(int l, int L, int count, const char *vis, const char *share, int want,
		 const char *words)
{
	char err[CU_RANKS_ERR_MAX] = "";
	int got = cu_pick_device(l, L, count, vis, share, err);
	CHECK(got == want,
	      "rank %d of %d, %d GPUs, CUDA_VISIBLE_DEVICES=%s, share %s: %d, not %d (%s)", l, L,
	      count, vis ? vis : "(unset)", share ? share : "(unset)", got, want, err);
	if (words)
		CHECK(strstr(err, words) != NULL, "message lacks \"%s\": %s", words, err);
	printf("local rank %d of %d, %d visible, CUDA_VISIBLE_DEVICES=%s%s: %d%s%s\n", l, L, count,
	       vis ? vis : "(unset)", share ? ", HNTRAIN_GPU_SHARE=1" : "", got,
	       got < 0 ? ": " : "", got < 0 ? err : "");
}

int main(void)
{
	/* Which GPU: one each where there are enough, in CUDA_VISIBLE_DEVICES's order. */
	pick(0, 1, 1, NULL, NULL, 0, NULL);
	pick(1, 2, 2, NULL, NULL, 1, NULL);
	pick(3, 4, 8, "4,5,6,7", NULL, 3, NULL);
	/* A launcher that gives each rank its own GPU: rank 1 sees one, its own, as 0. */
	pick(1, 2, 1, "1", NULL, 0, NULL);
	pick(7, 8, 1, "GPU-5e3a", NULL, 0, NULL);
	/* More ranks than GPUs: refused, saying so and the ways out; shared on request. */
	pick(1, 2, 1, NULL, NULL, -ENODEV, "2 ranks on this machine and 1 GPU visible");
	pick(2, 4, 2, "0,1", NULL, -ENODEV, "(CUDA_VISIBLE_DEVICES=0,1)");
	pick(2, 4, 2, "0,1", NULL, -ENODEV, "HNTRAIN_GPU_SHARE=1");
	pick(3, 4, 2, NULL, "1", 1, NULL);
	pick(2, 4, 2, "0,1", "1", 0, NULL);
	pick(0, 1, 0, NULL, NULL, -EINVAL, NULL);

	/* The timeout: HNTRAIN_DIST_TIMEOUT as the cpu path reads it. */
	unsetenv("HNTRAIN_DIST_TIMEOUT");
	CHECK(cu_dist_timeout() == 600, "default timeout %g", cu_dist_timeout());
	setenv("HNTRAIN_DIST_TIMEOUT", "2.5", 1);
	CHECK(cu_dist_timeout() == 2.5, "HNTRAIN_DIST_TIMEOUT=2.5: %g", cu_dist_timeout());
	setenv("HNTRAIN_DIST_TIMEOUT", "junk", 1);
	CHECK(cu_dist_timeout() == 600, "HNTRAIN_DIST_TIMEOUT=junk: %g", cu_dist_timeout());

	char err[CU_RANKS_ERR_MAX];
	double secs;
	/* A peer that never answers: given up after the timeout, the communicator aborted once. */
	struct fake never = {.done_after = -1, .fail_after = -1};
	err[0] = 0;
	int rc = wait_fake(&never, 0.3, err, &secs);
	CHECK(rc == -ETIMEDOUT, "a peer that never answers: %d", rc);
	CHECK(secs >= 0.3 && secs < 2, "given up after %.3f s, the timeout is 0.3 s", secs);
	CHECK(never.aborts == 1, "aborted %d times", never.aborts);
	CHECK(strstr(err, "summing the gradients: no answer in 0.3 s (HNTRAIN_DIST_TIMEOUT)"),
	      "message: %s", err);
	CHECK(never.polls > 10 && never.polls < 100000, "%d polls in 0.3 s", never.polls);
	printf("never answers: %s (after %.2f s, %d polls, %d abort)\n", err, secs, never.polls,
	       never.aborts);
	/* A peer's failure: at once, aborted, its message kept. */
	struct fake failing = {.done_after = -1, .fail_after = 3};
	err[0] = 0;
	rc = wait_fake(&failing, 60, err, &secs);
	CHECK(rc == -EIO && failing.aborts == 1 && secs < 1,
	      "a failing peer: %d, %d aborts, %.2f s", rc, failing.aborts, secs);
	CHECK(strstr(err, "injected") != NULL, "a failing peer's message: %s", err);
	/* A late peer, in time: waited for, nothing aborted. */
	struct fake late = {.done_after = 40, .fail_after = -1};
	rc = wait_fake(&late, 60, err, &secs);
	CHECK(rc == 0 && late.aborts == 0 && late.polls == 41,
	      "a late peer: %d, %d aborts, %d polls", rc, late.aborts, late.polls);
	printf("late peer: done after %d polls in %.3f s\n", late.polls, secs);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	else
		printf("PASS\n");
	return failures ? 1 : 0;
}
