/*
 * checkpoint.h - --checkpoint and --resume files (checkpoint.c, private to
 * trainer/): what a checkpoint holds, and saving, checking and loading it;
 * the format is in checkpoint.c's header and docs/HNTRAIN.md.
 *
 * Returns >= 0 or a negative errno with a message in err (HN_ERR_MAX
 * bytes); only the program (hntrain.c, options.c, train.c) prints.
 */
#ifndef HN_CHECKPOINT_H
#define HN_CHECKPOINT_H

#include <stdint.h>

#include "trainer/backend.h"

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
	float *opt;	  /* nparams * hn_optim_state_per_param */
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

#endif
