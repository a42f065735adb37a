/*
 * train.c - the epoch loop: batches from the loader queue to the backend,
 * the learning-rate schedule, the evaluation after each epoch, and the
 * per-epoch line, --log record and --checkpoint.
 *
 * This thread takes ready batches from the loader queue and hands them to
 * the backend; the time it spends blocked on the queue is data wait, the
 * time inside the backend calls is compute, and the two are reported apart
 * per epoch, which is the point of the program. One step (train_step) is
 * one batch: with --accum K the gradients of K batches are summed and the
 * K-th applies them, so steps count optimizer updates, not batches.
 * Everything that decides the numbers (the order, --augment, dropout)
 * derives from --seed, the epoch, the position in its order and the step
 * count, so a resumed run continues bit for bit, also from a checkpoint
 * written inside an epoch: that one is written at an optimizer step
 * boundary (--checkpoint-every, or a signal), where the backend holds no
 * partial gradient sum, and records the global batches of the epoch done.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/progress.h"
#include "common/safe_open.h"
#include "common/util.h"
#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/dist.h"
#include "trainer/loader.h"
#include "trainer/log.h"
#include "trainer/model.h"
#include "trainer/options.h"
#include "trainer/train.h"

#define HN_LOSS_DIVERGED 1e4 /* mean loss per sample; ln(classes) is where training starts */

/*
 * The signals that ask for a checkpoint (with --checkpoint): SIGTERM and
 * SIGINT stop the run at the next step boundary (stop_sig: which), SIGUSR1
 * asks for one and the run goes on. Another SIGTERM or SIGINT at least
 * HN_KILL_AFTER_S seconds after the first kills at once, as without
 * --checkpoint; copies that come together are one request (a scheduler
 * signals every process of a job, and mpirun passes its copy on too).
 */
#define HN_KILL_AFTER_S 2
static volatile sig_atomic_t stop_sig, save_req, stop_when;

static void on_signal(int sig)
{
	struct timespec ts;
	if (sig == SIGUSR1) {
		save_req = 1;
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
	if (stop_sig) {
		if (ts.tv_sec - stop_when >= HN_KILL_AFTER_S) {
			signal(sig, SIG_DFL);
			raise(sig);
		}
		return;
	}
	stop_when = (sig_atomic_t)ts.tv_sec;
	stop_sig = sig;
}

static void catch_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART; /* the loaders' reads and the ranks' waits go on */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
}

/*
 * HNTRAIN_RAISE_AT_BATCH=N[:SIG], a testing aid: this process raises SIG
 * (TERM, INT, USR1 or KILL; TERM by default) to itself just before it trains
 * global batch N of the run (epoch e's batch b is e * batches per epoch +
 * b), so that a test can land a real signal on a chosen batch.
 */
static uint64_t raise_at = UINT64_MAX;
static int raise_sig = SIGTERM;

static void read_raise_at(void)
{
	const char *s = getenv("HNTRAIN_RAISE_AT_BATCH");
	char *end;
	if (!s || !*s)
		return;
	raise_at = strtoull(s, &end, 10);
	if (*end == ':')
		raise_sig = !strcmp(end + 1, "INT")    ? SIGINT
			    : !strcmp(end + 1, "USR1") ? SIGUSR1
			    : !strcmp(end + 1, "KILL") ? SIGKILL /* a crash: no checkpoint */
						       : SIGTERM;
}

/* One epoch's counts, summed over its steps. */
struct epoch {
	uint64_t e; /* 0-based */
	double wait, compute, comm, loss, lr;
	double augment;	   /* loader CPU time on --augment for this epoch's batches */
	double loader_cpu; /* loader CPU time on this epoch's batches, augment included */
	uint64_t correct, seen;
	uint64_t seen0; /* of seen, those a mid-epoch checkpoint had counted (not this process's) */
	struct sprite_progress bar;
};

double hn_lr_at(const struct hn_opts *o, uint64_t s, uint64_t steps_per_epoch, uint64_t total)
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

/*
 * The batches of one pass as this thread takes them. Batch b comes off the
 * queue (or was taken ahead); when another batch of the pass follows, that
 * one is taken now too and announced to the backend (stage, backend.h), so
 * that a gpu copies it to the device while b computes. Every backend takes
 * this path, so the order and the results cannot depend on whether a
 * backend stages. The ring has a slot for the batch held ahead beyond
 * --queue (loader_config), so the loaders still read --queue batches ahead
 * of the two this thread holds. Both waits are data wait.
 */
struct feed {
	hn_loader *ld;
	const struct hn_backend_ops *be;
	void *st;
	struct hn_batch *ahead;
	const char *what; /* "reading the data", for errors */
};

static struct feed feed_start(hn_loader *ld, const struct hn_backend_ops *be, void *st,
			      const char *what)
{
	return (struct feed){.ld = ld, .be = be, .st = st, .what = what};
}

/*
 * The next batch of the pass; the time spent waiting is added to *wait
 * (unless NULL). NULL with the message printed on a failure (the caller
 * unwinds; the loader's owner stops it).
 */
static struct hn_batch *feed_next(struct feed *f, int more, double *wait)
{
	char err[HN_ERR_MAX];
	double t0 = sprite_now();
	struct hn_batch *bt = f->ahead;
	f->ahead = NULL;
	if (!bt && hn_loader_next(f->ld, &bt, err) < 0) {
		hn_error("%s: %s", f->what, err);
		return NULL;
	}
	if (more) {
		if (hn_loader_next(f->ld, &f->ahead, err) < 0) {
			f->ahead = NULL;
			hn_error("%s: %s", f->what, err);
			return NULL;
		}
		int rc = f->be->stage && f->ahead->n > 0
				 ? f->be->stage(f->st, f->ahead->tiles, f->ahead->labels,
						f->ahead->n)
				 : 0;
		if (rc < 0) {
			hn_error("%s: the backend cannot stage a batch: %s", f->what,
				 strerror(-rc));
			return NULL;
		}
	}
	if (wait)
		*wait += sprite_now() - t0;
	return bt;
}

int hn_evaluate(hn_loader *ld, const struct hn_backend_ops *be, void *st, uint64_t nb,
		struct hn_eval *r)
{
	char err[HN_ERR_MAX];
	double t0 = sprite_now();
	memset(r, 0, sizeof *r);
	struct feed f = feed_start(ld, be, st, "reading the test data");
	for (uint64_t b = 0; b < nb; b++) {
		struct hn_batch *bt = feed_next(&f, b + 1 < nb, NULL); /* timed whole (secs) */
		if (!bt)
			return -1;
		struct hn_step_result res = {0};
		int rc = bt->n ? be->evaluate(st, bt->tiles, bt->labels, bt->n, &res) : 0;
		if (rc < 0)
			return hn_error("evaluation failed: %s", strerror(-rc));
		r->loss += res.loss_sum;
		r->correct += (uint64_t)res.correct;
		r->seen += (uint64_t)bt->n;
		hn_loader_release(ld, bt);
	}
	/* Each rank evaluated its share: the sums over the ranks. */
	int N = hn_dist()->size;
	double mine[3] = {r->loss, (double)r->correct, (double)r->seen}, *all = NULL;
	if (N > 1) {
		all = malloc((size_t)N * sizeof mine);
		if (!all || hn_dist_gather_doubles(mine, 3, all, err) < 0) {
			free(all);
			return hn_error("%s", all ? err : "out of memory");
		}
		r->loss = 0;
		r->correct = r->seen = 0;
		for (int k = 0; k < N; k++) {
			r->loss += all[3 * k];
			r->correct += (uint64_t)all[3 * k + 1];
			r->seen += (uint64_t)all[3 * k + 2];
		}
		free(all);
	}
	r->secs = sprite_now() - t0;
	return 0;
}

void hn_train_init(struct hn_train *t, const struct hn_checkpoint *ck)
{
	const struct hn_opts *o = t->o;
	const struct hn_source_info *di = hn_source_info(t->src);
	t->ntrain = di->count[HN_SPLIT_TRAIN];
	t->ntest = di->count[HN_SPLIT_TEST];
	if (t->nranks < 1)
		t->nranks = 1;
	t->gbatch = (uint64_t)o->batch * (uint64_t)t->nranks;
	t->nb_train = hn_batches(t->ntrain, (int)t->gbatch);
	t->nb_test = hn_batches(t->ntest, (int)t->gbatch);
	t->steps_per_epoch = (t->nb_train + (uint64_t)o->accum - 1) / (uint64_t)o->accum;
	t->total_steps = t->steps_per_epoch * o->epochs;
	t->first_epoch = o->resume ? ck->epoch : 0;
	t->end_epoch = o->stop_after ? o->stop_after : o->epochs;
	t->step = o->resume ? ck->step : 0;
	t->first_step = t->step;
	t->first_batch = o->resume ? ck->batch_in_epoch : 0;
	t->ck = ck;
	t->stopped = 0;
	t->next_check = 0; /* at the first step boundary */
	t->check_step = t->step;
	t->check_time = sprite_now();
	t->micro = 0;
	t->pending = 0;
	t->wall_s = t->compute_s = t->data_wait_s = t->comm_s = 0;
	t->samples = 0;
	t->test_acc = -1;
}

/*
 * The samples a batch's gradients are averaged over: those the batch holds,
 * or with --accum or several ranks those its (global) group plans (a batch
 * short of image files that did not decode is then weighted a little less).
 */
static int group_samples(const struct hn_train *t, int n, uint64_t g0, uint64_t g_end)
{
	uint64_t s_end = g_end * t->gbatch;
	if (t->o->accum == 1 && t->nranks == 1)
		return n;
	return (int)((s_end < t->ntrain ? s_end : t->ntrain) - g0 * t->gbatch);
}

/*
 * A mean cross-entropy above HN_LOSS_DIVERGED means logits wrong by that
 * much: the run has diverged even if the stable loss has not overflowed to
 * NaN yet.
 */
static int check_loss(const struct hn_train *t, const struct hn_step_result *res, int n, uint64_t e,
		      uint64_t b, double lr)
{
	double mean = res->loss_sum / (n ? n : 1);
	if (isfinite(mean) && mean <= HN_LOSS_DIVERGED)
		return 0;
	return hn_error("the loss became %s at epoch %" PRIu64 ", step %" PRIu64 " (batch %" PRIu64
			"): training diverged; try a lower --lr (now %g)",
			isnan(mean)   ? "NaN"
			: isinf(mean) ? "infinite"
				      : "huge",
			e + 1, t->step + 1, b, lr);
}

/*
 * HNTRAIN_DUMP_BATCH=FILE.npy, a debugging aid: the first training batch
 * of the run as the backend gets it (after --augment), uint8 (n, h, w, c).
 */
static int dump_batch(const struct hn_train *t, const struct hn_batch *b)
{
	const char *path = getenv("HNTRAIN_DUMP_BATCH");
	if (!path || !*path)
		return 0;
	const struct hn_source_info *si = hn_source_info(t->src);
	char hdr[128];
	int k = snprintf(hdr, sizeof hdr,
			 "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %u, %u, %u), }",
			 b->n, si->h, si->w, si->c);
	int total = (k + 10 + 1 + 63) / 64 * 64; /* magic 6, version 2, length 2, '\n' */
	memset(hdr + k, ' ', (size_t)(total - 10 - k - 1));
	hdr[total - 10 - 1] = '\n';
	uint8_t pre[10] = {0x93,
			   'N',
			   'U',
			   'M',
			   'P',
			   'Y',
			   1,
			   0,
			   (uint8_t)(total - 10),
			   (uint8_t)((total - 10) >> 8)};
	/* written as every output is (safe_open.h): never through a link planted at FILE */
	struct sprite_outfile o;
	char why[SPRITE_ERR_MAX];
	size_t bytes = (size_t)b->n * si->h * si->w * si->c;
	int r = sprite_outfile_open(&o, path, 0644, 0, why);
	if (r == 0 && ((r = sprite_write_full(o.fd, pre, 10)) < 0 ||
		       (r = sprite_write_full(o.fd, hdr, (size_t)(total - 10))) < 0 ||
		       (r = sprite_write_full(o.fd, b->tiles, bytes)) < 0)) {
		snprintf(why, sizeof why, "%s", strerror(-r));
		sprite_outfile_abort(&o);
	} else if (r == 0) {
		r = sprite_outfile_commit(&o, why);
	}
	if (r < 0)
		return hn_error("HNTRAIN_DUMP_BATCH %s: cannot write it: %s", path, why);
	return 0;
}

/*
 * A gradient sum on the devices failed (NCCL gave up after
 * HNTRAIN_DIST_TIMEOUT, cuda/ranks.c): NCCL cannot say which rank did not
 * answer, the cpu path can. Every rank that is still here calls this; the
 * one that does not answer is named ("; no answer from rank 1 ..."), or ""
 * when every rank answers.
 */
static const char *roll_call(const struct hn_train *t)
{
	static char why[HN_ERR_MAX + 2];
	char err[HN_ERR_MAX];
	double here = 1, *all = malloc((size_t)t->nranks * sizeof here);
	why[0] = 0;
	if (all && hn_dist_gather_doubles(&here, 1, all, err) < 0)
		snprintf(why, sizeof why, "; %s", err);
	free(all);
	return why;
}

/*
 * One batch b of the epoch: wait for it (data wait), hand it to the backend
 * (compute), count it. The batch that ends its --accum group applies the
 * summed gradients and takes an optimizer step.
 *
 * Data-parallel (several ranks): each rank computes its share's gradients
 * without applying them; at the end of the group the backend's gradient
 * buffer is summed over the ranks (in rank order, dist.h) and then applied.
 * The time of that sum is a third share beside data wait and compute
 * (communication), summed into ep like the other two.
 */
static int train_step(struct hn_train *t, struct feed *f, struct epoch *ep, uint64_t b)
{
	const struct hn_opts *o = t->o;
	char err[HN_ERR_MAX];
	if (ep->e * t->nb_train + b == raise_at)
		raise(raise_sig);
	struct hn_batch *bt = feed_next(f, b + 1 < t->nb_train, &ep->wait);
	if (!bt)
		return -1;
	double t1 = sprite_now();
	ep->augment += bt->augment_s;
	ep->loader_cpu += bt->loader_cpu_s;
	if (t->micro == 0 && dump_batch(t, bt) < 0)
		return -1;

	uint64_t g0 = b - b % (uint64_t)o->accum;
	uint64_t g_end = g0 + (uint64_t)o->accum;
	if (g_end > t->nb_train)
		g_end = t->nb_train;
	int group = group_samples(t, bt->n, g0, g_end);
	int apply = b + 1 == g_end;
	ep->lr = hn_lr_at(o, t->step, t->steps_per_epoch, t->total_steps);
	/*
	 * Non-applying calls get their own dropout stream, outside the step
	 * range: numbered by the batch's place in the run, so that a resumed
	 * run draws what the uninterrupted one draws.
	 */
	uint64_t sidx = apply ? t->step + 1 : (1ull << 63) | (ep->e * t->nb_train + b);
	struct hn_step_result res = {0};
	int rc = 0, dist = t->nranks > 1, here = apply && !dist;
	/*
	 * A batch whose every file failed to decode: nothing to learn from, but
	 * the step still counts (the schedule and --resume count steps), and
	 * gradients already summed in its group are applied.
	 */
	if (bt->n > 0 || (here && t->pending))
		rc = t->be->train_step(t->st, bt->tiles, bt->labels, bt->n, group, here,
				       (float)ep->lr, sidx, &res);
	t->pending = apply ? 0 : t->pending + (bt->n > 0);
	double t2 = sprite_now();
	if (rc < 0)
		return hn_error("epoch %" PRIu64 ", batch %" PRIu64 ": the backend failed: %s",
				ep->e + 1, b, strerror(-rc));
	/*
	 * The host's time in the call, also on a gpu: the call waits for its
	 * kernels, and the time it takes to launch them is compute too (the
	 * device's own busy time, res.compute_s, leaves that out).
	 */
	ep->compute += t2 - t1;
	if (apply && dist) {
		/* every rank applies, even one whose share was empty */
		float *g = t->be->grads ? t->be->grads(t->st) : NULL; /* threads' parts folded */
		double tc = sprite_now();
		ep->compute += tc - t2;
		if (g ? hn_dist_sum_floats(g, t->m->nparams, err) < 0
		      : t->be->dist_sum_grads(t->st, err) < 0) /* on the device (hntrain.c) */
			return hn_error("epoch %" PRIu64 ", batch %" PRIu64 ": %s%s", ep->e + 1, b,
					err, g ? "" : roll_call(t));
		double t3 = sprite_now();
		ep->comm += t3 - tc;
		rc = t->be->train_step(t->st, NULL, NULL, 0, group, 1, (float)ep->lr, sidx, NULL);
		if (rc < 0)
			return hn_error("epoch %" PRIu64 ", batch %" PRIu64
					": the backend failed: %s",
					ep->e + 1, b, strerror(-rc));
		ep->compute += sprite_now() - t3;
	}
	if (check_loss(t, &res, bt->n, ep->e, b, ep->lr) < 0)
		return -1;

	ep->loss += res.loss_sum;
	ep->correct += (uint64_t)res.correct;
	ep->seen += (uint64_t)bt->n;
	t->micro++;
	if (apply)
		t->step++;
	int n = bt->n;
	hn_loader_release(f->ld, bt); /* a loader may refill it now */
	if (!o->quiet) {
		sprite_progress_add(&ep->bar, (uint64_t)n * (uint64_t)t->nranks); /* about */
		sprite_progress_draw(&ep->bar);
	}
	return 0;
}

/*
 * Write --checkpoint (rank 0; every rank calls it, for the sums): after
 * epoch e (0-based) when done is 0, else after `done` global batches of it,
 * with the epoch's counts so far summed over the ranks. The weights and
 * optimizer state are read back from the backend.
 */
static int save_checkpoint(struct hn_train *t, uint64_t e, uint64_t done, const struct epoch *ep,
			   enum hn_ckpt_reason why)
{
	const struct hn_opts *o = t->o;
	const struct hn_model *m = t->m;
	char err[HN_ERR_MAX];
	double sums[3] = {(double)ep->seen, (double)ep->correct, ep->loss};
	if (done && t->nranks > 1) {
		double *all = malloc((size_t)t->nranks * sizeof sums);
		if (!all || hn_dist_gather_doubles(sums, 3, all, err) < 0) {
			free(all);
			return hn_error("%s", all ? err : "out of memory");
		}
		sums[0] = sums[1] = sums[2] = 0;
		for (int r = 0; r < t->nranks; r++)
			for (int k = 0; k < 3; k++)
				sums[k] += all[3 * r + k];
		free(all);
	}
	t->last_save = sprite_now();
	if (t->rank != 0)
		return 0;
	struct hn_checkpoint c = {
		.in_c = m->in_c,
		.in_h = m->in_h,
		.in_w = m->in_w,
		.nclasses = m->nclasses,
		.nparams = m->nparams,
		.optim = o->optim,
		.epoch = done ? e : e + 1,
		.step = t->step,
		.seed = o->seed,
		.batch = (uint32_t)o->batch,
		.accum = (uint32_t)o->accum,
		.window = o->window,
		.nranks = (uint32_t)t->nranks,
		.train_count = t->ntrain,
		.has_schedule = 1,
		.sched = (uint32_t)o->sched,
		.lr = o->lr,
		.gamma = o->gamma,
		.step_epochs = o->step_epochs,
		.warmup = o->warmup,
		.epochs = o->epochs,
		.batch_in_epoch = done,
		.ep_seen = done ? (uint64_t)sums[0] : 0,
		.ep_correct = done ? (uint64_t)sums[1] : 0,
		.ep_loss = done ? sums[2] : 0,
		.reason = why,
		.data_fp = t->data_fp,
		.params = t->params,
	};
	snprintf(c.spec, sizeof c.spec, "%s", o->model);
	if (!hn_source_no_test(o->test_split))
		snprintf(c.test_split, sizeof c.test_split, "%.16s", o->test_split);
	snprintf(c.augment, sizeof c.augment, "%s", o->augment.spec);
	if (o->norm.mode != HN_NORM_NONE)
		for (int k = 0; k < o->norm.nch; k++) {
			c.norm_mean[k] = o->norm.mean[k];
			c.norm_std[k] = o->norm.std[k];
		}
	size_t per = (size_t)hn_optim_state_per_param(o->optim.kind);
	c.opt = malloc((m->nparams * per + 1) * sizeof(float));
	int rc = 0;
	if (!c.opt || t->be->get_params(t->st, t->params) < 0 ||
	    (per && t->be->get_opt_state(t->st, c.opt) < 0))
		rc = hn_error("--checkpoint: cannot read the state back from the backend");
	else if (hn_checkpoint_save(o->checkpoint, &c, err) < 0)
		rc = hn_error("--checkpoint: %s", err);
	free(c.opt);
	return rc;
}

/*
 * Whether any rank was asked to stop (*stop) or to checkpoint (*save): the
 * ranks decide together, at the same step boundary, since a signal or a
 * clock reaches each at another time. One sum of three floats over the
 * ranks, which also carries rank 0's choice of the step of the next one
 * (t->next_check): about HN_CHECK_S seconds of steps later, so that the
 * exchange costs little where steps are short (a stop then comes within
 * that time plus a step).
 */
#define HN_CHECK_S 0.02
static int agree_requests(struct hn_train *t, int *stop, int *save)
{
	char err[HN_ERR_MAX];
	if (t->nranks < 2)
		return 0;
	double now = sprite_now();
	uint64_t every = 1;
	if (t->rank == 0 && t->step > t->check_step && now > t->check_time) {
		double per_step = (now - t->check_time) / (double)(t->step - t->check_step);
		double k = ceil(HN_CHECK_S / per_step);
		every = k < 1 ? 1 : k > 1000 ? 1000 : (uint64_t)k;
	}
	/* a rank with HNTRAIN_RAISE_AT_BATCH asks for every step: the stop lands where tests put it
	 */
	float f[4] = {(float)(*stop != 0), (float)(*save != 0), t->rank == 0 ? (float)every : 0,
		      (float)(raise_at != UINT64_MAX)};
	if (hn_dist_sum_floats(f, 4, err) < 0)
		return hn_error("%s", err);
	*stop = f[0] > 0;
	*save = f[1] > 0;
	t->check_step = t->step;
	t->check_time = now;
	t->next_check = t->step + (f[3] > 0 ? 1 : (uint64_t)f[2]);
	return 0;
}

/* The run stops after its checkpoint: say where, and how to go on. */
static void say_stopped(const struct hn_train *t, uint64_t e, uint64_t done)
{
	if (t->rank != 0)
		return;
	int sig = stop_sig ? stop_sig : SIGTERM;
	char where[96];
	if (done)
		snprintf(where, sizeof where,
			 "inside epoch %" PRIu64 ", after batch %" PRIu64 " of %" PRIu64, e + 1,
			 done, t->nb_train);
	else
		snprintf(where, sizeof where, "after epoch %" PRIu64, e + 1);
	fprintf(stderr,
		"%s%s: %s: stopped %s (step %" PRIu64 "); checkpoint written to %s: continue "
		"with --resume %s (exit %d)\n",
		isatty(STDERR_FILENO) ? "\r\033[K" : "", HN_PROG,
		sig == SIGINT ? "SIGINT" : "SIGTERM", where, t->step, t->o->checkpoint,
		t->o->checkpoint, HN_EXIT_STOPPED);
}

/*
 * After the optimizer step that ends global batch `done` of epoch ep->e: a
 * checkpoint when --checkpoint-every or SIGUSR1 asks for one, and the stop
 * that SIGTERM or SIGINT asked for. 1 when the run stops here, -1 on a
 * failure (its message printed). At the
 * epoch's end only a stop writes one here (before the evaluation); else the
 * end of the epoch writes its own.
 */
static int step_boundary(struct hn_train *t, const struct epoch *ep, uint64_t done)
{
	const struct hn_opts *o = t->o;
	if (!o->checkpoint)
		return 0;
	int stop = 0, save = 0;
	if (t->nranks < 2 || t->step >= t->next_check) { /* the ranks' turn to compare */
		stop = stop_sig != 0;
		save = save_req != 0;
		if (save)
			save_req = 0;
		if (o->ckpt_every_s > 0 && t->rank == 0 &&
		    sprite_now() - t->last_save >= o->ckpt_every_s)
			save = 1;
		if (agree_requests(t, &stop, &save) < 0)
			return -1;
	}
	if (o->ckpt_every_steps && t->step % o->ckpt_every_steps == 0)
		save = 1; /* every rank knows: nothing to compare */
	if (!stop && (!save || done == t->nb_train))
		return 0;
	if (save_checkpoint(t, ep->e, done, ep, stop ? HN_CKPT_SIGNAL : HN_CKPT_EVERY) < 0)
		return -1;
	if (!stop)
		return 0;
	say_stopped(t, ep->e, done);
	t->stopped = 1;
	return 1;
}

/*
 * Several ranks: ep's counts summed over them, its times their mean, each
 * rank's times into rt (nranks entries).
 */
static int sum_ranks(const struct hn_train *t, struct epoch *ep, struct hn_rank_times *rt)
{
	enum { SEEN, LOSS, CORRECT, WAIT, COMPUTE, COMM, LCPU, K };
	char err[HN_ERR_MAX];
	int N = t->nranks;
	double mine[K] = {(double)ep->seen, ep->loss, (double)ep->correct, ep->wait,
			  ep->compute,	    ep->comm, ep->loader_cpu};
	double *all = malloc((size_t)N * sizeof mine);
	if (!all || hn_dist_gather_doubles(mine, K, all, err) < 0) {
		free(all);
		return hn_error("%s", all ? err : "out of memory");
	}
	memset(mine, 0, sizeof mine);
	for (int r = 0; r < N; r++) {
		for (int k = 0; k < K; k++)
			mine[k] += all[r * K + k];
		rt[r] = (struct hn_rank_times){
			.compute_s = all[r * K + COMPUTE],
			.data_wait_s = all[r * K + WAIT],
			.comm_s = all[r * K + COMM],
			.loader_cpu_s = all[r * K + LCPU],
		};
	}
	free(all);
	ep->seen = (uint64_t)mine[SEEN];
	ep->loss = mine[LOSS];
	ep->correct = (uint64_t)mine[CORRECT];
	ep->wait = mine[WAIT] / N;
	ep->compute = mine[COMPUTE] / N;
	ep->comm = mine[COMM] / N;
	ep->loader_cpu = mine[LCPU] / N;
	return 0;
}

/* The end of an epoch: add it to the run's totals, print its line, append it to --log. */
static int end_epoch(struct hn_train *t, struct epoch *ep, double wall, const struct hn_eval *ev)
{
	const struct hn_opts *o = t->o;
	struct hn_rank_times rt[t->nranks];
	if (t->nranks > 1 && sum_ranks(t, ep, rt) < 0)
		return -1;
	uint64_t seen = ep->seen, tseen = ev->seen;
	struct hn_epoch_stats es = {
		.epoch = ep->e + 1,
		.samples = seen,
		.steps = t->step,
		.wall_s = wall,
		.compute_s = ep->compute,
		.data_wait_s = ep->wait,
		.comm_s = ep->comm,
		.nranks = t->nranks,
		.rank = rt,
		.augment_s = ep->augment,
		.loader_cpu_s = ep->loader_cpu,
		.eval_s = ev->secs,
		.train_loss = seen ? ep->loss / (double)seen : 0,
		.train_acc = seen ? (double)ep->correct / (double)seen : 0,
		.test_loss = tseen ? ev->loss / (double)tseen : -1,
		.test_acc = tseen ? (double)ev->correct / (double)tseen : -1,
		.lr = ep->lr,
	};
	t->test_acc = es.test_acc;
	t->wall_s += wall;
	for (int k = 0; k < HN_NREACH; k++)
		if (!t->reach_epoch[k] && tseen && es.test_acc >= hn_reach_acc[k]) {
			t->reach_epoch[k] = ep->e + 1;
			t->reach_s[k] = t->wall_s;
		}
	t->compute_s += ep->compute;
	t->data_wait_s += ep->wait;
	t->comm_s += ep->comm;
	t->augment_s += ep->augment;
	t->loader_cpu_s += ep->loader_cpu;
	t->samples += seen - ep->seen0;
	if (!o->quiet) {
		char testbuf[32] = "test -", commbuf[64] = "";
		if (tseen)
			snprintf(testbuf, sizeof testbuf, "test %.2f%%", 100 * es.test_acc);
		if (t->nranks > 1)
			snprintf(commbuf, sizeof commbuf, "  comm %.3f s (%.2f%%)", ep->comm,
				 wall > 0 ? 100 * ep->comm / wall : 0);
		printf("epoch %" PRIu64 "/%" PRIu64 "  loss %.4f  train %.2f%%  %s  "
		       "%.0f samples/s  compute %.2f s  data wait %.3f s (%.2f%%)%s  "
		       "loaders cpu %.2f s (%.0f%%)",
		       ep->e + 1, o->epochs, es.train_loss, 100 * es.train_acc, testbuf,
		       wall > 0 ? (double)(seen - ep->seen0) / wall : 0, ep->compute, ep->wait,
		       wall > 0 ? 100 * ep->wait / wall : 0, commbuf, ep->loader_cpu,
		       wall > 0 ? 100 * ep->loader_cpu / wall : 0);
		if (o->augment.spec[0])
			printf("  augment %.3f s (%.2f%%)", ep->augment,
			       wall > 0 ? 100 * ep->augment / wall : 0);
		putchar('\n');
	}
	if (t->logf && hn_log_epoch(t->logf, &es) < 0)
		return hn_error("--log %s: write error", o->log);
	return 0;
}

/*
 * Epoch e (0-based): its training batches, then the test split, the line,
 * --log, --checkpoint. The first epoch of a resumed run starts at the
 * checkpoint's batch, with its counts so far (rank 0 holds them, as the
 * sums over the ranks). Returns early with t->stopped set when a signal
 * stopped the run; -1 on a failure, its message printed.
 */
static int train_epoch(struct hn_train *t, hn_loader *ld, uint64_t e)
{
	const struct hn_opts *o = t->o;
	struct epoch ep = {.e = e};
	uint64_t b0 = e == t->first_epoch ? t->first_batch : 0;
	if (b0 && t->rank == 0) {
		ep.seen = ep.seen0 = t->ck->ep_seen;
		ep.correct = t->ck->ep_correct;
		ep.loss = t->ck->ep_loss;
	}
	char label[48];
	snprintf(label, sizeof label, "epoch %" PRIu64 "/%" PRIu64, e + 1, o->epochs);
	if (!o->quiet) {
		sprite_progress_start(&ep.bar, label, t->ntrain);
		uint64_t done = b0 * t->gbatch;
		sprite_progress_add(&ep.bar, done < t->ntrain ? done : t->ntrain);
	}
	double t_epoch = sprite_now();
	struct feed f = feed_start(ld, t->be, t->st, "reading the data");
	for (uint64_t b = b0; b < t->nb_train; b++) {
		int rc = train_step(t, &f, &ep, b);
		if (rc == 0 && ((b + 1) % (uint64_t)o->accum == 0 || b + 1 == t->nb_train))
			rc = step_boundary(t, &ep, b + 1);
		/* stopped (1) or failed (-1): the loaders are stopped next */
		if (rc != 0) {
			if (f.ahead) /* taken ahead, never trained */
				hn_loader_release(ld, f.ahead);
			if (!o->quiet)
				sprite_progress_end(&ep.bar);
			return rc < 0 ? -1 : 0;
		}
	}
	double wall = sprite_now() - t_epoch;
	if (!o->quiet)
		sprite_progress_end(&ep.bar);

	struct hn_eval ev;
	if (hn_evaluate(ld, t->be, t->st, t->nb_test, &ev) < 0 || end_epoch(t, &ep, wall, &ev) < 0)
		return -1;
	if (o->checkpoint) {
		if (save_checkpoint(t, e, 0, &ep, HN_CKPT_EPOCH_END) < 0)
			return -1;
		/* a stop asked for during the evaluation: the epoch's checkpoint is the place */
		int stop = stop_sig != 0, save = 0;
		if (agree_requests(t, &stop, &save) < 0)
			return -1;
		if (stop && e + 1 < t->end_epoch) {
			say_stopped(t, e, 0);
			t->stopped = 1;
		}
	}
	return 0;
}

static void loader_config(const struct hn_train *t, struct hn_loader_config *lc)
{
	const struct hn_opts *o = t->o;
	*lc = (struct hn_loader_config){
		.src = t->src,
		.aug = o->augment.spec[0] ? &o->augment : NULL,
		.nloaders = o->loaders,
		/* one slot more than --queue: the batch fed ahead (struct feed) holds one */
		.queue = o->queue + 1,
		.batch = o->batch,
		.seed = o->seed,
		.window = o->window,
		.first_epoch = t->first_epoch,
		.end_epoch = t->end_epoch,
		.first_batch = t->first_batch,
		.eval = t->ntest > 0,
		.mask = &o->loader_mask,
		.rank = t->rank,
		.nranks = t->nranks,
	};
}

/*
 * The checkpoint has every epoch the run asks for (resume refuses fewer):
 * evaluate it, the way to ask a checkpoint for its accuracy.
 */
static int evaluate_only(struct hn_train *t)
{
	const struct hn_opts *o = t->o;
	char err[HN_ERR_MAX];
	if (!o->quiet) {
		char why[64] = "";
		if (t->end_epoch < o->epochs)
			snprintf(why, sizeof why, ", where --stop-after %" PRIu64 " stops",
				 t->end_epoch);
		printf("nothing to train: %s has %" PRIu64 " of %" PRIu64 " epochs%s; %s\n",
		       o->resume, t->first_epoch, o->epochs, why,
		       t->ntest ? "evaluating it on the test split"
				: "no test split to evaluate it on");
	}
	if (!t->ntest)
		return 0;
	struct hn_loader_config lc;
	hn_loader *ld = NULL;
	loader_config(t, &lc);
	lc.eval_only = 1;
	if (hn_loader_start(&lc, &ld, err) < 0)
		return hn_error("%s", err);
	struct hn_eval ev;
	int rc = hn_evaluate(ld, t->be, t->st, t->nb_test, &ev);
	if (hn_loader_stop(ld))
		t->abandoned = 1;
	if (rc < 0)
		return -1;
	if (ev.seen)
		t->test_acc = (double)ev.correct / (double)ev.seen;
	if (!o->quiet && ev.seen)
		printf("epoch %" PRIu64 "/%" PRIu64 "  test %.2f%%  test loss %.4f  (%" PRIu64
		       " samples evaluated in %.2f s)\n",
		       t->first_epoch, o->epochs, 100 * t->test_acc, ev.loss / (double)ev.seen,
		       ev.seen, ev.secs);
	return 0;
}

int hn_train_run(struct hn_train *t)
{
	char err[HN_ERR_MAX];
	struct hn_loader_config lc;
	hn_loader *ld = NULL;
	if (t->first_epoch >= t->end_epoch)
		return evaluate_only(t);
	if (t->o->checkpoint)
		catch_signals();
	read_raise_at();
	t->last_save = sprite_now();
	loader_config(t, &lc);
	if (hn_loader_start(&lc, &ld, err) < 0)
		return hn_error("%s", err);
	int rc = 0;
	for (uint64_t e = t->first_epoch; rc == 0 && e < t->end_epoch && !t->stopped; e++)
		rc = train_epoch(t, ld, e);
	if (hn_loader_stop(ld))
		t->abandoned = 1;
	return rc;
}
