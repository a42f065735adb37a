/*
 * agree.c - what the ranks of a data-parallel run must have alike, and the
 * data's fingerprint that a checkpoint keeps.
 *
 * Two ranks that differ in a setting that changes the numbers (the weight
 * decay, --augment, the tile, the data's content) would train together
 * without a word and end with weights that neither setting gives. So every
 * such setting is one line of text, "--wd 0.0005"; the start-up agreement
 * (hn_dist_agree) compares a hash of all of them, and when a rank differs
 * the ranks compare each line's hash, so that rank 0 names the first
 * differing setting and the rank. The data is named by a fingerprint of
 * its content: a few samples (first, middle and last of each split, tiles
 * and labels) read through the source, the same on every medium (store,
 * mount, folder, IDX), so that two nodes with different data of the same
 * shape are told apart. The checkpoint keeps the fingerprint too, so that
 * --resume on other data of the same shape is refused.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "trainer/data.h"
#include "trainer/dist.h"
#include "trainer/train.h"

enum { NSET = 24, SET_MAX = 200 };

uint64_t hn_data_fingerprint(hn_source *src)
{
	const struct hn_source_info *di = hn_source_info(src);
	size_t tb = (size_t)di->h * di->w * di->c;
	uint64_t fp = 0x5350524954454650ull; /* "SPRITEFP" */
	for (int split = HN_SPLIT_TRAIN; split <= HN_SPLIT_TEST; split++) {
		uint64_t n = di->count[split];
		if (n == 0 || n > UINT32_MAX)
			continue;
		uint32_t idx[3] = {0, (uint32_t)(n / 2), (uint32_t)(n - 1)};
		uint16_t labels[3] = {0};
		uint8_t *tiles = calloc(3, tb ? tb : 1);
		struct hn_batch b = {.split = split,
				     .view = HN_NO_VIEW,
				     .n = 3,
				     .idx = idx,
				     .tiles = tiles,
				     .labels = labels};
		char err[HN_ERR_MAX];
		int got = tiles ? hn_source_read(src, &b, err) : -ENOMEM;
		uint64_t h[3] = {fp, (uint64_t)(int64_t)got, 0};
		if (got > 0)
			h[2] = sprite_checksum(tiles, (size_t)got * tb) ^
			       (sprite_checksum(labels, (size_t)got * sizeof *labels) << 1);
		fp = sprite_checksum(h, sizeof h);
		free(tiles);
	}
	return fp ? fp : 1; /* 0 means "not recorded" in a checkpoint */
}

/* The settings, one line each ("--wd 0.0005"), into s (NSET lines); the count. */
static int settings(const struct hn_opts *o, const hn_source *src, const struct hn_model *m,
		    const struct hn_checkpoint *ck, uint64_t data_fp, char s[][SET_MAX])
{
	const struct hn_source_info *di = src ? hn_source_info(src) : NULL;
	const struct hn_optim *op = &o->optim;
	int k = 0;
	snprintf(s[k++], SET_MAX, "--model %.150s (%zu parameters)", o->model, m ? m->nparams : 0);
	snprintf(s[k++], SET_MAX, "--optim %d", (int)op->kind);
	snprintf(s[k++], SET_MAX, "--lr %.17g", o->lr);
	snprintf(s[k++], SET_MAX, "--momentum %.7g, adam's betas %.7g %.7g, eps %.7g", op->momentum,
		 op->beta1, op->beta2, op->eps);
	snprintf(s[k++], SET_MAX, "--wd %.7g", op->weight_decay);
	snprintf(s[k++], SET_MAX,
		 "--schedule %d --gamma %.17g --step-epochs %" PRIu64 " --warmup %" PRIu64,
		 (int)o->sched, o->gamma, o->step_epochs, o->warmup);
	snprintf(s[k++], SET_MAX, "--epochs %" PRIu64 " --stop-after %" PRIu64, o->epochs,
		 o->stop_after);
	snprintf(s[k++], SET_MAX, "--seed %" PRIu64, o->seed);
	snprintf(s[k++], SET_MAX, "--batch %d --accum %d", o->batch, o->accum);
	snprintf(s[k++], SET_MAX, "--window %u", o->window);
	snprintf(s[k++], SET_MAX, "--augment %s", o->augment.spec);
	int nch = o->norm.mode == HN_NORM_NONE ? 0 : o->norm.nch;
	snprintf(s[k++], SET_MAX, "--normalize %d: %.7g:%.7g %.7g:%.7g %.7g:%.7g %.7g:%.7g",
		 nch ? (int)o->norm.mode : 0, nch > 0 ? o->norm.mean[0] : 0,
		 nch > 0 ? o->norm.std[0] : 0, nch > 1 ? o->norm.mean[1] : 0,
		 nch > 1 ? o->norm.std[1] : 0, nch > 2 ? o->norm.mean[2] : 0,
		 nch > 2 ? o->norm.std[2] : 0, nch > 3 ? o->norm.mean[3] : 0,
		 nch > 3 ? o->norm.std[3] : 0);
	snprintf(s[k++], SET_MAX, "--tile %ux%ux%u --fit %d", o->tile_h, o->tile_w, o->tile_c,
		 (int)o->fit);
	snprintf(s[k++], SET_MAX, "--split %.60s --test-split %.60s", o->split,
		 o->test_split ? o->test_split : "");
	snprintf(s[k++], SET_MAX, "--limit %" PRIu64 " --test-limit %" PRIu64, o->limit,
		 o->test_limit);
	snprintf(s[k++], SET_MAX, "--strict %d --skip-bad-sheets %d", o->strict,
		 o->skip_bad_sheets);
	snprintf(s[k++], SET_MAX, "--threads %d", o->threads);
	snprintf(s[k++], SET_MAX, "--device %.20s --amp %d --fast %d --tf32 %d", o->device, o->amp,
		 o->fast, o->tf32);
	snprintf(s[k++], SET_MAX, "--checkpoint %s --checkpoint-every %" PRIu64 " %.17g",
		 o->checkpoint ? "given" : "none", o->ckpt_every_steps, o->ckpt_every_s);
	snprintf(s[k++], SET_MAX,
		 "--resume: epoch %" PRIu64 " step %" PRIu64 " batch %" PRIu64
		 " weights %016" PRIx64,
		 o->resume ? ck->epoch : 0, o->resume ? ck->step : 0,
		 o->resume ? ck->batch_in_epoch : 0,
		 o->resume && ck->params ? sprite_checksum(ck->params, ck->nparams * sizeof(float))
					 : 0);
	if (di) {
		snprintf(s[k++], SET_MAX, "the data set's name (%.60s)", di->name);
		snprintf(s[k++], SET_MAX,
			 "the data's shape (%ux%ux%u tiles, %u classes, %" PRIu64 " + %" PRIu64
			 " samples)",
			 di->h, di->w, di->c, di->nclasses, di->count[0], di->count[1]);
		snprintf(s[k++], SET_MAX, "the data's content (fingerprint %016" PRIx64 ")",
			 data_fp);
	}
	return k;
}

int hn_agree_settings(const struct hn_opts *o, const hn_source *src, const struct hn_model *m,
		      const struct hn_checkpoint *ck, uint64_t data_fp, int ok, char *err)
{
	char s[NSET][SET_MAX];
	int k = ok ? settings(o, src, m, ck, data_fp, s) : 0;
	uint64_t all = 0;
	for (int i = 0; i < k; i++)
		all = sprite_checksum(s[i], strlen(s[i])) ^ (all * 0x9E3779B97F4A7C15ull);
	int rc = hn_dist_agree(ok, ok ? all : 0, err);
	/*
	 * Every rank started and the hashes differ (dist_mpi.c's message then
	 * quotes them; every rank takes the same decision from the same
	 * answers): each line's hash (32 bits, exact in a double) from every
	 * rank, so that the first differing setting is named. When a rank could
	 * not start, it has left after the agreement (hn_dist_stop_early): no
	 * second round.
	 */
	if (rc != -EINVAL || !strstr(err, " (hash "))
		return rc;
	const int N = hn_dist()->size;
	double mine[1 + NSET], *every = malloc((size_t)N * sizeof mine);
	char e2[HN_ERR_MAX];
	mine[0] = ok ? k : -1;
	for (int i = 0; i < NSET; i++)
		mine[1 + i] = i < k ? (double)(sprite_checksum(s[i], strlen(s[i])) >> 32) : 0;
	if (!every || hn_dist_gather_doubles(mine, 1 + NSET, every, e2) < 0) {
		free(every);
		return rc;
	}
	for (int r = 1; ok && hn_dist()->rank == 0 && r < N; r++) {
		const double *their = every + (size_t)r * (1 + NSET);
		if (their[0] != k)
			continue;
		for (int i = 0; i < k; i++)
			if (their[1 + i] != mine[1 + i]) {
				/* dist's "rank 1 on H has other settings or data than rank 0
				 * on H0", then which */
				char *cut = strstr(err, " (hash ");
				if (cut)
					*cut = 0;
				snprintf(e2, sizeof e2, "%.120s", cut ? err : "");
				snprintf(err, HN_ERR_MAX,
					 "%.120s%srank %d differs in %.90s (rank 0's)", e2,
					 e2[0] ? ": " : "", r, s[i]);
				r = N;
				break;
			}
	}
	free(every);
	return rc;
}
