/*
 * hntrain.c - the training client's main: options, source, backend, train,
 * report, in that order, each a step of its own.
 *
 * main reads as the run does: the command line is parsed and checked
 * (options.c) before any data is read; the data source is opened and the
 * model fitted to its tiles; the backend is set up with the initial or
 * resumed weights; the epochs run (train.c); and the report ends with the
 * "weights xxh3" line. Everything that decides the numbers (sample order,
 * initial weights, dropout) derives from --seed, so the same run over a
 * store, an image folder, an IDX folder or a spritefs mount ends with the
 * same weights on CPU; that line proves it. A step that fails prints its
 * message and main unwinds what the steps before it set up, through the
 * labels at its end, and exits 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/safe_open.h"
#include "common/util.h"
#include "trainer/backend.h"
#include "trainer/chanstats.h"
#include "trainer/checkpoint.h"
#include "trainer/cpus.h"
#include "trainer/data.h"
#include "trainer/dist.h"
#include "trainer/emulate.h"
#include "trainer/export.h"
#include "trainer/gemm_peak.h"
#include "trainer/log.h"
#include "trainer/model.h"
#include "trainer/options.h"
#include "trainer/plan.h"
#include "trainer/preload.h"
#include "trainer/train.h"

static const char *prog = HN_PROG;

/* An image file that does not decode: named once, on its own line even under a progress bar. */
static void report_skip(void *ctx, const char *why)
{
	(void)ctx;
	fprintf(stderr, "%s%s: skipped %s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", prog, why);
}

/*
 * An entry of an image folder that is not an image of a class folder (a file
 * beside the class folders, a dangling link, a FIFO, a link loop): named once
 * when the folder is listed, the path escaped as spritefs-pack shows it.
 */
static void report_ignore(void *ctx, const char *path, const char *why)
{
	char shown[4 * PATH_MAX + 4];
	(void)ctx;
	fprintf(stderr, "%s: ignored %s: %s\n", prog, sprite_escape(path, shown, sizeof shown),
		why);
}

/* How the data is read after all (epoch views a mount cannot serve): said once, unless --quiet. */
static void report_note(void *ctx, const char *note)
{
	(void)ctx;
	fprintf(stderr, "%s%s: note: %s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", prog, note);
}

/* --test-split not given: the data's own evaluation split (data.h), or none. */
static int pick_test_split(struct hn_opts *o)
{
	char err[HN_ERR_MAX] = "";
	if (o->test_split)
		return 0;
	int r = hn_source_pick_test_split(o->data, o->split, o->test_split_buf,
					  sizeof o->test_split_buf, err);
	if (r < 0)
		return hn_error("%s", err[0] ? err : strerror(-r));
	o->test_split = o->test_split_buf[0] ? o->test_split_buf : "none";
	if (!o->test_split_buf[0] && !o->quiet)
		fprintf(stderr,
			"%s: note: %s has no split besides %s: training without evaluation\n", prog,
			o->data, o->split);
	return 0;
}

/* The data source of --data, and the model fitted to its tiles and classes. */
static int open_source(const struct hn_opts *o, hn_source **src)
{
	char err[HN_ERR_MAX] = "";
	struct hn_source_options so = {
		.train_split = o->split,
		.test_split = o->test_split,
		.limit = o->limit,
		.test_limit = o->test_limit,
		.tile_h = o->tile_h,
		.tile_w = o->tile_w,
		.tile_c = o->tile_c,
		.fit = o->fit,
		.background = o->background,
		.window = o->given_window ? o->window : HN_WINDOW_DATASET,
		.seed = o->seed,
		.batch = (uint32_t)o->batch,
		.cache_bytes = o->cache,
		.strict = o->strict,
		.skip_bad_sheets = o->skip_bad_sheets,
		.on_skip = report_skip,
		.on_ignore = report_ignore,
		.on_note = o->quiet ? NULL : report_note,
	};
	if (hn_source_open(o->data, &so, src, err) < 0)
		return hn_error("--data: %s", err);
	return 0;
}

/*
 * A debugging aid, as HNTRAIN_DUMP_BATCH is: with HNTRAIN_DUMP_IDS=FILE, the
 * training samples the run uses, one "ID LABEL" line each in id order (ID
 * the sample number of the split, so that --limit's pick can be compared
 * across media), read one by one before training; a sample that does not
 * read is left out.
 */
static int dump_ids(hn_source *src)
{
	const char *path = getenv("HNTRAIN_DUMP_IDS");
	if (!path || !*path)
		return 0;
	const struct hn_source_info *di = hn_source_info(src);
	const uint32_t *ids = hn_source_ids(src, HN_SPLIT_TRAIN);
	uint8_t *tile = malloc((size_t)di->h * di->w * di->c);
	char *text = malloc(di->count[0] * 24 + 1), why[SPRITE_ERR_MAX] = "";
	size_t len = 0;
	int r = tile && text ? 0 : -ENOMEM;
	for (uint64_t i = 0; r == 0 && i < di->count[0]; i++) {
		uint32_t pos = (uint32_t)i;
		uint16_t label;
		struct hn_batch b = {.split = HN_SPLIT_TRAIN,
				     .view = HN_NO_VIEW,
				     .n = 1,
				     .idx = &pos,
				     .tiles = tile,
				     .labels = &label};
		int got = hn_source_read(src, &b, why);
		if (got > 0)
			len += (size_t)sprintf(text + len, "%" PRIu32 " %u\n", ids ? ids[i] : pos,
					       label);
		r = got < 0 ? got : 0;
	}
	struct sprite_outfile f;
	if (r == 0 && (r = sprite_outfile_open(&f, path, 0644, 0, why)) == 0) {
		if ((r = sprite_write_full(f.fd, text, len)) < 0) {
			snprintf(why, sizeof why, "%s", strerror(-r));
			sprite_outfile_abort(&f);
		} else {
			r = sprite_outfile_commit(&f, why);
		}
	}
	free(tile);
	free(text);
	if (r < 0)
		return hn_error("HNTRAIN_DUMP_IDS %s: %s", path, why[0] ? why : strerror(-r));
	return 0;
}

/* --model fitted to the data; with --resume, the checkpoint must have been trained on the same. */
static int build_model(const struct hn_opts *o, const struct hn_checkpoint *ck,
		       const struct hn_source_info *di, struct hn_model *m)
{
	char err[HN_ERR_MAX] = "";
	if (hn_model_build(o->model, (int)di->c, (int)di->h, (int)di->w, (int)di->nclasses, m,
			   err) < 0)
		return hn_error("--model %s with %ux%ux%u tiles and %u classes: %s", o->model,
				di->h, di->w, di->c, di->nclasses, err);
	if (!o->resume)
		return 0;
	if (ck->in_c != m->in_c || ck->in_h != m->in_h || ck->in_w != m->in_w ||
	    ck->nclasses != m->nclasses || ck->nparams != m->nparams)
		return hn_error("--resume: the checkpoint's model (%dx%dx%d input, %d classes, "
				"%" PRIu64 " parameters) differs from this data's",
				ck->in_h, ck->in_w, ck->in_c, ck->nclasses, ck->nparams);
	if (ck->train_count != di->count[HN_SPLIT_TRAIN])
		return hn_error("--resume: the checkpoint trained on %" PRIu64
				" samples per epoch, this data has %" PRIu64 " (--limit?)",
				ck->train_count, di->count[HN_SPLIT_TRAIN]);
	return 0;
}

/* The backend's settings from the options. */
static struct hn_backend_config backend_config(const struct hn_opts *o)
{
	struct hn_backend_config cfg = {
		.threads = o->threads,
		.max_batch = o->batch,
		.amp = o->amp,
		.fast = o->fast,
		.tf32 = o->tf32,
		.device_index = hn_dist()->local_rank, /* one GPU per rank of a machine */
		.device_ranks = hn_dist()->local_size,
		.seed = o->seed,
		.rank = hn_dist()->rank,
	};
	for (int c = 0; o->norm.mode != HN_NORM_NONE && c < o->norm.nch; c++) {
		cfg.mean[c] = o->norm.mean[c];
		cfg.std[c] = o->norm.std[c];
	}
	return cfg;
}

static void print_plan(const struct hn_opts *o, const struct hn_source_info *di,
		       const struct hn_model *m)
{
	struct hn_plan_input pi = {
		.model = m, .data = di, .optim = &o->optim, .batch = o->batch, .device = o->device};
	struct hn_backend_config cfg = backend_config(o);
	if (!strcmp(o->device, "cpu"))
		pi.backend_bytes = hn_backend_cpu_bytes(m, &o->optim, &cfg);
	hn_plan_print(stdout, &pi);
}

/* The initial weights: the checkpoint's, or drawn from --seed. NULL when out of memory. */
static float *initial_params(const struct hn_opts *o, const struct hn_checkpoint *ck,
			     const struct hn_model *m)
{
	float *params = malloc(m->nparams * sizeof(float));
	if (!params) {
		hn_error("out of memory for %zu parameters", m->nparams);
		return NULL;
	}
	if (o->resume)
		memcpy(params, ck->params, m->nparams * sizeof(float));
	else
		hn_model_init_params(m, o->seed, params);
	return params;
}

/*
 * Set up the model on the backend (t->be) with t->params, on the CPUs of
 * --affinity, and the resumed optimizer state: t->st. Nothing is left set
 * up when this fails.
 */
static int start_backend(const struct hn_opts *o, const struct hn_checkpoint *ck,
			 struct hn_train *t)
{
	char err[HN_ERR_MAX] = "";
	/* Pinning this thread first makes threads the backend starts inherit it. */
	if (o->affinity && sched_setaffinity(0, sizeof o->pin_mask, &o->pin_mask) < 0)
		return hn_error("--affinity %s: %s", o->affinity, strerror(errno));
	struct hn_backend_config cfg = backend_config(o);
	if (t->be->create(t->m, &o->optim, &cfg, t->params, &t->st, err) < 0)
		return hn_error("--device %s: cannot set up the model: %s", o->device, err);
	int rc = 0;
	if (o->resume && hn_optim_state_per_param(o->optim.kind) &&
	    t->be->set_opt_state(t->st, ck->opt) < 0)
		rc = hn_error("--resume: the backend refused the optimizer state");
	/* And the maths threads that already existed (OpenBLAS starts its pool early). */
	else if (o->affinity && hn_cpus_pin_all(&o->pin_mask) < 0)
		rc = hn_error("--affinity %s: cannot pin the maths threads: %s", o->affinity,
			      strerror(errno));
	if (rc < 0)
		t->be->destroy(t->st);
	return rc;
}

/*
 * Several ranks on a backend that keeps its gradients on the device (gpu):
 * rank 0 makes the communicator's id, every rank gets its bytes over MPI
 * (with a first byte saying whether rank 0 could make one) and joins.
 */
static int join_ranks(struct hn_train *t)
{
	char err[HN_ERR_MAX] = "";
	unsigned char id[1 + 255] = {0}; /* its length (0: rank 0 failed), then the id */
	const struct hn_dist_info *d = hn_dist();
	if (t->nranks < 2 || t->be->grads)
		return 0;
	if (!t->be->dist_id || !t->be->dist_join || !t->be->dist_sum_grads)
		return hn_error("--device %s with %d ranks: this build's backend cannot sum "
				"gradients across ranks (its plugin was built without nccl.h)",
				t->o->device, t->nranks);
	if (d->rank == 0) {
		int len = t->be->dist_id(t->st, id + 1, sizeof id - 1, err);
		if (len <= 0)
			hn_error("--device %s: %s", t->o->device, len ? err : "an empty id");
		id[0] = len > 0 ? (unsigned char)len : 0; /* dist_id wrote at most 255 */
	}
	if (hn_dist_share_bytes(id, sizeof id, err) < 0)
		return hn_error("%s", err);
	if (!id[0])
		return d->rank ? hn_error("rank 0 could not set up the gradient sums (its "
					  "message says why)")
			       : -1;
	if (t->be->dist_join(t->st, id + 1, id[0], d->rank, d->size, err) < 0)
		return hn_error("--device %s, rank %d on %s: %s", t->o->device, d->rank, d->host,
				err);
	return 0;
}

/*
 * --normalize: the given mean and std must name every channel of the tiles;
 * auto computes them from the training split (a function of the data set
 * alone, so every rank and every medium gets the same numbers).
 */
static int input_norm(struct hn_opts *o, hn_source *src)
{
	const struct hn_source_info *di = hn_source_info(src);
	struct hn_norm *n = &o->norm;
	char err[HN_ERR_MAX] = "";
	if (n->mode == HN_NORM_NONE)
		return 0;
	if (di->c > HN_NORM_CH)
		return hn_error("--normalize: tiles of %u channels (at most %d are normalised)",
				di->c, HN_NORM_CH);
	if (n->mode == HN_NORM_GIVEN && n->nch != (int)di->c)
		return hn_error("--normalize: %d mean:std pair%s for tiles of %u channel%s", n->nch,
				n->nch == 1 ? "" : "s", di->c, di->c == 1 ? "" : "s");
	uint64_t used = 0;
	if (n->mode == HN_NORM_AUTO) {
		double t0 = sprite_now();
		if (hn_source_channel_stats(src, HN_NORM_SAMPLES, n->mean, n->std, &used, err) < 0)
			return hn_error("--normalize auto: %s", err);
		for (uint32_t c = 0; c < di->c; c++)
			if (!(n->std[c] > 0))
				return hn_error(
					"--normalize auto: channel %u is constant (std 0) over "
					"%" PRIu64 " training samples; give MEAN:STD",
					c, used);
		n->nch = (int)di->c;
		if (!o->quiet)
			printf("normalize: from %" PRIu64 " training samples in %.2f s\n", used,
			       sprite_now() - t0);
	}
	if (!o->quiet) {
		printf("normalize: (x - mean) / std per channel, mean");
		for (int c = 0; c < n->nch; c++)
			printf(" %.4f", n->mean[c]);
		printf(", std");
		for (int c = 0; c < n->nch; c++)
			printf(" %.4f", n->std[c]);
		putchar('\n');
	}
	return 0;
}

static int preload(const struct hn_opts *o, hn_source *src)
{
	char err[HN_ERR_MAX] = "";
	const struct hn_source_info *di = hn_source_info(src);
	double t0 = sprite_now();
	if (hn_source_preload(src, o->loaders, err) < 0)
		return hn_error("--preload: %s", err);
	if (!o->quiet)
		printf("preloaded %" PRIu64 " samples in %.2f s\n", di->count[0] + di->count[1],
		       sprite_now() - t0);
	return 0;
}

/* The plan of steps (t), checked against a resumed checkpoint's step count; then --log opened. */
static int plan_run(const struct hn_opts *o, const struct hn_checkpoint *ck, struct hn_train *t)
{
	hn_train_init(t, ck);
	uint64_t in_epoch = (ck->batch_in_epoch + (uint64_t)o->accum - 1) / (uint64_t)o->accum;
	if (o->resume && (ck->batch_in_epoch > t->nb_train ||
			  ck->step != t->first_epoch * t->steps_per_epoch + in_epoch))
		return hn_error("--resume: %" PRIu64 " steps after %" PRIu64 " epochs and %" PRIu64
				" batches do not match --batch %d --accum %d"
				" over %" PRIu64 " samples",
				ck->step, ck->epoch, ck->batch_in_epoch, o->batch, o->accum,
				t->ntrain);
	if (o->log && t->rank == 0) {
		char why[SPRITE_ERR_MAX];
		int fd = sprite_open_append(o->log, why);
		if (fd < 0)
			return hn_error("--log %s", why);
		if (!(t->logf = fdopen(fd, "a"))) {
			close(fd);
			return hn_error("--log %s: %s", o->log, strerror(errno));
		}
	}
	return 0;
}

static void print_header(const struct hn_opts *o, const struct hn_checkpoint *ck,
			 const struct hn_train *t)
{
	const struct hn_source_info *di = hn_source_info(t->src);
	printf("data: %s\n", hn_source_describe(t->src));
	printf("      %" PRIu64 " train + %" PRIu64 " %s samples, tiles %ux%ux%u, %u classes\n",
	       t->ntrain, t->ntest, hn_source_no_test(o->test_split) ? "test" : o->test_split,
	       di->h, di->w, di->c, di->nclasses);
	/* the rule of sprite_perm_windowed: a window that covers the split is the full order */
	uint32_t st = di->sheet_tiles ? di->sheet_tiles : 1024;
	uint64_t nsheets = (t->ntrain + st - 1) / st;
	if (o->window == 0)
		printf("      order: full shuffle\n");
	else if (o->window >= nsheets)
		printf("      order: full shuffle (a window of %u sheets covers the split's %" PRIu64
		       ")\n",
		       o->window, nsheets);
	else
		printf("      order: windows of %u sheet%s of %u tiles, shuffled within\n",
		       o->window, o->window == 1 ? "" : "s", st);
	printf("model: %s, %zu parameters; %s, lr %g, batch %d x accum %d, seed %" PRIu64 "\n",
	       o->model, t->m->nparams,
	       o->optim.kind == HN_OPT_ADAM	  ? "adam"
	       : o->optim.kind == HN_OPT_MOMENTUM ? "momentum"
						  : "sgd",
	       o->lr, o->batch, o->accum, o->seed);
	printf("backend: %s; %d loaders, queue %d\n", t->be->describe(t->st), o->loaders, o->queue);
	if (o->resume)
		printf("resumed from %s after epoch %" PRIu64 "%s (step %" PRIu64 ")\n", o->resume,
		       ck->epoch, ck->batch_in_epoch ? " and part of the next" : "", ck->step);
	if (o->resume && ck->batch_in_epoch)
		printf("continuing epoch %" PRIu64 " at global batch %" PRIu64 " of %" PRIu64
		       " (sample %" PRIu64 " of its order)\n",
		       ck->epoch + 1, ck->batch_in_epoch, t->nb_train,
		       ck->batch_in_epoch * t->gbatch < t->ntrain ? ck->batch_in_epoch * t->gbatch
								  : t->ntrain);
}

/*
 * --affinity with several ranks on a machine: each local rank takes its own
 * part of the list (local rank l of L: CPUs [l*k/L, (l+1)*k/L) of its k), so
 * that 2 ranks x 1 thread on "0,1" pin to distinct cores. A list shorter
 * than the ranks gives CPU l % k.
 */
static void split_affinity(struct hn_opts *o)
{
	const struct hn_dist_info *d = hn_dist();
	if (!o->affinity || d->local_size < 2)
		return;
	int cpus[CPU_SETSIZE], k = 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &o->pin_mask))
			cpus[k++] = c;
	if (k == 0)
		return;
	int L = d->local_size, l = d->local_rank;
	int lo = k >= L ? l * k / L : l % k, hi = k >= L ? (l + 1) * k / L : lo + 1;
	CPU_ZERO(&o->pin_mask);
	for (int i = lo; i < hi; i++)
		CPU_SET(cpus[i], &o->pin_mask);
}

/*
 * Every rank's set-up went well and they run the same (agree.c: every
 * setting that changes the numbers, and the data's fingerprint): else
 * every rank stops, rank 0 naming the first differing setting and the rank
 * (a rank that failed has said its own message). -EINVAL when every rank
 * answered (they may leave MPI together), another -errno when one did not.
 */
static int agree(const struct hn_opts *o, const hn_source *src, const struct hn_model *m,
		 const struct hn_checkpoint *ck, uint64_t data_fp, int ok)
{
	char err[HN_ERR_MAX] = "";
	if (hn_dist()->size < 2)
		return ok ? 0 : -EINVAL;
	int rc = hn_agree_settings(o, src, m, ck, data_fp, ok, err);
	if (rc < 0 && (rc != -EINVAL || (ok && hn_dist()->rank == 0)))
		fprintf(stderr, "%s: %s\n", prog, err);
	return rc;
}

/*
 * The data's fingerprint (agree.c), where several ranks compare it or a
 * checkpoint keeps it; a --resume checkpoint that recorded another is
 * refused: other data of the same shape.
 */
static int data_fingerprint(const struct hn_opts *o, const struct hn_checkpoint *ck, hn_source *src,
			    uint64_t *fp)
{
	*fp = 0;
	if (hn_dist()->size < 2 && !o->checkpoint && !o->resume)
		return 0;
	*fp = hn_data_fingerprint(src);
	if (o->resume && ck->data_fp && ck->data_fp != *fp)
		return hn_error("--resume %s: the checkpoint was trained on other data than %s "
				"(the same shape and count, other samples: fingerprint %016" PRIx64
				", this data's %016" PRIx64 ")",
				o->resume, o->data, ck->data_fp, *fp);
	return 0;
}

/* The final record of --log, which is closed after it. */
static int log_final(const struct hn_opts *o, struct hn_train *t, uint64_t hash)
{
	const struct hn_source_info *di = hn_source_info(t->src);
	uint64_t bad_samples, bad_sheets = hn_source_bad_sheets(t->src, &bad_samples);
	struct hn_final_stats fs = {
		.epochs = t->end_epoch > t->first_epoch ? t->end_epoch - t->first_epoch : 0,
		.steps = t->step - t->first_step,
		.run_epochs = t->end_epoch > t->first_epoch ? t->end_epoch : t->first_epoch,
		.run_steps = t->step,
		.samples = t->samples,
		.weights_xxh3 = hash,
		.wall_s = t->wall_s,
		.compute_s = t->compute_s,
		.data_wait_s = t->data_wait_s,
		.comm_s = t->comm_s,
		.nranks = t->nranks,
		.augment_s = t->augment_s,
		.loader_cpu_s = t->loader_cpu_s,
		.test_acc = t->test_acc,
		.source = di->kind,
		.device = o->device,
		.model = o->model,
		.nparams = t->m->nparams,
		.skipped_files = hn_source_skipped(t->src),
		.bad_sheets = bad_sheets,
		.bad_sheet_samples = bad_samples,
		.ignored_entries = hn_source_ignored(t->src),
		.reach_epoch = t->reach_epoch,
		.reach_s = t->reach_s,
		.flops_per_sample = hn_model_train_flops(t->m),
	};
	int bad = hn_log_final(t->logf, &fs) < 0;
	bad |= fclose(t->logf) != 0;
	t->logf = NULL;
	return bad ? hn_error("--log %s: write error", o->log) : 0;
}

/* Every rank ends with the same weights: a check that the gradient sums agreed. */
static int same_weights(const struct hn_train *t, uint64_t hash)
{
	char err[HN_ERR_MAX];
	double mine[2] = {(double)(hash >> 32), (double)(hash & 0xffffffffu)};
	double *all = malloc((size_t)t->nranks * sizeof mine);
	int rc = all ? hn_dist_gather_doubles(mine, 2, all, err) : -ENOMEM;
	if (rc < 0)
		hn_error("%s", all ? err : "out of memory");
	for (int r = 1; rc == 0 && r < t->nranks; r++)
		if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
			rc = hn_error("rank %d ended with other weights than rank 0", r);
	free(all);
	return rc;
}

/* What the run skipped or ignored, the "weights xxh3" line, and the final --log record. */
static int report(const struct hn_opts *o, struct hn_train *t)
{
	uint64_t skipped = hn_source_skipped(t->src);
	if (skipped && !o->quiet)
		printf("skipped %" PRIu64 " image file%s that did not decode (named above; "
		       "--strict stops at the first)\n",
		       skipped, skipped == 1 ? "" : "s");
	uint64_t bad_samples, bad = hn_source_bad_sheets(t->src, &bad_samples);
	if (bad && !o->quiet)
		printf("skipped %" PRIu64 " sample%s of %" PRIu64
		       " unreadable sheet%s (named above; "
		       "--skip-bad-sheets)\n",
		       bad_samples, bad_samples == 1 ? "" : "s", bad, bad == 1 ? "" : "s");
	uint64_t ignored = hn_source_ignored(t->src);
	if (ignored && !o->quiet)
		printf("ignored %" PRIu64 " entr%s of the image folder, not images in class "
		       "folders (named above; --strict stops at one that is neither a file nor a "
		       "folder)\n",
		       ignored, ignored == 1 ? "y" : "ies");
	if (t->be->get_params(t->st, t->params) < 0)
		return hn_error("cannot read the weights back from the backend");
	uint64_t hash = sprite_checksum(t->params, t->m->nparams * sizeof(float));
	if (t->nranks > 1 && same_weights(t, hash) < 0)
		return -1;
	if (t->rank == 0 && !o->quiet)
		for (int k = 0; k < HN_NREACH; k++)
			if (t->reach_epoch[k] && (k + 1 == HN_NREACH || !t->reach_epoch[k + 1]))
				printf("test accuracy %.0f%% first reached at epoch %" PRIu64
				       ", after %.1f s of training\n",
				       100 * hn_reach_acc[k], t->reach_epoch[k], t->reach_s[k]);
	if (t->rank == 0)
		printf("weights xxh3 %016" PRIx64 "\n", hash);
	if (o->export_path && t->rank == 0) {
		char err[HN_ERR_MAX];
		int nch = o->norm.mode != HN_NORM_NONE ? o->norm.nch : 0;
		if (hn_export_npz(o->export_path, t->m, t->params, o->norm.mean, o->norm.std, nch,
				  err) < 0)
			return hn_error("--export: %s", err);
		if (!o->quiet)
			printf("weights exported to %s\n", o->export_path);
	}
	return t->logf ? log_final(o, t, hash) : 0;
}

/* --gemm-peak: the SGEMM GFLOP/s of --threads threads on this machine, no data. */
static int gemm_peak(const struct hn_opts *o)
{
	char err[HN_ERR_MAX] = "";
	double g = 0;
	int nt = hn_backend_cpu_threads(o->threads);
	if (hn_gemm_peak(nt, &g, err) < 0)
		return hn_error("%s", err);
	printf("sgemm peak: %.1f GFLOP/s (%d thread%s x 2048^3, %s)\n", g, nt, nt == 1 ? "" : "s",
	       hn_backend_cpu_library());
	return 0;
}

int main(int argc, char **argv)
{
	struct hn_opts o;
	struct hn_checkpoint ck = {0};
	struct hn_model m;
	hn_source *src = NULL;
	struct hn_train t = {.o = &o, .m = &m};
	char err[HN_ERR_MAX] = "";
	int rc = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	hn_blas_core_check(argv); /* may execute hntrain again with OPENBLAS_CORETYPE set */
	if (hn_dist_init(&argc, &argv, err) < 0) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return 1;
	}
	hn_opts_parse(argc, argv, &o); /* these exit on a bad command line */
	/* --gemm-peak: a mode, as --plan is, that measures and leaves */
	if (o.gemm_peak) {
		rc = gemm_peak(&o) < 0 ? 1 : 0;
		hn_dist_finalize();
		return rc;
	}
	if (o.emulate.name[0])
		hn_emulate_check_opts(&o);
	hn_opts_check(&o, &ck);
	t.rank = hn_dist()->rank;
	t.nranks = hn_dist()->size;
	if (t.rank > 0) /* rank 0 speaks for the run; the others only report errors */
		o.quiet = 1;
	split_affinity(&o);

	int ok = pick_test_split(&o) == 0;
	ok = ok && open_source(&o, &src) == 0;
	ok = ok && dump_ids(src) == 0;
	t.src = src;
	if (ok && !o.given_window) /* the order is the data set's */
		o.window = hn_source_info(src)->order_window;
	int usage = 0;
	if (ok && o.augment.crop) {
		const struct hn_source_info *di = hn_source_info(src);
		if (o.augment.crop >= di->h || o.augment.crop >= di->w) {
			hn_error("--augment %s: a crop padding of %u needs tiles larger than %ux%u",
				 o.augment.spec, o.augment.crop, di->h, di->w);
			ok = 0;
			usage = 1;
		}
	}
	if (ok && input_norm(&o, src) < 0) {
		ok = 0;
		usage = o.norm.mode == HN_NORM_GIVEN;
	}
	int emulate = o.emulate.name[0] != 0; /* no model: emulate.h */
	ok = ok && (emulate || build_model(&o, &ck, hn_source_info(src), &m) == 0);
	ok = ok && (emulate || data_fingerprint(&o, &ck, src, &t.data_fp) == 0);
	int agreed = agree(&o, src, ok && !emulate ? &m : NULL, &ck, t.data_fp, ok);
	if (agreed < 0) {
		if (agreed == -EINVAL) /* every rank got here: leave together */
			hn_dist_finalize();
		if (usage)
			rc = 2; /* a usage error */
		goto out_source;
	}
	if (emulate) {
		rc = hn_emulate_run(&o, src) < 0 ? 1 : 0;
		goto out_source;
	}
	if (o.plan) {
		print_plan(&o, hn_source_info(src), &m);
		rc = 0;
		goto out_source;
	}

	t.be = hn_backend_load(o.device, err);
	if (!t.be) {
		hn_error("--device %s: %s", o.device, err);
		goto out_source;
	}
	t.params = initial_params(&o, &ck, &m);
	if (!t.params)
		goto out_source;
	if (start_backend(&o, &ck, &t) < 0)
		goto out_params;
	if (join_ranks(&t) < 0)
		goto out_backend;
	if (o.preload && preload(&o, src) < 0)
		goto out_backend;

	if (plan_run(&o, &ck, &t) < 0)
		goto out_backend;
	if (!o.quiet)
		print_header(&o, &ck, &t);
	if (hn_train_run(&t) < 0) { /* its message printed */
		/* a loader still reads the source (a stopped daemon): exit ends it */
		if (t.abandoned)
			exit(1);
		if (t.logf)
			fclose(t.logf);
		hn_dist_stop_early(); /* as hn_die: the other ranks see this one go */
		goto out_backend;
	}
	if (t.stopped) { /* by a signal, its checkpoint written (train.h) */
		rc = HN_EXIT_STOPPED;
		if (t.logf)
			fclose(t.logf);
		hn_dist_finalize();
		goto out_backend;
	}
	rc = report(&o, &t) < 0 ? 1 : 0;
	if (t.logf)
		fclose(t.logf);
	if (rc == 0)
		hn_dist_finalize();

out_backend:
	t.be->destroy(t.st);
out_params:
	free(t.params);
out_source:
	hn_source_close(src);
	hn_checkpoint_free(&ck);
	return rc;
}
