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

static const char *prog = HN_PROG;

#define HN_LOSS_DIVERGED 1e4 /* mean loss per sample; ln(classes) is where training starts */

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

/* Learning rate of optimizer step s (0-based) of total. */
static double lr_at(const struct hn_opts *o, uint64_t s, uint64_t steps_per_epoch, uint64_t total)
{
	double lr = o->lr;
	if (o->warmup && s < o->warmup)
		return lr * (double)(s + 1) / (double)o->warmup;
	switch (o->sched) {
	case HN_SCHED_CONSTANT:
		break;
	case HN_SCHED_STEP:
		lr *= pow(o->gamma, (double)((s / steps_per_epoch) / o->step_epochs));
		break;
	case HN_SCHED_COSINE: {
		double span = total > o->warmup ? (double)(total - o->warmup) : 1;
		double t = (double)(s - o->warmup) / span;
		lr *= 0.5 * (1 + cos(M_PI * (t > 1 ? 1 : t)));
		break;
	}
	}
	return lr;
}

struct eval_result {
	double loss;
	uint64_t correct, seen;
	double secs;
};

/* One pass over the test split: the loader's next nb batches. */
static void evaluate(hn_loader *ld, const struct hn_backend_ops *be, void *st, uint64_t nb,
		     struct eval_result *r)
{
	char err[HN_ERR_MAX];
	double t0 = sprite_now();
	memset(r, 0, sizeof *r);
	for (uint64_t b = 0; b < nb; b++) {
		struct hn_batch *bt;
		if (hn_loader_next(ld, &bt, err) < 0) {
			hn_loader_stop(ld);
			hn_die(1, "reading the test data: %s", err);
		}
		struct hn_step_result res = {0};
		int rc = bt->n ? be->evaluate(st, bt->tiles, bt->labels, bt->n, &res) : 0;
		if (rc < 0) {
			hn_loader_stop(ld);
			hn_die(1, "evaluation failed: %s", strerror(-rc));
		}
		r->loss += res.loss_sum;
		r->correct += (uint64_t)res.correct;
		r->seen += (uint64_t)bt->n;
		hn_loader_release(ld, bt);
	}
	r->secs = sprite_now() - t0;
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

	uint64_t ntrain = di->count[HN_SPLIT_TRAIN], ntest = di->count[HN_SPLIT_TEST];
	uint64_t nb_train = hn_batches(ntrain, o.batch), nb_test = hn_batches(ntest, o.batch);
	uint64_t steps_per_epoch = (nb_train + (uint64_t)o.accum - 1) / (uint64_t)o.accum;
	uint64_t total_steps = steps_per_epoch * o.epochs;
	uint64_t first_epoch = o.resume ? ck.epoch : 0;
	uint64_t end_epoch = o.stop_after ? o.stop_after : o.epochs;
	uint64_t step = o.resume ? ck.step : 0;
	if (o.resume && ck.step != first_epoch * steps_per_epoch)
		hn_die(1,
		       "--resume: %" PRIu64 " steps after %" PRIu64
		       " epochs do not match --batch %d "
		       "--accum %d over %" PRIu64 " samples",
		       ck.step, ck.epoch, o.batch, o.accum, ntrain);

	FILE *logf = NULL;
	if (o.log && !(logf = fopen(o.log, "a")))
		hn_die(1, "--log %s: %s", o.log, strerror(errno));

	if (!o.quiet) {
		printf("data: %s\n", hn_source_describe(src));
		printf("      %" PRIu64 " train + %" PRIu64
		       " test samples, tiles %ux%ux%u, %u classes\n",
		       ntrain, ntest, di->h, di->w, di->c, di->nclasses);
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

	double run_wall = 0, run_compute = 0, run_wait = 0, last_test_acc = -1;
	uint64_t run_samples = 0, first_step = step;
	struct hn_loader_config lc = {
		.src = src,
		.nloaders = o.loaders,
		.queue = o.queue,
		.batch = o.batch,
		.seed = o.seed,
		.window = o.window,
		.first_epoch = first_epoch,
		.end_epoch = end_epoch,
		.eval = ntest > 0,
		.mask = &o.loader_mask,
	};
	if (first_epoch < end_epoch) {
		hn_loader *ld = NULL;
		if (hn_loader_start(&lc, &ld, err) < 0)
			hn_die(1, "%s", err);
		uint64_t micro = 0;
		int pending = 0; /* batches summed into the group's gradients, not applied yet */

		for (uint64_t e = first_epoch; e < end_epoch; e++) {
			struct sprite_progress prog_bar;
			char label[48];
			snprintf(label, sizeof label, "epoch %" PRIu64 "/%" PRIu64, e + 1,
				 o.epochs);
			if (!o.quiet)
				sprite_progress_start(&prog_bar, label, ntrain);
			double wait = 0, compute = 0, loss = 0, lr = 0;
			uint64_t correct = 0, seen = 0;
			double t_epoch = sprite_now();
			for (uint64_t b = 0; b < nb_train; b++) {
				struct hn_batch *bt;
				double t0 = sprite_now();
				if (hn_loader_next(ld, &bt, err) < 0) {
					hn_loader_stop(ld); /* join the loaders before exiting */
					hn_die(1, "reading the data: %s", err);
				}
				double t1 = sprite_now();
				wait += t1 - t0;
				uint64_t g0 = b - b % (uint64_t)o.accum;
				uint64_t g_end = g0 + (uint64_t)o.accum;
				if (g_end > nb_train)
					g_end = nb_train;
				uint64_t s_end = g_end * (uint64_t)o.batch;
				/*
				 * Gradients are averaged over the group's samples: those the batch
				 * holds, or with --accum those planned (a batch short of image
				 * files that did not decode is then weighted a little less).
				 */
				int group = o.accum == 1 ? bt->n
							 : (int)((s_end < ntrain ? s_end : ntrain) -
								 g0 * (uint64_t)o.batch);
				int apply = b + 1 == g_end;
				lr = lr_at(&o, step, steps_per_epoch, total_steps);
				/* Non-applying calls get their own dropout stream, outside the step
				 * range. */
				uint64_t sidx = apply ? step + 1 : (1ull << 63) | micro;
				struct hn_step_result res = {0};
				int rc = 0;
				/*
				 * A batch whose every file failed to decode: nothing to learn from,
				 * but the step still counts (the schedule and --resume count
				 * steps), and gradients already summed in its group are applied.
				 */
				if (bt->n > 0 || (apply && pending))
					rc = be->train_step(st, bt->tiles, bt->labels, bt->n, group,
							    apply, (float)lr, sidx, &res);
				pending = apply ? 0 : pending + (bt->n > 0);
				double t2 = sprite_now();
				if (rc < 0)
					hn_die(1,
					       "epoch %" PRIu64 ", batch %" PRIu64
					       ": the backend failed: %s",
					       e + 1, b, strerror(-rc));
				compute += res.compute_s > 0 ? res.compute_s : t2 - t1;
				/*
				 * A mean cross-entropy above HN_LOSS_DIVERGED means logits wrong
				 * by that much: the run has diverged even if the stable loss
				 * has not overflowed to NaN yet.
				 */
				double mean = res.loss_sum / (bt->n ? bt->n : 1);
				if (!isfinite(mean) || mean > HN_LOSS_DIVERGED)
					hn_die(1,
					       "the loss became %s at epoch %" PRIu64
					       ", step %" PRIu64 " (batch %" PRIu64
					       "): training diverged; try a lower "
					       "--lr (now %g)",
					       isnan(mean)   ? "NaN"
					       : isinf(mean) ? "infinite"
							     : "huge",
					       e + 1, step + 1, b, lr);
				loss += res.loss_sum;
				correct += (uint64_t)res.correct;
				seen += (uint64_t)bt->n;
				micro++;
				if (apply)
					step++;
				int n = bt->n;
				hn_loader_release(ld, bt); /* a loader may refill it now */
				if (!o.quiet) {
					sprite_progress_add(&prog_bar, (uint64_t)n);
					sprite_progress_draw(&prog_bar);
				}
			}
			double wall = sprite_now() - t_epoch;
			if (!o.quiet)
				sprite_progress_end(&prog_bar);

			struct eval_result ev;
			evaluate(ld, be, st, nb_test, &ev);
			uint64_t tseen = ev.seen;

			struct hn_epoch_stats es = {
				.epoch = e + 1,
				.samples = seen,
				.steps = step,
				.wall_s = wall,
				.compute_s = compute,
				.data_wait_s = wait,
				.eval_s = ev.secs,
				.train_loss = seen ? loss / (double)seen : 0,
				.train_acc = seen ? (double)correct / (double)seen : 0,
				.test_loss = tseen ? ev.loss / (double)tseen : -1,
				.test_acc = tseen ? (double)ev.correct / (double)tseen : -1,
				.lr = lr,
			};
			last_test_acc = es.test_acc;
			run_wall += wall;
			run_compute += compute;
			run_wait += wait;
			run_samples += seen;
			if (!o.quiet) {
				char testbuf[32] = "test -";
				if (tseen)
					snprintf(testbuf, sizeof testbuf, "test %.2f%%",
						 100 * es.test_acc);
				printf("epoch %" PRIu64 "/%" PRIu64
				       "  loss %.4f  train %.2f%%  %s  "
				       "%.0f samples/s  compute %.2f s  data wait %.3f s "
				       "(%.2f%%)\n",
				       e + 1, o.epochs, es.train_loss, 100 * es.train_acc, testbuf,
				       wall > 0 ? (double)seen / wall : 0, compute, wait,
				       wall > 0 ? 100 * wait / wall : 0);
			}
			if (logf && hn_log_epoch(logf, &es) < 0)
				hn_die(1, "--log %s: write error", o.log);
			if (o.checkpoint) {
				struct hn_checkpoint c = {
					.in_c = m.in_c,
					.in_h = m.in_h,
					.in_w = m.in_w,
					.nclasses = m.nclasses,
					.nparams = m.nparams,
					.optim = o.optim,
					.epoch = e + 1,
					.step = step,
					.seed = o.seed,
					.batch = (uint32_t)o.batch,
					.accum = (uint32_t)o.accum,
					.window = o.window,
					.train_count = ntrain,
					.has_schedule = 1,
					.sched = (uint32_t)o.sched,
					.lr = o.lr,
					.gamma = o.gamma,
					.step_epochs = o.step_epochs,
					.warmup = o.warmup,
					.epochs = o.epochs,
					.params = params,
				};
				snprintf(c.spec, sizeof c.spec, "%s", o.model);
				size_t per = (size_t)hn_optim_state_per_param(o.optim.kind);
				c.opt = malloc((m.nparams * per + 1) * sizeof(float));
				if (!c.opt || be->get_params(st, params) < 0 ||
				    (per && be->get_opt_state(st, c.opt) < 0))
					hn_die(1,
					       "--checkpoint: cannot read the state back from the "
					       "backend");
				if (hn_checkpoint_save(o.checkpoint, &c, err) < 0)
					hn_die(1, "--checkpoint: %s", err);
				free(c.opt);
			}
		}
		hn_loader_stop(ld);
	} else {
		/*
		 * The checkpoint has every epoch the run asks for (resume refuses
		 * fewer): evaluate it, the way to ask a checkpoint for its accuracy.
		 */
		if (!o.quiet) {
			char why[64] = "";
			if (end_epoch < o.epochs)
				snprintf(why, sizeof why, ", where --stop-after %" PRIu64 " stops",
					 end_epoch);
			printf("nothing to train: %s has %" PRIu64 " of %" PRIu64 " epochs%s; %s\n",
			       o.resume, first_epoch, o.epochs, why,
			       ntest ? "evaluating it on the test split"
				     : "no test split to evaluate it on");
		}
		if (ntest) {
			hn_loader *ld = NULL;
			lc.eval_only = 1;
			if (hn_loader_start(&lc, &ld, err) < 0)
				hn_die(1, "%s", err);
			struct eval_result ev;
			evaluate(ld, be, st, nb_test, &ev);
			hn_loader_stop(ld);
			if (ev.seen)
				last_test_acc = (double)ev.correct / (double)ev.seen;
			if (!o.quiet && ev.seen)
				printf("epoch %" PRIu64 "/%" PRIu64
				       "  test %.2f%%  test loss %.4f  (%" PRIu64
				       " samples evaluated in %.2f s)\n",
				       first_epoch, o.epochs, 100 * last_test_acc,
				       ev.loss / (double)ev.seen, ev.seen, ev.secs);
		}
	}

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
			.epochs = end_epoch > first_epoch ? end_epoch - first_epoch : 0,
			.steps = step - first_step,
			.run_epochs = end_epoch > first_epoch ? end_epoch : first_epoch,
			.run_steps = step,
			.samples = run_samples,
			.weights_xxh3 = hash,
			.wall_s = run_wall,
			.compute_s = run_compute,
			.data_wait_s = run_wait,
			.test_acc = last_test_acc,
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
