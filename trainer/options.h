/*
 * options.h - hntrain's command line (private to trainer/): the options a
 * run is given, their parsing and the checks across them.
 *
 * Unlike the rest of trainer/, these functions are the program's own: a
 * usage error prints its message and exits 2 (a bad file exits 1), as main
 * would, so that every message a user sees about an option is written next
 * to the option's parsing. Only hntrain.c, options.c and train.c print and
 * exit.
 */
#ifndef HN_OPTIONS_H
#define HN_OPTIONS_H

#include <sched.h>
#include <stdint.h>

#include "common/format.h"
#include "trainer/augment.h"
#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/emulate.h"

#define HN_PROG "hntrain" /* the name messages start with */

enum hn_sched { HN_SCHED_CONSTANT, HN_SCHED_STEP, HN_SCHED_COSINE };

struct hn_opts {
	const char *data, *split, *test_split;
	uint64_t limit, test_limit;
	int preload;
	int strict;
	int skip_bad_sheets; /* --skip-bad-sheets */
	uint32_t tile_h, tile_w, tile_c;
	enum sprite_fit fit; /* image folders; crop unless --fit */
	uint32_t background; /* image folders: SPRITE_BG_*, --background; 0 as stored */
	uint32_t window;
	struct hn_augment augment; /* --augment; spec "" none */
	/*
	 * --normalize: none, auto (from the training split), or given per channel;
	 * mean/std on the 0..1 scale, nch of them (auto: filled once the data is open)
	 */
	struct hn_norm {
		enum { HN_NORM_NONE, HN_NORM_AUTO, HN_NORM_GIVEN } mode;
		int nch;
		float mean[HN_NORM_CH], std[HN_NORM_CH];
	} norm;
#define HN_NORM_SAMPLES 10000 /* --normalize auto reads at most this many */
	uint64_t cache;
	const char *model;
	struct hn_optim optim;
	double lr;
	enum hn_sched sched;
	uint64_t step_epochs;
	double gamma;
	uint64_t warmup;
	int batch, accum;
	uint64_t epochs, stop_after;
	uint64_t seed;
	int threads, loaders, queue;
	const char *affinity, *loader_affinity;
	/* --affinity's CPUs (when given); --loader-affinity's, else those the process had */
	cpu_set_t pin_mask, loader_mask;
	const char *device;
	int amp, fast, tf32, plan, quiet;
	int gemm_peak; /* --gemm-peak: a mode of its own, no data (main) */
	const char *checkpoint, *resume, *log;
	/* --checkpoint-every N (steps) or Nm (minutes): also between epochs; 0 neither */
	uint64_t ckpt_every_steps;
	double ckpt_every_s;
	const char *export_path;   /* --export: the final weights as .npz */
	struct hn_emulate emulate; /* --emulate PROFILE; name "" trains */
	/* given explicitly on the command line (checked against --resume) */
	int given_model, given_optim, given_seed, given_batch, given_accum, given_window, given_wd;
	int given_augment, given_normalize;
	/* given explicitly: these override what a --resume checkpoint says */
	int given_lr, given_sched, given_gamma, given_step_epochs, given_warmup, given_epochs;
	/* given explicitly: each applies to one kind of source only */
	int given_tile, given_fit, given_background, given_cache, given_test_split;
	/* given explicitly: --emulate has DLIO's defaults otherwise */
	int given_loaders, given_queue;
	char test_split_buf[32]; /* the evaluation split found when not given */
};

/* Print "hntrain: " and the message to stderr, and exit with code. */
void hn_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* The same message, for a caller that unwinds before it exits: returns -1. */
int hn_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Fill o with the defaults and then the command line. --help and --version
 * print and exit 0; a malformed value, an unknown option or a CPU list
 * naming a CPU the process may not use exits 2. Nothing is opened. With
 * --gemm-peak (o->gemm_peak) nothing else is required: main measures.
 */
void hn_opts_parse(int argc, char **argv, struct hn_opts *o);

/*
 * The checks across options, before any data is read: the options that do
 * not apply to what --data is, outputs that would overwrite an input, and
 * with --resume the checkpoint (loaded into ck, which the caller frees with
 * hn_checkpoint_free) against the command line. The model, optimizer, seed,
 * batch and schedule a checkpoint trained with are taken into o; then the
 * defaults that depend on the optimizer (lr, weight decay) are set.
 */
void hn_opts_check(struct hn_opts *o, struct hn_checkpoint *ck);

/* --normalize's argument: none, auto, or MEAN:STD[,MEAN:STD...] (1-4 channels). 0 or -EINVAL. */
int hn_norm_parse(const char *s, struct hn_norm *n);

#endif
