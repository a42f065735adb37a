/*
 * dist.h - data-parallel training across processes (private to trainer/).
 *
 * One small interface with two implementations: dist_mpi.c (Open MPI, when
 * the build found it and hntrain was started by mpirun) and dist_local.c
 * (one process, the world of one rank every build has). Only the main
 * thread calls these; every rank calls the collective ones in the same
 * order, and each returns -errno with a message in err (HN_ERR_MAX bytes)
 * instead of hanging: a rank that died or stopped answering is named, and
 * a wait is bounded by $HNTRAIN_DIST_TIMEOUT seconds (default 600).
 *
 * No data is sent between ranks: they agree on the sample order because it
 * is computed from the seed. Only gradients and a few counters travel.
 */
#ifndef HN_DIST_H
#define HN_DIST_H

#include <stddef.h>
#include <stdint.h>

struct hn_dist_info {
	int rank, size;		    /* this rank, ranks in the run */
	int local_rank, local_size; /* among the ranks on this machine */
	char host[64];
	const char *impl; /* "local" or "mpi" */
};

/*
 * Join the run: with MPI when started by mpirun (its environment says so),
 * else as the only rank. Call first thing in main; 0 or -errno.
 */
int hn_dist_init(int *argc, char ***argv, char *err);
const struct hn_dist_info *hn_dist(void);
/* For --version: what data-parallel runs use ("Open MPI v4.1.4 ...", or that it is not built). */
const char *hn_dist_library(void);
/*
 * Leave the run together (every rank calls it): wait until every rank has
 * come here, so that none exits, and makes mpirun stop the others, before
 * they have said what they had to say; then leave MPI.
 */
void hn_dist_finalize(void);

/*
 * Start-up agreement: each rank gives whether its set-up went well (ok,
 * else its own message already printed) and a hash of the run's settings
 * and data set. 0 when every rank is ok and every hash equals rank 0's;
 * else -EINVAL with err naming the first rank that failed or differs, and
 * its host.
 */
int hn_dist_agree(int ok, uint64_t hash, char *err);

/*
 * A rank that cannot start (its message printed; hn_die calls this before
 * it exits): if the ranks have not compared their settings yet, it takes
 * part with ok 0, so that the others stop with it instead of waiting, then
 * leaves MPI. Later, nothing: the rank exits, and mpirun stops the others.
 */
void hn_dist_stop_early(void);

/*
 * buf (n floats, each rank's partial sum) becomes the sum over the ranks,
 * on every rank, added in rank order: ((r0 + r1) + r2) + ..., the same
 * additions one process makes folding its threads' gradients, so the
 * result is bit-identical whatever the network does.
 */
int hn_dist_sum_floats(float *buf, size_t n, char *err);

/* buf (n bytes) becomes rank 0's buf on every rank (the NCCL set-up's unique id). */
int hn_dist_share_bytes(void *buf, size_t n, char *err);

/* out (size * n doubles) gets every rank's v (n doubles), in rank order. */
int hn_dist_gather_doubles(const double *v, int n, double *out, char *err);

#endif
