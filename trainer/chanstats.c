/*
 * chanstats.c - the per-channel mean and standard deviation of the training
 * split (--normalize auto): a pass over at most a given number of samples
 * spread evenly over it, read through the source as any batch is.
 */
#include "trainer/chanstats.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "trainer/source.h"

int hn_source_channel_stats(hn_source *s, uint64_t max_samples, float *mean, float *std,
			    uint64_t *used, char *err)
{
	enum { CHUNK = 256 };
	const uint64_t count = s->info.count[HN_SPLIT_TRAIN];
	const uint64_t n = count < max_samples ? count : max_samples;
	const uint32_t C = s->info.c;
	const size_t px = (size_t)s->info.h * s->info.w;
	uint64_t sum[HN_NORM_CH] = {0}, sumsq[HN_NORM_CH] = {0}, got = 0;
	if (C < 1 || C > HN_NORM_CH)
		return sprite_fail(err, -EINVAL,
				   "per-channel statistics take 1 to %d channels, "
				   "not %u",
				   HN_NORM_CH, C);
	uint8_t *tiles = malloc(CHUNK * s->tile_bytes + 1);
	uint16_t *labels = malloc(CHUNK * sizeof(uint16_t));
	uint32_t *idx = malloc(CHUNK * sizeof(uint32_t));
	int rc = tiles && labels && idx ? 0 : -ENOMEM;
	for (uint64_t k0 = 0; rc == 0 && k0 < n; k0 += CHUNK) {
		int m = n - k0 < CHUNK ? (int)(n - k0) : CHUNK;
		for (int k = 0; k < m; k++)
			idx[k] = (uint32_t)((k0 + (uint64_t)k) * count / n);
		struct hn_batch b = {.split = HN_SPLIT_TRAIN,
				     .view = HN_NO_VIEW,
				     .n = m,
				     .idx = idx,
				     .tiles = tiles,
				     .labels = labels};
		rc = hn_source_fetch(s, &b, 1, err);
		if (rc < 0)
			break;
		for (int k = 0; k < rc; k++) { /* the samples read come first */
			const uint8_t *t = tiles + (size_t)k * s->tile_bytes;
			for (size_t i = 0; i < px; i++)
				for (uint32_t c = 0; c < C; c++) {
					uint64_t v = t[i * C + c];
					sum[c] += v;
					sumsq[c] += v * v;
				}
		}
		got += (uint64_t)rc;
		rc = 0;
	}
	free(tiles);
	free(labels);
	free(idx);
	if (rc == -ENOMEM)
		return sprite_fail(err, rc, "out of memory for the per-channel statistics");
	if (rc < 0)
		return rc;
	if (!got)
		return sprite_fail(err, -ENODATA,
				   "no training sample could be read for the "
				   "per-channel statistics");
	for (uint32_t c = 0; c < C; c++) {
		double N = (double)got * (double)px;
		double mu = (double)sum[c] / N, var = (double)sumsq[c] / N - mu * mu;
		mean[c] = (float)(mu / 255.0);
		std[c] = (float)(sqrt(var > 0 ? var : 0) / 255.0);
	}
	*used = got;
	return 0;
}
