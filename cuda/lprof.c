/*
 * lprof.c - device time per layer kind, for finding where a GPU step's time
 * goes (HNTRAIN_CUDA_PROFILE=layers). An event is recorded before each
 * layer's forward and backward of every train step; after the backward the
 * step waits for its last event, and the times between events are summed per
 * layer kind, then printed at destroy. The wait serialises the host with the
 * device each step: a profile, never a timing run.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_int.h"

#define LPROF_SKIP 3 /* first steps left out: algorithm choice, first touches */

static const char *const kind_names[CU_LAYER_KINDS] = {
	"conv", "maxpool", "relu", "dense", "dropout", "batchnorm", "avgpool", "save", "add"};

int cu_lprof_init(struct hn_cuda *st)
{
	int n = 2 * (st->m.nlayers + 1);
	st->lev = calloc((size_t)n, sizeof(*st->lev));
	if (!st->lev)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		CU(cudaEventCreate(&st->lev[i]), st->err);
		st->lev_made++;
	}
	return 0;
}

/* Pass 0 forward: event i before layer i, nlayers at its end. Pass 1 backward: event i+1
 * before layer i's backward, 0 at its end. */
int cu_lprof_mark(struct hn_cuda *st, int pass, int i)
{
	if (!st->lev)
		return 0;
	CU(cudaEventRecord(st->lev[pass * (st->m.nlayers + 1) + i], st->stream), st->err);
	return 0;
}

int cu_lprof_collect(struct hn_cuda *st)
{
	if (!st->lev)
		return 0;
	const int nl = st->m.nlayers;
	cudaEvent_t *f = st->lev, *b = st->lev + nl + 1;
	CU(cudaEventSynchronize(b[0]), st->err);
	if (st->lprof_seen++ < LPROF_SKIP)
		return 0;
	for (int i = 0; i < nl; i++) {
		float fm = 0, bm = 0;
		CU(cudaEventElapsedTime(&fm, f[i], f[i + 1]), st->err);
		CU(cudaEventElapsedTime(&bm, b[i + 1], b[i]), st->err);
		st->lprof_ms[0][st->m.layers[i].kind] += fm;
		st->lprof_ms[1][st->m.layers[i].kind] += bm;
	}
	st->lprof_steps++;
	return 0;
}

void cu_lprof_report(const struct hn_cuda *st)
{
	if (!st->lev || !st->lprof_steps)
		return;
	double n = (double)st->lprof_steps;
	for (int p = 0; p < 2; p++) {
		char buf[512];
		int len = 0;
		double total = 0;
		for (int k = 0; k < CU_LAYER_KINDS; k++)
			total += st->lprof_ms[p][k];
		for (int k = 0; k < CU_LAYER_KINDS && len < (int)sizeof buf; k++)
			if (st->lprof_ms[p][k] > 0)
				len += snprintf(buf + len, sizeof buf - (size_t)len,
						" %s %.2f (%.0f%%)", kind_names[k],
						st->lprof_ms[p][k] / n,
						100 * st->lprof_ms[p][k] / total);
		fprintf(stderr, "gpu layer profile: %s %.2f ms per step over %llu steps:%s\n",
			p ? "backward" : "forward", total / n, (unsigned long long)st->lprof_steps,
			buf);
	}
}

void cu_lprof_free(struct hn_cuda *st)
{
	for (int i = 0; i < st->lev_made; i++)
		cudaEventDestroy(st->lev[i]);
	free(st->lev);
	st->lev = NULL;
	st->lev_made = 0;
}
