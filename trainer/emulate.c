/*
 * emulate.c - hntrain --emulate: each rank an emulated accelerator that
 * reads its share of every batch as training does and sleeps for the
 * profile's compute time in place of the maths (emulate.h).
 *
 * The method is MLPerf Storage's (DLIO): the profiles are the batch sizes
 * and compute times of its workload configs (mlcommons/storage,
 * configs/dlio/workload/, one yaml file each), and the accelerator utilisation of an
 * epoch is, for each rank, the compute time of its steps over the epoch's
 * wall time, the first step (its load and its compute) left out of both so
 * that start-up does not count; the run's AU is the ranks' mean per epoch,
 * then the epochs' mean, and passes at the profile's minimum.
 *
 * The compute step sleeps on CLOCK_MONOTONIC to an absolute deadline on the
 * accelerator's own time line: each batch moves the deadline by the time
 * this thread waited for it (data wait, measured) and by the compute time.
 * The few microseconds a wake-up is late, and the bookkeeping between
 * batches, therefore do not add up over an epoch: with data always ready,
 * an epoch of n steps lasts n times the compute time, and AU is 1 to within
 * one wake-up. A thread that falls behind (the host's CPUs busy) catches up
 * as a real accelerator would, which computes while its host is late; what
 * it cannot catch up shows in the epoch's wall time.
 *
 * Nothing here touches a backend or a model: no OpenBLAS work is done.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "common/progress.h"
#include "common/util.h"
#include "trainer/data.h"
#include "trainer/dist.h"
#include "trainer/emulate.h"
#include "trainer/loader.h"
#include "trainer/log.h"
#include "trainer/options.h"

/*
 * The profiles, one row each: MLPerf Storage v2.0's workload configs
 * (reader.batch_size, train.computation_time, metric.au). Only ResNet-50's
 * samples are images (224x224x3, 150,528 bytes once decoded) as tiles are;
 * U-Net3D's are 3D volumes of about 140 MB and CosmoFlow's 2.8 MB tensors,
 * so with them this program keeps their step rate, not their bytes per
 * sample (docs/HNTRAIN.md).
 */
static const struct hn_emulate profiles[] = {
	{"resnet50-h100", 400, 0.224, 0.90, 1},	 /* resnet50_h100.yaml */
	{"resnet50-a100", 400, 0.435, 0.90, 1},	 /* resnet50_a100.yaml */
	{"unet3d-h100", 7, 0.323, 0.90, 0},	 /* unet3d_h100.yaml */
	{"unet3d-a100", 7, 0.636, 0.90, 0},	 /* unet3d_a100.yaml */
	{"cosmoflow-h100", 1, 0.00350, 0.70, 0}, /* cosmoflow_h100.yaml */
	{"cosmoflow-a100", 1, 0.00551, 0.70, 0}, /* cosmoflow_a100.yaml */
};
#define NPROFILES	(sizeof profiles / sizeof profiles[0])
#define EMU_MAX_BATCH	65536
#define EMU_MAX_SECONDS 3600.0

static void profile_list(char *out, size_t cap)
{
	size_t n = 0;
	out[0] = 0;
	for (size_t i = 0; i < NPROFILES && n < cap; i++) {
		int k = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", profiles[i].name);
		if (k < 0)
			break;
		n += (size_t)k;
	}
}

int hn_emulate_parse(const char *s, struct hn_emulate *e, char *err)
{
	char list[256];
	memset(e, 0, sizeof *e);
	for (size_t i = 0; i < NPROFILES; i++)
		if (!strcmp(s, profiles[i].name)) {
			*e = profiles[i];
			return 0;
		}
	profile_list(list, sizeof list);
	const char *colon = strchr(s, ':');
	if (!colon) {
		snprintf(err, HN_ERR_MAX,
			 "unknown profile; expected one of %s, or BATCH:SECONDS (samples per "
			 "accelerator and compute seconds per batch, such as 256:0.1)",
			 list);
		return -EINVAL;
	}
	char *end;
	errno = 0;
	unsigned long long b = strtoull(s, &end, 10);
	if (s[0] == '-' || end != colon || errno || b < 1 || b > EMU_MAX_BATCH) {
		snprintf(err, HN_ERR_MAX,
			 "the batch before ':' must be an integer in [1, %d] (samples per "
			 "accelerator), such as 400:0.224",
			 EMU_MAX_BATCH);
		return -EINVAL;
	}
	errno = 0;
	double t = strtod(colon + 1, &end);
	if (end == colon + 1 || *end || errno || !isfinite(t) || !(t > 0) || t > EMU_MAX_SECONDS) {
		snprintf(err, HN_ERR_MAX,
			 "the compute time after ':' must be a number of seconds per batch "
			 "above 0 and at most %.0f, such as %llu:0.224",
			 EMU_MAX_SECONDS, b);
		return -EINVAL;
	}
	snprintf(e->name, sizeof e->name, "%.31s", s);
	e->batch = (uint32_t)b;
	e->compute_s = t;
	e->au_min = 0.90;
	e->image_tiles = 0;
	return 0;
}

void hn_emulate_check_opts(struct hn_opts *o)
{
	const struct hn_emulate *e = &o->emulate;
	/* Options that only mean something to a model being trained. */
	const struct {
		int given;
		const char *opt;
	} no[] = {
		{o->given_model, "--model"},
		{o->given_optim, "--optim"},
		{o->given_lr, "--lr"},
		{o->given_wd, "--wd"},
		{o->given_sched, "--schedule"},
		{o->given_step_epochs, "--step-epochs"},
		{o->given_gamma, "--gamma"},
		{o->given_warmup, "--warmup"},
		{o->given_accum, "--accum"},
		{o->given_normalize, "--normalize"},
		{o->checkpoint != NULL, "--checkpoint"},
		{o->resume != NULL, "--resume"},
		{o->export_path != NULL, "--export"},
		{o->amp, "--amp"},
		{o->fast, "--fast"},
		{o->tf32, "--tf32"},
		{o->plan, "--plan"},
		{strcmp(o->device, "cpu") != 0, "--device"},
		{o->given_test_split && !hn_source_no_test(o->test_split), "--test-split"},
	};
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
		if (no[i].given)
			hn_die(2,
			       "%s does not apply with --emulate %s: an emulated accelerator "
			       "trains no model (it reads the training split and sleeps for the "
			       "compute time); leave %s out",
			       no[i].opt, e->name, no[i].opt);
	if (o->given_batch && (uint32_t)o->batch != e->batch)
		hn_die(2,
		       "--batch %d with --emulate %s: the profile's batch is %u samples per "
		       "accelerator, as MLPerf Storage keeps it; for another batch give "
		       "--emulate %d:SECONDS instead",
		       o->batch, e->name, e->batch, o->batch);
	o->batch = (int)e->batch;
	o->test_split = "none";
	/* DLIO's reader defaults (read_threads 1, prefetch_size 2): training's 2 loaders and 8
	 * batches ahead make N ranks 2N readers of 60 MB views, whose working set outgrows a
	 * mount's budget well before the storage is the limit (docs/HNTRAIN.md, "Sizing"). */
	if (!o->given_loaders)
		o->loaders = 1;
	if (!o->given_queue)
		o->queue = 2;
}

/* One rank's epoch. */
struct emu_epoch {
	uint64_t steps, samples;
	double wall;	   /* from before the first batch to the last compute's end */
	double compute;	   /* every step's */
	double wait;	   /* blocked on the loader queue */
	double first;	   /* the first step's wait and compute (left out of AU) */
	double loader_cpu; /* the loaders' CPU time on this rank's batches */
	double au;	   /* this rank's AU */
};

/* What each rank sends at the end of an epoch, in this order. */
enum { G_STEPS, G_SAMPLES, G_WALL, G_COMPUTE, G_WAIT, G_FIRST, G_LCPU, G_AU, G_K };

struct emu {
	const struct hn_opts *o;
	const struct hn_emulate *e;
	hn_source *src;
	int rank, nranks;
	uint64_t ntrain, nb; /* samples of the split, (global) batches per epoch */
	double tile_bytes;
	FILE *logf, *ids; /* --log (rank 0), HNTRAIN_DUMP_IDS (each rank) */
	/* the run so far */
	double au_sum, wall, compute, wait, loader_cpu;
	uint64_t samples, epochs;
	double *au_epochs;
};

/* Sleep until the CLOCK_MONOTONIC time t (seconds, as sprite_now). */
static void sleep_until(double t)
{
	struct timespec ts = {.tv_sec = (time_t)t};
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/*
 * HNTRAIN_DUMP_IDS=PREFIX, a debugging aid: each rank writes PREFIX.RANK,
 * a line per batch: "EPOCH BATCH ID ID ...", the sample indices it read.
 */
static void dump_ids(struct emu *E, const struct hn_batch *b)
{
	if (!E->ids)
		return;
	fprintf(E->ids, "%" PRIu64 " %" PRIu64, b->epoch, b->index);
	for (int i = 0; i < b->n; i++)
		fprintf(E->ids, " %u", b->idx[i]);
	fputc('\n', E->ids);
}

static void run_epoch(struct emu *E, hn_loader *ld, uint64_t e, struct emu_epoch *ep)
{
	const struct hn_opts *o = E->o;
	char err[HN_ERR_MAX], label[48];
	struct sprite_progress bar;
	memset(ep, 0, sizeof *ep);
	snprintf(label, sizeof label, "epoch %" PRIu64 "/%" PRIu64, e + 1, o->epochs);
	if (!o->quiet)
		sprite_progress_start(&bar, label, E->ntrain);
	double t0 = sprite_now(), deadline = t0, first_compute = 0;
	for (uint64_t b = 0; b < E->nb; b++) {
		struct hn_batch *bt;
		double w0 = sprite_now();
		if (hn_loader_next(ld, &bt, err) < 0) {
			hn_loader_stop(ld);
			hn_die(1, "reading the data: %s", err);
		}
		double wait = sprite_now() - w0;
		/* A short share of the last global batch computes for its share of the time. */
		double c = E->e->compute_s * (double)bt->n / (double)E->e->batch;
		deadline += wait + c;
		sleep_until(deadline);
		dump_ids(E, bt);
		ep->wait += wait;
		ep->compute += c;
		ep->loader_cpu += bt->loader_cpu_s;
		ep->samples += (uint64_t)bt->n;
		ep->steps++;
		if (b == 0) {
			ep->first = wait + c;
			first_compute = c;
		}
		int n = bt->n;
		hn_loader_release(ld, bt);
		if (!o->quiet) {
			sprite_progress_add(&bar, (uint64_t)n * (uint64_t)E->nranks); /* about */
			sprite_progress_draw(&bar);
		}
	}
	ep->wall = sprite_now() - t0;
	if (!o->quiet)
		sprite_progress_end(&bar);
	/* MLPerf Storage leaves the first step out; an epoch of one step has only it. */
	int skip = ep->steps > 1;
	double den = ep->wall - (skip ? ep->first : 0);
	ep->au = den > 0 ? (ep->compute - (skip ? first_compute : 0)) / den : 0;
	if (ep->au > 1)
		ep->au = 1; /* a wake-up a few microseconds early on a short epoch */
}

/* The --log record of epoch e from every rank's numbers (all: nranks x G_K). */
static void log_epoch(struct emu *E, uint64_t e, const double *all, double wall, double au,
		      uint64_t samples, double compute, double wait, double lcpu)
{
	FILE *f = E->logf;
	fputs("{\"emulate\": ", f);
	sprite_json_fputs(f, E->e->name);
	fprintf(f,
		", \"epoch\": %" PRIu64 ", \"accelerators\": %d, \"batch\": %u, "
		"\"samples\": %" PRIu64 ", \"steps\": %" PRIu64
		", \"loaders\": %d, \"queue\": %d, ",
		e + 1, E->nranks, E->e->batch, samples, (uint64_t)all[G_STEPS], E->o->loaders,
		E->o->queue);
	hn_log_num(f, "compute_per_batch_s", E->e->compute_s, 0);
	hn_log_num(f, "wall_s", wall, 0);
	hn_log_num(f, "compute_s", compute, 0);
	hn_log_num(f, "data_wait_s", wait, 0);
	hn_log_num(f, "data_wait_share", hn_log_ratio(wait, wall), 0);
	hn_log_num(f, "loader_cpu_s", lcpu, 0);
	hn_log_num(f, "au", au, 0);
	hn_log_num(f, "au_min", E->e->au_min, 0);
	fprintf(f, "\"au_pass\": %s, ", au >= E->e->au_min ? "true" : "false");
	hn_log_num(f, "samples_per_s", hn_log_ratio((double)samples, wall), 0);
	hn_log_num(f, "mb_per_s", hn_log_ratio((double)samples * E->tile_bytes / 1e6, wall), 0);
	fputs("\"ranks\": [", f);
	for (int r = 0; r < E->nranks; r++) {
		const double *v = all + (size_t)r * G_K;
		fprintf(f, "{\"rank\": %d, \"steps\": %" PRIu64 ", \"samples\": %" PRIu64 ", ", r,
			(uint64_t)v[G_STEPS], (uint64_t)v[G_SAMPLES]);
		hn_log_num(f, "au", v[G_AU], 0);
		hn_log_num(f, "wall_s", v[G_WALL], 0);
		hn_log_num(f, "compute_s", v[G_COMPUTE], 0);
		hn_log_num(f, "data_wait_s", v[G_WAIT], 0);
		hn_log_num(f, "first_step_s", v[G_FIRST], 0);
		hn_log_num(f, "loader_cpu_s", v[G_LCPU], 1);
		fputs(r + 1 < E->nranks ? "}, " : "}]}\n", f);
	}
	if (fflush(f) != 0)
		hn_die(1, "--log %s: write error", E->o->log);
}

/* Gather every rank's epoch, print the line (rank 0), append the record. */
static void end_epoch(struct emu *E, uint64_t e, const struct emu_epoch *ep)
{
	char err[HN_ERR_MAX];
	double mine[G_K] = {
		[G_STEPS] = (double)ep->steps, [G_SAMPLES] = (double)ep->samples,
		[G_WALL] = ep->wall,	       [G_COMPUTE] = ep->compute,
		[G_WAIT] = ep->wait,	       [G_FIRST] = ep->first,
		[G_LCPU] = ep->loader_cpu,     [G_AU] = ep->au,
	};
	double *all = malloc((size_t)E->nranks * sizeof mine);
	if (!all)
		hn_die(1, "out of memory");
	if (E->nranks > 1) {
		if (hn_dist_gather_doubles(mine, G_K, all, err) < 0)
			hn_die(1, "%s", err);
	} else {
		memcpy(all, mine, sizeof mine);
	}
	double wall = 0, au = 0, compute = 0, wait = 0, lcpu = 0, au_lo = 1;
	uint64_t samples = 0;
	for (int r = 0; r < E->nranks; r++) {
		const double *v = all + (size_t)r * G_K;
		wall = v[G_WALL] > wall ? v[G_WALL] : wall;
		au += v[G_AU] / E->nranks;
		au_lo = v[G_AU] < au_lo ? v[G_AU] : au_lo;
		compute += v[G_COMPUTE] / E->nranks;
		wait += v[G_WAIT] / E->nranks;
		lcpu += v[G_LCPU] / E->nranks;
		samples += (uint64_t)v[G_SAMPLES];
	}
	E->au_epochs[E->epochs++] = au;
	E->au_sum += au;
	E->wall += wall;
	E->compute += compute;
	E->wait += wait;
	E->loader_cpu += lcpu;
	E->samples += samples;
	if (!E->o->quiet) {
		char lo[48] = "";
		if (E->nranks > 1)
			snprintf(lo, sizeof lo, " (lowest rank %.1f%%)", 100 * au_lo);
		printf("epoch %" PRIu64 "/%" PRIu64 "  AU %.1f%%%s %s  %.0f samples/s  %.1f MB/s  "
		       "compute %.2f s  data wait %.3f s (%.2f%%)  loaders cpu %.2f s\n",
		       e + 1, E->o->epochs, 100 * au, lo, au >= E->e->au_min ? "pass" : "FAIL",
		       hn_log_ratio((double)samples, wall),
		       hn_log_ratio((double)samples * E->tile_bytes / 1e6, wall), compute, wait,
		       100 * hn_log_ratio(wait, wall), lcpu);
	}
	if (E->logf)
		log_epoch(E, e, all, wall, au, samples, compute, wait, lcpu);
	free(all);
}

static void log_final(struct emu *E, double au, const hn_source *src)
{
	FILE *f = E->logf;
	fputs("{\"final\": true, \"emulate\": ", f);
	sprite_json_fputs(f, E->e->name);
	fprintf(f,
		", \"accelerators\": %d, \"batch\": %u, \"epochs\": %" PRIu64
		", \"samples\": %" PRIu64 ", ",
		E->nranks, E->e->batch, E->epochs, E->samples);
	hn_log_num(f, "compute_per_batch_s", E->e->compute_s, 0);
	hn_log_num(f, "wall_s", E->wall, 0);
	hn_log_num(f, "compute_s", E->compute, 0);
	hn_log_num(f, "data_wait_s", E->wait, 0);
	hn_log_num(f, "data_wait_share", hn_log_ratio(E->wait, E->wall), 0);
	hn_log_num(f, "loader_cpu_s", E->loader_cpu, 0);
	hn_log_num(f, "au", au, 0);
	hn_log_num(f, "au_min", E->e->au_min, 0);
	fprintf(f, "\"au_pass\": %s, \"au_epochs\": [", au >= E->e->au_min ? "true" : "false");
	for (uint64_t k = 0; k < E->epochs; k++)
		fprintf(f, "%s%.6g", k ? ", " : "", E->au_epochs[k]);
	fputs("], ", f);
	hn_log_num(f, "samples_per_s", hn_log_ratio((double)E->samples, E->wall), 0);
	hn_log_num(f, "mb_per_s", hn_log_ratio((double)E->samples * E->tile_bytes / 1e6, E->wall),
		   0);
	hn_log_num(f, "tile_bytes", E->tile_bytes, 0);
	fputs("\"source\": ", f);
	sprite_json_fputs(f, hn_source_info(src)->kind);
	fputs("}\n", f);
	if (fflush(f) != 0)
		hn_die(1, "--log %s: write error", E->o->log);
}

/* The set-up that can fail with a message and nothing to unwind but E. */
static int emu_setup(struct emu *E)
{
	const struct hn_opts *o = E->o;
	const struct hn_source_info *di = hn_source_info(E->src);
	uint64_t gb = (uint64_t)E->e->batch * (uint64_t)E->nranks;
	E->ntrain = di->count[HN_SPLIT_TRAIN];
	E->nb = hn_batches(E->ntrain, (int)gb);
	E->tile_bytes = (double)di->h * di->w * di->c;
	if (E->ntrain < gb)
		return hn_error("--emulate %s with %d accelerator%s: a global batch of %" PRIu64
				" samples (%d x %u) does not split over the ranks: the training "
				"split has %" PRIu64
				"; every accelerator needs a full batch per step. Use fewer ranks "
				"(mpirun -np %" PRIu64
				"), a smaller batch (--emulate BATCH:SECONDS) "
				"or more data",
				E->e->name, E->nranks, E->nranks == 1 ? "" : "s", gb, E->nranks,
				E->e->batch, E->ntrain,
				E->ntrain / E->e->batch ? E->ntrain / E->e->batch : 1);
	E->au_epochs = calloc(o->epochs ? o->epochs : 1, sizeof(double));
	if (!E->au_epochs)
		return hn_error("out of memory");
	const char *dump = getenv("HNTRAIN_DUMP_IDS");
	if (dump && *dump) {
		char path[4096];
		snprintf(path, sizeof path, "%s.%d", dump, E->rank);
		if (!(E->ids = fopen(path, "w")))
			return hn_error("HNTRAIN_DUMP_IDS %s: %s", path, strerror(errno));
	}
	if (o->log && E->rank == 0 && !(E->logf = fopen(o->log, "a")))
		return hn_error("--log %s: %s", o->log, strerror(errno));
	return 0;
}

static void emu_free(struct emu *E)
{
	if (E->ids && fclose(E->ids) != 0)
		hn_error("HNTRAIN_DUMP_IDS: write error");
	if (E->logf)
		fclose(E->logf);
	free(E->au_epochs);
}

int hn_emulate_run(const struct hn_opts *o, hn_source *src)
{
	const struct hn_dist_info *d = hn_dist();
	struct emu E = {.o = o, .e = &o->emulate, .src = src, .rank = d->rank, .nranks = d->size};
	char err[HN_ERR_MAX];
	int ok = emu_setup(&E) == 0;
	/* Every rank sets up alike; one that cannot stops them all (its message said why). */
	int agreed = E.nranks > 1 ? hn_dist_agree(ok, 0, err) : 0;
	if (agreed < 0) {
		if (ok && E.rank == 0)
			fprintf(stderr, "%s: %s\n", HN_PROG, err);
		if (agreed == -EINVAL) /* every rank answered: leave together */
			hn_dist_finalize();
		emu_free(&E);
		return -1;
	}
	if (!ok) {
		emu_free(&E);
		return -1;
	}
	const struct hn_source_info *di = hn_source_info(src);
	if (!o->quiet) {
		printf("data: %s\n", hn_source_describe(src));
		printf("      %" PRIu64 " train samples, tiles %ux%ux%u\n", E.ntrain, di->h, di->w,
		       di->c);
		printf("emulate: %d x %s, batch %u per accelerator, %.4g s of compute per batch "
		       "(%.0f samples/s each), AU to pass %.0f%%; %d loader%s, queue %d\n",
		       E.nranks, E.e->name, E.e->batch, E.e->compute_s, E.e->batch / E.e->compute_s,
		       100 * E.e->au_min, o->loaders, o->loaders == 1 ? "" : "s", o->queue);
		if (!E.e->image_tiles && E.e->name[0] >= 'a' && E.e->name[0] <= 'z')
			printf("note: %s's samples are not 224x224x3 images; these tiles keep its "
			       "steps per second, not its bytes per sample\n",
			       E.e->name);
	}
	struct hn_loader_config lc = {
		.src = src,
		.aug = o->augment.spec[0] ? &o->augment : NULL,
		.nloaders = o->loaders,
		.queue = o->queue + 1, /* --queue batches ahead of the one computing */
		.batch = o->batch,
		.seed = o->seed,
		.window = o->window,
		.first_epoch = 0,
		.end_epoch = o->stop_after ? o->stop_after : o->epochs,
		.eval = 0,
		.mask = &o->loader_mask,
		.rank = E.rank,
		.nranks = E.nranks,
	};
	hn_loader *ld = NULL;
	if (hn_loader_start(&lc, &ld, err) < 0)
		hn_die(1, "%s", err);
	for (uint64_t e = 0; e < lc.end_epoch; e++) {
		struct emu_epoch ep;
		run_epoch(&E, ld, e, &ep);
		end_epoch(&E, e, &ep);
	}
	hn_loader_stop(ld);
	double au = E.epochs ? E.au_sum / (double)E.epochs : 0;
	if (E.rank == 0)
		printf("emulated %d x %s: AU %.1f%% over %" PRIu64 " epoch%s: %s (>= %.0f%%), "
		       "%.0f samples/s, %.1f MB/s, data wait %.2f%%\n",
		       E.nranks, E.e->name, 100 * au, E.epochs, E.epochs == 1 ? "" : "s",
		       au >= E.e->au_min ? "PASS" : "FAIL", 100 * E.e->au_min,
		       hn_log_ratio((double)E.samples, E.wall),
		       hn_log_ratio((double)E.samples * E.tile_bytes / 1e6, E.wall),
		       100 * hn_log_ratio(E.wait, E.wall));
	if (E.logf)
		log_final(&E, au, src);
	emu_free(&E);
	hn_dist_finalize();
	return 0;
}
