/*
 * chanstats.h - the training split's per-channel statistics (chanstats.c,
 * private to trainer/), for --normalize auto.
 */
#ifndef HN_CHANSTATS_H
#define HN_CHANSTATS_H

#include <stdint.h>

#include "trainer/data.h"

/*
 * Per-channel mean and standard deviation of the training split's pixels
 * (1 to HN_NORM_CH channels),
 * on the 0..1 scale, from at most max_samples samples spread evenly over
 * it (indices k * count / n: a function of the data set alone). The sums
 * are of bytes, in integers, so the result does not depend on read order.
 * *used gets the samples read. 0, or -errno with err set.
 */
int hn_source_channel_stats(hn_source *s, uint64_t max_samples, float *mean, float *std,
			    uint64_t *used, char *err);

#endif
