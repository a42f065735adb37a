/*
 * hntrain.c - the training client: options, the training loop, and the
 * output a person or a benchmark reads.
 *
 * The compute thread (this one) takes ready batches from the loader queue
 * and hands them to a backend; the time it spends blocked on the queue is
 * data wait, the time inside the backend calls is compute, and the two are
 * reported apart per epoch, which is the point of the program. Everything
 * that decides the numbers (sample order, initial weights, dropout) derives
 * from --seed, so the same run over a store, an image folder, an IDX folder
 * or a spritefs mount ends with the same weights on CPU; the "weights xxh3"
 * line proves it. Only this file prints and exits.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/format.h"
#include "common/util.h"
#include "trainer/app.h"
#include "trainer/backend.h"
#include "trainer/data.h"
#include "trainer/model.h"
#include "trainer/options.h"
#include "trainer/team.h"
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

/* Pin every thread that exists now (this one and the maths pool) to set. */
static int pin_all_threads(const cpu_set_t *set)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -errno;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid > 0 && sched_setaffinity(tid, sizeof *set, set) < 0)
			rc = -errno;
	}
	closedir(d);
	return rc;
}

static uint64_t weights_hash(const struct hn_backend_ops *be, void *st, float *params,
			     size_t nparams)
{
	if (be->get_params(st, params) < 0)
		hn_die(1, "cannot read the weights back from the backend");
	return sprite_checksum(params, nparams * sizeof(float));
}

int main(int argc, char **argv)
{
	struct hn_opts o;
	struct hn_checkpoint ck = {0};
	char err[HN_ERR_MAX] = "";
	setvbuf(stdout, NULL, _IOLBF, 0);
	hn_opts_parse(argc, argv, &o);
	hn_opts_check(&o, &ck);

	struct hn_source_options so = {
		.train_split = o.split,
		.test_split = o.test_split,
		.limit = o.limit,
		.test_limit = o.test_limit,
		.tile_h = o.tile_h,
		.tile_w = o.tile_w,
		.tile_c = o.tile_c,
		.window = o.window,
		.seed = o.seed,
		.batch = (uint32_t)o.batch,
		.cache_bytes = o.cache,
		.strict = o.strict,
		.on_skip = report_skip,
		.on_ignore = report_ignore,
		.on_note = o.quiet ? NULL : report_note,
	};
	hn_source *src = NULL;
	if (hn_source_open(o.data, &so, &src, err) < 0)
		hn_die(1, "--data: %s", err);
	const struct hn_source_info *di = hn_source_info(src);

	struct hn_model m;
	if (hn_model_build(o.model, (int)di->c, (int)di->h, (int)di->w, (int)di->nclasses, &m,
			   err) < 0)
		hn_die(1, "--model %s with %ux%ux%u tiles and %u classes: %s", o.model, di->h,
		       di->w, di->c, di->nclasses, err);

	if (o.resume) {
		if (ck.in_c != m.in_c || ck.in_h != m.in_h || ck.in_w != m.in_w ||
		    ck.nclasses != m.nclasses || ck.nparams != m.nparams)
			hn_die(1,
			       "--resume: the checkpoint's model (%dx%dx%d input, %d classes, "
			       "%" PRIu64 " parameters) differs from this data's",
			       ck.in_h, ck.in_w, ck.in_c, ck.nclasses, ck.nparams);
		if (ck.train_count != di->count[HN_SPLIT_TRAIN])
			hn_die(1,
			       "--resume: the checkpoint trained on %" PRIu64
			       " samples per epoch, this data has %" PRIu64 " (--limit?)",
			       ck.train_count, di->count[HN_SPLIT_TRAIN]);
	}

	if (o.plan) {
		struct hn_plan_input pi = {.model = &m,
					   .data = di,
					   .optim = &o.optim,
					   .batch = o.batch,
					   .device = o.device};
		hn_plan_print(stdout, &pi);
		hn_source_close(src);
		hn_checkpoint_free(&ck);
		return 0;
	}

	const struct hn_backend_ops *be = hn_backend_load(o.device, err);
	if (!be)
		hn_die(1, "--device %s: %s", o.device, err);

	float *params = malloc(m.nparams * sizeof(float));
	if (!params)
		hn_die(1, "out of memory for %zu parameters", m.nparams);
	if (o.resume)
		memcpy(params, ck.params, m.nparams * sizeof(float));
	else
		hn_model_init_params(&m, o.seed, params);

	/* Pinning this thread first makes threads the backend starts inherit it. */
	if (o.affinity && sched_setaffinity(0, sizeof o.pin_mask, &o.pin_mask) < 0)
		hn_die(1, "--affinity %s: %s", o.affinity, strerror(errno));

	struct hn_backend_config cfg = {
		.threads = o.threads,
		.max_batch = o.batch,
		.amp = o.amp,
		.device_index = 0,
		.seed = o.seed,
	};
	void *st = NULL;
	err[0] = 0;
	if (be->create(&m, &o.optim, &cfg, params, &st, err) < 0)
		hn_die(1, "--device %s: cannot set up the model: %s", o.device, err);
	if (o.resume && hn_optim_state_per_param(o.optim.kind) && be->set_opt_state(st, ck.opt) < 0)
		hn_die(1, "--resume: the backend refused the optimizer state");
	/* And the maths threads that already existed (OpenBLAS starts its pool early). */
	if (o.affinity && pin_all_threads(&o.pin_mask) < 0)
		hn_die(1, "--affinity %s: cannot pin the maths threads: %s", o.affinity,
		       strerror(errno));

	if (o.preload) {
		double t0 = sprite_now();
		if (hn_source_preload(src, o.loaders, err) < 0)
			hn_die(1, "--preload: %s", err);
		if (!o.quiet)
			printf("preloaded %" PRIu64 " samples in %.2f s\n",
			       di->count[0] + di->count[1], sprite_now() - t0);
	}

	struct hn_train t = {.o = &o, .src = src, .m = &m, .be = be, .st = st, .params = params};
	hn_train_init(&t, &ck);
	if (o.resume && ck.step != t.first_epoch * t.steps_per_epoch)
		hn_die(1,
		       "--resume: %" PRIu64 " steps after %" PRIu64
		       " epochs do not match --batch %d "
		       "--accum %d over %" PRIu64 " samples",
		       ck.step, ck.epoch, o.batch, o.accum, t.ntrain);

	FILE *logf = NULL;
	if (o.log && !(logf = fopen(o.log, "a")))
		hn_die(1, "--log %s: %s", o.log, strerror(errno));
	t.logf = logf;

	if (!o.quiet) {
		printf("data: %s\n", hn_source_describe(src));
		printf("      %" PRIu64 " train + %" PRIu64
		       " test samples, tiles %ux%ux%u, %u classes\n",
		       t.ntrain, t.ntest, di->h, di->w, di->c, di->nclasses);
		printf("model: %s, %zu parameters; %s, lr %g, batch %d x accum %d, seed %" PRIu64
		       "\n",
		       m.name, m.nparams,
		       o.optim.kind == HN_OPT_ADAM	 ? "adam"
		       : o.optim.kind == HN_OPT_MOMENTUM ? "momentum"
							 : "sgd",
		       o.lr, o.batch, o.accum, o.seed);
		printf("backend: %s; %d loaders, queue %d\n", be->describe(st), o.loaders, o.queue);
		if (o.resume)
			printf("resumed from %s after epoch %" PRIu64 " (step %" PRIu64 ")\n",
			       o.resume, ck.epoch, ck.step);
	}

	hn_train_run(&t);

	uint64_t skipped = hn_source_skipped(src);
	if (skipped && !o.quiet)
		printf("skipped %" PRIu64
		       " image file%s that did not decode (named above; --strict "
		       "stops at the first)\n",
		       skipped, skipped == 1 ? "" : "s");
	uint64_t ignored = hn_source_ignored(src);
	if (ignored && !o.quiet)
		printf("ignored %" PRIu64
		       " entr%s of the image folder, not images in class folders (named above; "
		       "--strict stops at one that is neither a file nor a folder)\n",
		       ignored, ignored == 1 ? "y" : "ies");
	uint64_t hash = weights_hash(be, st, params, m.nparams);
	printf("weights xxh3 %016" PRIx64 "\n", hash);
	if (logf) {
		struct hn_final_stats fs = {
			.epochs = t.end_epoch > t.first_epoch ? t.end_epoch - t.first_epoch : 0,
			.steps = t.step - t.first_step,
			.run_epochs = t.end_epoch > t.first_epoch ? t.end_epoch : t.first_epoch,
			.run_steps = t.step,
			.samples = t.samples,
			.weights_xxh3 = hash,
			.wall_s = t.wall_s,
			.compute_s = t.compute_s,
			.data_wait_s = t.data_wait_s,
			.test_acc = t.test_acc,
			.source = di->kind,
			.device = o.device,
			.model = o.model,
			.nparams = m.nparams,
			.skipped_files = hn_source_skipped(src),
			.ignored_entries = ignored,
		};
		if (hn_log_final(logf, &fs) < 0 || fclose(logf) != 0)
			hn_die(1, "--log %s: write error", o.log);
	}
	be->destroy(st);
	free(params);
	hn_checkpoint_free(&ck);
	hn_source_close(src);
	return 0;
}
