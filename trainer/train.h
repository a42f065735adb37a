/*
 * train.h - hntrain's epoch loop, evaluation and learning-rate schedule
 * (private to trainer/).
 *
 * Like options.h, this is the program's own code: it prints the progress
 * bar and the per-epoch lines, appends to --log, writes --checkpoint, and a
 * failure inside the loop (a batch that cannot be read, a backend error, a
 * diverged loss) prints its message and returns -1, the loader threads
 * stopped, so that main's cleanup runs.
 */
#ifndef HN_TRAIN_H
#define HN_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/loader.h"
#include "trainer/log.h"
#include "trainer/options.h"

/* One run: what main has set up, the plan of steps, and the totals so far. */
struct hn_train {
	/* set by the caller */
	const struct hn_opts *o;
	hn_source *src;
	const struct hn_model *m;
	const struct hn_backend_ops *be;
	void *st;
	float *params;	  /* m->nparams floats: the weights are read back into it */
	FILE *logf;	  /* --log, or NULL (ranks other than 0 have none) */
	int rank, nranks; /* data-parallel (dist.h): 0 of 1 alone */
	/* set by hn_train_init */
	uint64_t ntrain, ntest;	    /* samples per pass of each split */
	uint64_t gbatch;	    /* global batch: nranks x --batch */
	uint64_t nb_train, nb_test; /* (global) batches per pass */
	uint64_t steps_per_epoch;   /* optimizer steps, ceil(nb_train / accum) */
	uint64_t total_steps;	    /* over all --epochs: what the schedule spans */
	uint64_t first_epoch;	    /* epochs the --resume checkpoint has, else 0 */
	uint64_t end_epoch;	    /* --stop-after, else --epochs */
	uint64_t first_step, step;  /* optimizer steps taken at the start, and now */
	uint64_t first_batch;	    /* global batches of first_epoch the checkpoint has trained */
	const struct hn_checkpoint *ck; /* the --resume checkpoint (zeroed: none) */
	double last_save; /* sprite_now() of the last checkpoint (--checkpoint-every Nm) */
	int stopped;	  /* a signal stopped the run after a checkpoint */
	/* a loader hangs in a read that never returns (a stopped FUSE daemon):
	 * its thread still uses the source, so the caller exits without freeing it */
	int abandoned;
	/* several ranks: the step of the next comparison of stop and checkpoint requests,
	 * and the step and time of the last one (train.c: agree_requests) */
	uint64_t next_check, check_step;
	double check_time;
	uint64_t data_fp; /* hn_data_fingerprint, kept in the checkpoint; 0 none */
	uint64_t micro;	  /* batches handed to the backend in this process */
	int pending;	  /* batches summed into a group's gradients, not applied */
	/* the totals of this process's epochs, for the final report (of every rank; the
	 * times their mean) */
	double wall_s, compute_s, data_wait_s, comm_s, augment_s, loader_cpu_s;
	uint64_t samples;
	double test_acc; /* of the last evaluation; -1 when there was none */
	/* the first epoch of this process whose test accuracy reached hn_reach_acc[k], and the
	 * training wall time summed up to its end (0: not reached) */
	uint64_t reach_epoch[HN_NREACH];
	double reach_s[HN_NREACH];
};

/* One pass over the test split. */
struct hn_eval {
	double loss; /* summed over the samples */
	uint64_t correct, seen;
	double secs;
};

/*
 * Fill t's plan from the source's split sizes and o, starting after what
 * the --resume checkpoint ck has trained (ck zeroed when there is none).
 * The caller's fields are left as they are.
 */
void hn_train_init(struct hn_train *t, const struct hn_checkpoint *ck);

/*
 * Train from t->first_epoch (at batch t->first_batch) to t->end_epoch: each
 * epoch's batches, then the test split, a line, a --log record and a
 * --checkpoint. With no epoch left to train, the weights are evaluated on
 * the test split instead (the way to ask a checkpoint for its accuracy).
 * 0, or -1 on a failure with its message printed (see t->abandoned).
 *
 * With --checkpoint, SIGTERM and SIGINT stop the run at the next optimizer
 * step boundary (every rank at the same one) after writing the checkpoint:
 * then t->stopped is set and the caller exits HN_EXIT_STOPPED; another one
 * 2 s or more after the first kills at once (copies that come together,
 * from a scheduler and mpirun both, are one). SIGUSR1 writes a checkpoint there and goes on, as
 * --checkpoint-every does.
 */
int hn_train_run(struct hn_train *t);
#define HN_EXIT_STOPPED 75 /* EX_TEMPFAIL: stopped by a signal, checkpoint written: resume */

/* ---- agree.c ---- */

/*
 * A fingerprint of the data's content: the first, middle and last sample
 * of each split (tiles and labels) read through src, the same on every
 * medium. Never 0.
 */
uint64_t hn_data_fingerprint(hn_source *src);
/*
 * The start-up agreement of the ranks (dist.h: hn_dist_agree) over every
 * setting that changes the numbers, the --resume checkpoint and the data
 * (its name, shape and data_fp). On a difference, err names the first
 * differing setting and the rank (on rank 0). hn_dist_agree's return.
 */
int hn_agree_settings(const struct hn_opts *o, const hn_source *src, const struct hn_model *m,
		      const struct hn_checkpoint *ck, uint64_t data_fp, int ok, char *err);

/* The learning rate of optimizer step s (0-based) of total. */
double hn_lr_at(const struct hn_opts *o, uint64_t s, uint64_t steps_per_epoch, uint64_t total);

/*
 * Evaluate the loader's next nb batches (a pass over the test split, this
 * rank's share) into r, summed over the ranks. 0, or -1 on a failure with
 * its message printed; the caller stops the loader.
 */
int hn_evaluate(hn_loader *ld, const struct hn_backend_ops *be, void *st, uint64_t nb,
		struct hn_eval *r);

#endif
