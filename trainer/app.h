/*
 * app.h - the pieces of the hntrain program around the maths (private to
 * trainer/): the loader pipeline, checkpoints, the JSON-lines log, --plan,
 * CPU lists, and the CUDA plugin probe.
 *
 * All functions return >= 0 or a negative errno with a message in err
 * (HN_ERR_MAX bytes); only the program itself (hntrain.c, options.c and
 * train.c, see options.h and train.h) prints and exits.
 */
#ifndef HN_APP_H
#define HN_APP_H

#include <sched.h>
#include <stdint.h>
#include <stdio.h>

#include "trainer/backend.h"
#include "trainer/data.h"

/* ---- augment.c: --augment ---- */

struct hn_augment {
	uint32_t rrc;  /* rrc:S, random-resized-crop, S in ten-thousandths; 0 none */
	uint32_t crop; /* crop:P, zero padding P on each side; 0 none */
	int flip;      /* flip: horizontal, p = 0.5 */
	char spec[28]; /* canonical spelling ("rrc:0.35,crop:4,flip"), as the checkpoint records it
			*/
};

/* Parse an --augment list; -EINVAL with err saying what is wrong. */
int hn_augment_parse(const char *s, struct hn_augment *a, char *err);
void hn_augment_format(const struct hn_augment *a, char *out, size_t n);
/*
 * Augment one h*w*c HWC tile in place: sample number pos (0-based) of the
 * training order of epoch (0-based) under seed. tmp holds h*w*c bytes.
 */
void hn_augment_tile(const struct hn_augment *a, uint64_t seed, uint64_t epoch, uint64_t pos,
		     uint32_t h, uint32_t w, uint32_t c, uint8_t *tile, uint8_t *tmp);

/* ---- loader.c: loader threads and the bounded, in-order batch queue ---- */

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

/* ---- checkpoint.c ---- */

#define HN_CKPT_MAGIC	"HNCKPT\0\0"
#define HN_CKPT_VERSION 3u /* 1 (no schedule) and 2 (no position in the epoch) are still read */

/* Why a checkpoint was written (version 3 on; informational). */
enum hn_ckpt_reason { HN_CKPT_EPOCH_END, HN_CKPT_EVERY, HN_CKPT_SIGNAL };

struct hn_checkpoint {
	char spec[256]; /* --model as given */
	int in_c, in_h, in_w, nclasses;
	uint64_t nparams;
	struct hn_optim optim;
	uint64_t epoch; /* epochs completed */
	uint64_t step;	/* optimizer steps taken */
	uint64_t seed;
	uint32_t batch, accum, window;
	uint32_t nranks;     /* data-parallel ranks that trained it (1 alone; 0 read as 1) */
	char test_split[17]; /* the evaluation split ("" in older files: found again) */
	char augment[28];    /* --augment's canonical spelling; "" none */
	/* --normalize's per-channel mean and std (std all 0: none) */
	float norm_mean[HN_NORM_CH], norm_std[HN_NORM_CH];
	uint64_t train_count; /* training samples per epoch (after --limit) */
	/* The learning-rate schedule of the run (version 2 on; has_schedule 0
	 * for a version-1 file): --lr, --schedule, --gamma, --step-epochs,
	 * --warmup and --epochs, so that a resume needs none of them again. */
	int has_schedule;
	uint32_t sched; /* 0 constant, 1 step, 2 cosine */
	double lr, gamma;
	uint64_t step_epochs, warmup, epochs;
	/*
	 * Version 3 on: the position in epoch `epoch` (0-based: the epochs
	 * completed) of a checkpoint written between two optimizer steps
	 * (--checkpoint-every, a signal): the global batches of it trained
	 * (all of them: trained, its evaluation left), and that epoch's sums so
	 * far over every rank. All 0 at an epoch's end and in older files.
	 */
	uint64_t batch_in_epoch;
	uint64_t ep_seen, ep_correct;
	double ep_loss;
	uint32_t reason;  /* enum hn_ckpt_reason */
	uint64_t data_fp; /* hn_data_fingerprint of the data (version 3 on); 0 not recorded */
	float *params;	  /* nparams */
	float *opt;    /* nparams * hn_optim_state_per_param */
};

int hn_checkpoint_save(const char *path, const struct hn_checkpoint *c, char *err);
/*
 * Can a checkpoint be saved at path? Its folder must exist and take new
 * files (the save writes a temporary file there and renames it), and path
 * must not be a folder. Checked before training, so that a typo does not
 * cost an epoch. 0 or -errno with a message in err.
 */
int hn_checkpoint_check_dest(const char *path, char *err);
/*
 * May a checkpoint replace what is at path? Yes when nothing is there, when
 * an empty regular file is (nothing to lose), or when a file beginning with
 * the checkpoint magic is (a damaged checkpoint is replaced too). Anything
 * else (a store, a log, notes, a device) would be lost to the rename that
 * saves the checkpoint: -EEXIST with a message in err. 0 otherwise.
 */
int hn_checkpoint_check_replace(const char *path, char *err);
int hn_checkpoint_load(const char *path, struct hn_checkpoint *c, char *err);
void hn_checkpoint_free(struct hn_checkpoint *c);

/* ---- log.c: JSON lines ---- */

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

/*
 * gemm_peak.c, --gemm-peak: SGEMM GFLOP/s of `threads` threads (1..64),
 * each multiplying its own 2048 x 2048 matrices at once, as the cpu
 * backend's team does. 0, or -errno with err set.
 */
int hn_gemm_peak(int threads, double *gflops, char *err);

/* ---- plan.c ---- */

struct hn_plan_input {
	const struct hn_model *model;
	const struct hn_source_info *data;
	const struct hn_optim *optim;
	int batch;
	const char *device;
	uint64_t backend_bytes; /* from the backend if created, else 0 */
};
/* Print the memory plan; returns 0, or 1 when the data set does not fit in RAM. */
int hn_plan_print(FILE *f, const struct hn_plan_input *in);
/* MemAvailable from /proc/meminfo, bytes; -errno if unknown. */
int64_t hn_mem_available(void);

/* ---- cpus.c: CPU lists and pinning ---- */

/* "0-3,6" into a CPU set: 0, or -EINVAL on a malformed or empty list. */
int hn_cpus_parse(const char *s, cpu_set_t *set);
/* A CPU set as a list, "0-3,6", cut at cap bytes. */
void hn_cpus_format(const cpu_set_t *set, char *buf, size_t cap);
/* Pin every thread that exists now (this one and the maths pool) to set: 0 or -errno. */
int hn_cpus_pin_all(const cpu_set_t *set);

/* ---- backend_load.c ---- */

/*
 * For --version: the path of the CUDA plugin --device gpu would load, without
 * loading it (no CUDA library, no GPU touched). -ENOENT when none is found.
 */
int hn_cuda_plugin_find(char *path, size_t cap);
/* Load the plugin and its CUDA libraries (not the GPU): 0, or -1 with err set. */
int hn_cuda_plugin_load(char *err);
/* cuda_libs.c: load the libraries the plugin needs from wherever they are;
 * -1 with err naming the missing one and the folders searched. */
int hn_cuda_libs_preload(char *err, size_t cap);
/* The libraries the plugin loads only when needed (NCCL), where found; quiet when not. */
void hn_cuda_libs_optional(void);
/* One "gpu: SONAME PATH" line per CUDA library loaded in this process. */
void hn_cuda_libs_print(FILE *f);

/* For --plan with gpu: ask the plugin about device 0. -ENODEV/-ENOENT with info set. */
int hn_cuda_probe_load(char *info, size_t cap, uint64_t *free_bytes, uint64_t *total_bytes);

#endif
