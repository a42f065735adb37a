/*
 * preload.h - --preload (preload.c, private to trainer/): a source read
 * whole into memory before training, the zero-I/O baseline.
 */
#ifndef HN_PRELOAD_H
#define HN_PRELOAD_H

#include "trainer/data.h"

/*
 * Read every sample of both splits into memory (using nthreads threads) and
 * turn s into an in-memory source: the --preload baseline. Image files that
 * do not decode are left out, so the counts in hn_source_info() may shrink.
 */
int hn_source_preload(hn_source *s, int nthreads, char *err);

#endif
