/*
 * loader.h - the loader threads and the bounded, in-order batch queue
 * (loader.c, private to trainer/): what train.c and emulate.c take their
 * batches from.
 *
 * Returns >= 0 or a negative errno with a message in err (HN_ERR_MAX
 * bytes); only the program (hntrain.c, options.c, train.c) prints.
 */
#ifndef HN_LOADER_H
#define HN_LOADER_H

#include <sched.h>
#include <stdint.h>

#include "trainer/augment.h"
#include "trainer/data.h"

/*
 * The loaders walk one fixed sequence of batches: for each epoch in
 * [first_epoch, end_epoch): the training batches in the order of
 * hn_source_perm(seed, epoch), then (when eval) the test batches in index
 * order. Batch k is claimed by whichever loader is free, but delivered by
 * hn_loader_next() strictly in sequence, so the order never depends on the
 * number of loaders. The ring has `queue` slots: batches loaded ahead and
 * those delivered but not yet released share them.
 */
struct hn_loader_config {
	hn_source *src;
	const struct hn_augment *aug; /* training batches only; NULL: none */
	int nloaders;		      /* >= 1 */
	int queue;		      /* ring slots, >= 1 (hntrain: --queue + 1) */
	int batch;		      /* samples per batch (the last of a split may hold fewer) */
	uint64_t seed;
	uint32_t window;
	uint64_t first_epoch, end_epoch;
	/* training batches of first_epoch already trained (a mid-epoch --resume): the
	 * sequence starts at the next one, or at the test split when all are */
	uint64_t first_batch;
	int eval;	       /* also deliver the test split after each epoch */
	int eval_only;	       /* only the test split, once (needs eval): evaluating a
				  checkpoint that has all its epochs */
	const cpu_set_t *mask; /* affinity for the loader threads, or NULL */
	/*
	 * Data-parallel: rank of nranks (0 of 1 alone). Batch k of a pass is
	 * then this rank's share of global batch k (nranks * batch samples of
	 * the order): of its g samples, [g * rank / nranks, g * (rank + 1) /
	 * nranks), so that the sequence of global batches is the same whatever
	 * nranks, and a full global batch's share is the whole view file
	 * k * nranks + rank of a mount whose view batch is `batch`.
	 */
	int rank, nranks;
};

typedef struct hn_loader hn_loader;

int hn_loader_start(const struct hn_loader_config *c, hn_loader **out, char *err);
/* Wait for the next batch in sequence; -errno with err set when a loader failed. */
int hn_loader_next(hn_loader *l, struct hn_batch **b, char *err);
/* Give the batch's slot back so that a loader can refill it. */
void hn_loader_release(hn_loader *l, struct hn_batch *b);
/*
 * Join the threads and free the ring; NULL is fine. 1 when a loader hangs
 * in a read that never returns (a stopped FUSE daemon): its thread is left
 * detached, still using the source, which the caller must not free (it is
 * about to exit); else 0.
 */
int hn_loader_stop(hn_loader *l);
/* Batches per pass of a split. */
uint64_t hn_batches(uint64_t samples, int batch);
/*
 * Rank r's share [*lo, *hi) of a global batch of g samples among nranks;
 * *view: whether it is the whole view file (samples [r*batch, (r+1)*batch)
 * of the global batch, cut at g).
 */
void hn_rank_share(uint64_t g, int batch, int rank, int nranks, uint64_t *lo, uint64_t *hi,
		   int *view);

#endif
