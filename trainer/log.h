/*
 * log.h - the JSON-lines log of --log (log.c, private to trainer/): one
 * record per epoch and a final one; docs/HNTRAIN.md lists the fields.
 * Returns 0, or -1 on a write error.
 */
#ifndef HN_LOG_H
#define HN_LOG_H

#include <stdint.h>
#include <stdio.h>

/*
 * One member "key": v of a record, then ", " unless last; a number that is
 * not finite is written as null (JSON has no NaN). emulate.c's records use
 * it too.
 */
void hn_log_num(FILE *f, const char *key, double v, int last);
/* a / b, or NaN (written as null) when b is 0: nothing was timed, the ratio is undefined */
double hn_log_ratio(double a, double b);

/* One rank's split of time, for the log of a data-parallel run. */
struct hn_rank_times {
	double compute_s, data_wait_s, comm_s, loader_cpu_s;
};

struct hn_epoch_stats {
	uint64_t epoch;		 /* 1-based in the log */
	uint64_t samples, steps; /* samples: of every rank */
	/* compute, data wait, comm (gradient sums between ranks): the ranks' mean */
	double wall_s, compute_s, data_wait_s, comm_s, eval_s;
	int nranks;			  /* 1 alone */
	const struct hn_rank_times *rank; /* nranks entries when nranks > 1 */
	double augment_s;		  /* loader CPU time on --augment (not part of data wait) */
	/* loader CPU time on the epoch's batches: read, decode, augment (ranks' mean) */
	double loader_cpu_s;
	double train_loss, train_acc;
	double test_loss, test_acc; /* < 0 when there is no test split */
	double lr;
};

/* One line per epoch; fflush after each so a tail -f sees it. */
int hn_log_epoch(FILE *f, const struct hn_epoch_stats *s);
/* Test accuracies whose first epoch and time are reported (the "reached" log member). */
#define HN_NREACH 4
static const double hn_reach_acc[HN_NREACH] = {0.90, 0.91, 0.92, 0.93};

struct hn_final_stats {
	/* this process's: epochs trained, optimizer steps taken, samples trained on */
	uint64_t epochs, steps, samples;
	/* the whole run's, counting the epochs before a --resume: the epochs done, steps */
	uint64_t run_epochs, run_steps;
	uint64_t weights_xxh3;
	double wall_s, compute_s, data_wait_s, comm_s;
	int nranks;
	double augment_s, loader_cpu_s;
	double test_acc;
	const char *source, *device, *model;
	uint64_t nparams;
	uint64_t skipped_files; /* image files that did not decode */
	/* unreadable sheets skipped (--skip-bad-sheets) and their samples */
	uint64_t bad_sheets, bad_sheet_samples;
	uint64_t ignored_entries; /* entries of an image folder that are not images (on_ignore) */
	const uint64_t *reach_epoch; /* HN_NREACH each, 0: not reached (see struct hn_train) */
	const double *reach_s;
	double flops_per_sample; /* hn_model_train_flops: the matrix products of one sample */
};
int hn_log_final(FILE *f, const struct hn_final_stats *s);

#endif
