/*
 * gemm_peak.c - hntrain --gemm-peak: what OpenBLAS's SGEMM does on these
 * cores, the denominator of the benchmark's compute-efficiency target
 * (hntrain's training GFLOP/s over this).
 *
 * Measured the way the cpu backend computes: a team of --threads threads,
 * each running single-threaded SGEMM on its own matrices, all at once, so
 * the figure includes what the cores lose when all of them work (shared
 * cache, memory bandwidth, clock). Each member multiplies two N x N
 * matrices (N = 2048, 48 MiB per member: large enough that packing and
 * edges do not count) REPS times after one product to warm up; the rate is
 * 2 N^3 x REPS x threads over the wall time of the timed products.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/util.h"
#include "trainer/backend.h"
#include "trainer/gemm_peak.h"
#include "trainer/team.h"

#define PEAK_N 2048

struct peak_job {
	float *m[HN_TEAM_MAX][3];
	int reps;
};

static void peak_member(void *arg, int tid, int nthreads)
{
	(void)nthreads;
	struct peak_job *j = arg;
	float **m = j->m[tid];
	for (int r = 0; r < j->reps; r++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, PEAK_N, PEAK_N, PEAK_N, 1.0f,
			    m[0], PEAK_N, m[1], PEAK_N, 0.0f, m[2], PEAK_N);
}

int hn_gemm_peak(int threads, double *gflops, char *err)
{
	if (threads < 1 || threads > HN_TEAM_MAX) {
		snprintf(err, HN_ERR_MAX, "--gemm-peak: %d threads (1..%d)", threads, HN_TEAM_MAX);
		return -EINVAL;
	}
	openblas_set_num_threads(1); /* as the cpu backend: the team is the parallelism */
	struct peak_job *j = calloc(1, sizeof *j);
	hn_team *team = NULL;
	int rc = j ? hn_team_create(threads, &team) : -ENOMEM;
	const size_t n2 = (size_t)PEAK_N * PEAK_N;
	for (int t = 0; rc == 0 && t < threads; t++)
		for (int k = 0; k < 3; k++) {
			float *p = malloc(n2 * sizeof(float));
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			/* small exact values: no denormals, no inf */
			for (size_t i = 0; i < n2; i++)
				p[i] = (float)((i * 7 + (size_t)k) % 13) / 16.0f;
			j->m[t][k] = p;
		}
	if (rc == 0) {
		j->reps = 1; /* warm-up: page faults, OpenBLAS's buffers */
		hn_team_run(team, peak_member, j);
		j->reps = 3;
		double t0 = sprite_now();
		hn_team_run(team, peak_member, j);
		double s = sprite_now() - t0;
		*gflops = 2.0 * PEAK_N * PEAK_N * (double)PEAK_N * j->reps * threads / s / 1e9;
	} else {
		snprintf(err, HN_ERR_MAX, "--gemm-peak: %s", strerror(-rc));
	}
	for (int t = 0; j && t < threads; t++)
		for (int k = 0; k < 3; k++)
			free(j->m[t][k]);
	hn_team_destroy(team);
	free(j);
	return rc;
}
