/*
 * backend_cpu.c - the "cpu" backend: layers.h's im2col + OpenBLAS layers run
 * over a model description, with every buffer allocated once at create.
 *
 * Memory: parameters, gradients and optimizer state are one allocation each
 * (laid out as hn_model says; Adam's state is m for all params, then v). All
 * activations, their gradients, im2col matrices, pooling indices, dropout
 * masks and GEMM scratch live in one arena sized for cfg->max_batch, so a
 * step never calls malloc.
 *
 * Threads: samples are independent through forward, loss and backward, so
 * the batch is split between the members of a thread team (team.c), each
 * running the whole network on its own samples with single-threaded
 * OpenBLAS calls and adding its weight gradients into its own buffer
 * (member 0 into the real one). A step is then one dispatch, plus one at
 * update time that folds the members' gradients in and runs the optimizer on
 * a slice of the parameters each. This beats OpenBLAS's own threading here:
 * the layers are small, and im2col, pooling and the reorders get both cores
 * too. OpenBLAS is therefore set to one thread for the whole process.
 *
 * Cache: every layer before the first dense one, or before the first of
 * small maps and many channels (wide_and_small), the spatial stage, runs in
 * chunks of a few samples, so a chunk's activations, im2col matrix and GEMM
 * scratch stay in the core's L2; gradients inside that stage only ever hold
 * one chunk. A ReLU after a conv, dense, add or batchnorm layer is fused
 * into it, and every ReLU runs in place. A conv keeps its forward im2col
 * matrix for the filter gradient unless all of them would take more than
 * KEEP_COL_BYTES (large images), in which case backward rebuilds it. A 3x3 stride-1 conv of 16 or
 * more input channels runs by Winograd's F(2x2, 3x3) instead (wino.c): its
 * transformed input takes the im2col matrix's place, its transformed filters
 * are made once per update (wu), and its filter gradient is gathered per
 * member in that domain (du) and turned into the weights' before the fold.
 *
 * Determinism: the split of samples and parameters depends only on the
 * thread count and batch size, every reduction runs in a fixed order, and
 * single-threaded sgemm is deterministic, so the same seed, data order and
 * thread count give bit-identical weights.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "trainer/cpu_int.h"
#include "trainer/model_check.h"

#define KEEP_COL_BYTES (512ULL << 20)
#define ARENA_ALIGN    64
#define CHUNK_BYTES    (2ULL << 20)
#define CHUNK_MIN      4

/* Hand out arena space: with base == NULL only counts, so one function plans and assigns. */
static void *take(char *base, size_t *at, size_t bytes)
{
	void *p = base ? base + *at : NULL;
	*at += (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	return p;
}

/*
 * From such a layer on (maps of at most 8x8, and 256 channels or more, or a
 * conv whose filters, Winograd-transformed where it runs so, outgrow
 * CHUNK_BYTES) the filters outweigh a chunk's activations many times over,
 * so each pass over them should serve all the member's rows, not a chunk:
 * there the chunked stage ends. resnet18 at 28x28 took 11% less CPU;
 * resnet-fm's last 3x3 conv (128 channels on 4x4, 2.4 MB of F(4x4)
 * filters, read again for every 4-sample chunk) 30% less.
 */
static int wide_and_small(const struct cpu_state *st, int i)
{
	const struct hn_layer *l = &st->m.layers[i];
	if (l->in_h * l->in_w > 64)
		return 0;
	if (l->in_c >= 256)
		return 1;
	if (l->kind != HN_LAYER_CONV2D)
		return 0;
	size_t wf = st->wino[i] ? hn_wino_u_floats(l) : (size_t)l->w_len;
	return wf * sizeof(float) > CHUNK_BYTES;
}

/*
 * Spatial stage and its chunk size: as many samples as keep one chunk's
 * activations, gradients, im2col and GEMM scratch within CHUNK_BYTES (about
 * a core's L2), but at least CHUNK_MIN so the GEMMs stay wide. HN_CPU_CHUNK
 * overrides it (tuning, and tests that force small chunks).
 */
static void pick_chunk(struct cpu_state *st)
{
	const struct hn_model *m = &st->m;
	size_t per = 0;
	st->stage = 0;
	while (st->stage < m->nlayers && m->layers[st->stage].kind != HN_LAYER_DENSE &&
	       !wide_and_small(st, st->stage))
		st->stage++;
	for (int i = 0; i < st->stage; i++) {
		const struct hn_layer *l = &m->layers[i];
		per += (l->kind == HN_LAYER_SAVE ? 4 : 3) * out_floats(l) * sizeof(float);
		if (l->kind == HN_LAYER_CONV2D)
			per += 2 * hn_conv2d_col_floats(l, 1) * sizeof(float);
	}
	size_t c = per ? CHUNK_BYTES / per : (size_t)st->max_batch;
	if (c < CHUNK_MIN)
		c = CHUNK_MIN;
	const char *env = getenv("HN_CPU_CHUNK");
	if (env && atoi(env) > 0)
		c = (size_t)atoi(env);
	if (st->stage == 0) /* no spatial stage: chunks only set the split between members */
		c = 1;
	st->chunk = c > (size_t)st->max_batch ? st->max_batch : (int)c;
	long nchunks = (st->max_batch + st->chunk - 1) / st->chunk;
	st->rows = (int)(((nchunks + st->nthreads - 1) / st->nthreads) * st->chunk);
	if (st->rows > st->max_batch)
		st->rows = st->max_batch;
}

static size_t layout(struct cpu_state *st, char *base)
{
	const struct hn_model *m = &st->m;
	const size_t B = (size_t)st->max_batch, C = (size_t)st->chunk, R = (size_t)st->rows;
	size_t at = 0, max_tmp = 0, max_col = 0, max_ws = 0;

	/*
	 * Gradients inside the spatial stage live only while their chunk is
	 * processed, so they take one chunk; after it, one member's rows. A
	 * batchnorm's output gradient is summed over the member's rows before
	 * its input gradient can be made, and an add may write the gradient of
	 * a main path's end a batchnorm cut before it is read: those hold all
	 * the rows. A ReLU shares its input's buffer, so the two sizes are made
	 * one.
	 */
	for (int i = 0; i <= m->nlayers; i++)
		st->dfull[i] = i >= st->stage || i == m->nlayers;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		if (l->kind == HN_LAYER_BATCHNORM)
			st->dfull[i + 1] = 1;
		if (l->kind == HN_LAYER_ADD && m->layers[l->shortcut - 1].kind != HN_LAYER_SAVE)
			st->dfull[l->shortcut] = 1;
	}
	for (int changed = 1; changed;) {
		changed = 0;
		for (int i = 0; i < m->nlayers; i++)
			if (m->layers[i].kind == HN_LAYER_RELU && st->dfull[i] != st->dfull[i + 1])
				st->dfull[i] = st->dfull[i + 1] = changed = 1;
	}

	st->act[0] = take(base, &at, sizeof(float) * B * m->in_c * m->in_h * m->in_w);
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		size_t of = out_floats(l), rows = i < st->stage ? C : R;
		/* a ReLU runs in place, except on a block's input X, which its add reads */
		int alias = l->kind == HN_LAYER_SAVE ||
			    (l->kind == HN_LAYER_RELU &&
			     !(i && m->layers[i - 1].kind == HN_LAYER_SAVE));
		st->act[i + 1] = alias ? st->act[i] : take(base, &at, sizeof(float) * B * of);
		st->col[i] = NULL;
		st->idx[i] = NULL;
		st->mask[i] = NULL;
		if (l->kind == HN_LAYER_CONV2D) {
			if (st->keep_col)
				st->col[i] =
					take(base, &at, sizeof(float) * kept_floats(st, i, (int)B));
			size_t cf = hn_conv2d_col_floats(l, (int)rows);
			if (cf > max_col)
				max_col = cf;
			size_t wf = st->wino[i] ? hn_wino_ws_floats(l, (int)rows) : 0;
			if (wf > max_ws)
				max_ws = wf;
		}
		st->wu[i] =
			st->wino[i] ? take(base, &at, sizeof(float) * hn_wino_u_floats(l)) : NULL;
		if (l->kind == HN_LAYER_MAXPOOL)
			st->idx[i] = take(base, &at, sizeof(int32_t) * B * of);
		if (l->kind == HN_LAYER_DROPOUT)
			st->mask[i] = take(base, &at, sizeof(float) * B * of);
		st->bn_mean[i] = st->bn_invstd[i] = st->bn_mdy[i] = st->bn_mdyx[i] = NULL;
		if (l->kind == HN_LAYER_BATCHNORM) {
			st->bn_mean[i] = take(base, &at, sizeof(float) * l->in_c);
			st->bn_invstd[i] = take(base, &at, sizeof(float) * l->in_c);
			st->bn_mdy[i] = take(base, &at, sizeof(float) * l->in_c);
			st->bn_mdyx[i] = take(base, &at, sizeof(float) * l->in_c);
		}
		if (rows * of > max_tmp)
			max_tmp = rows * of;
	}
	st->probs = take(base, &at, sizeof(float) * B * m->nclasses);
	for (int t = 0; t < st->nthreads; t++) {
		struct member_buf *mb = &st->mb[t];
		mb->tmp = take(base, &at, sizeof(float) * max_tmp);
		mb->dcol = take(base, &at, sizeof(float) * max_col);
		mb->col = st->keep_col ? NULL : take(base, &at, sizeof(float) * max_col);
		mb->ws = max_ws ? take(base, &at, sizeof(float) * max_ws) : NULL;
		mb->dact[0] = NULL;
		for (int i = 0; i < m->nlayers; i++) {
			const struct hn_layer *l = &m->layers[i];
			mb->dact[i + 1] = l->kind == HN_LAYER_RELU
						  ? mb->dact[i]
						  : take(base, &at,
							 sizeof(float) * out_floats(l) *
								 (st->dfull[i + 1] ? R : C));
		}
		mb->grads = t ? take(base, &at, sizeof(float) * m->nparams) : NULL;
		for (int i = 0; i < m->nlayers; i++) {
			mb->bnp[i] =
				m->layers[i].kind == HN_LAYER_BATCHNORM
					? take(base, &at, 2 * sizeof(double) * m->layers[i].in_c)
					: NULL;
			mb->du[i] = st->wino[i]
					    ? take(base, &at,
						   sizeof(float) * hn_wino_u_floats(&m->layers[i]))
					    : NULL;
			mb->dskip[i] = m->layers[i].kind == HN_LAYER_SAVE
					       ? take(base, &at,
						      sizeof(float) * R * out_floats(&m->layers[i]))
					       : NULL;
		}
	}
	return at;
}

static void cpu_destroy(void *state)
{
	struct cpu_state *st = state;
	if (!st)
		return;
	hn_team_destroy(st->team);
	free(st->params);
	free(st->grads);
	free(st->opt);
	free(st->arena);
	free(st);
}

int hn_backend_cpu_threads(int asked)
{
	if (asked > 0)
		return asked;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > HN_TEAM_MAX ? HN_TEAM_MAX : (int)n;
}

static float *alloc_floats(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, ARENA_ALIGN, sizeof(float) * (n ? n : 1)))
		return NULL;
	memset(p, 0, sizeof(float) * (n ? n : 1));
	return p;
}

/* What create decides before it allocates (cpu_create, hn_backend_cpu_bytes). */
static void setup(struct cpu_state *st, const struct hn_model *m, const struct hn_optim *o,
		  const struct hn_backend_config *cfg)
{
	st->m = *m;
	st->o = *o;
	st->cfg = *cfg;
	st->max_batch = cfg->max_batch;
	st->nthreads = hn_backend_cpu_threads(cfg->threads);
	size_t cols = 0;
	for (int i = 0; i < m->nlayers; i++) {
		st->wino[i] = hn_wino_fits(&m->layers[i]);
		if (m->layers[i].kind == HN_LAYER_CONV2D)
			cols += kept_floats(st, i, cfg->max_batch);
	}
	st->keep_col = cols * sizeof(float) <= KEEP_COL_BYTES;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		if (l->kind != HN_LAYER_BATCHNORM)
			continue;
		st->bn_at[st->nbn++] = i;
		st->spans[st->nspans++] = (struct span){l->w_off, l->w_len + l->b_len, 0};
		st->spans[st->nspans++] = (struct span){l->s_off, l->s_len, 1};
	}
	for (int c = 0; c < HN_NORM_CH; c++)
		if (cfg->mean[c] != 0.0f || (cfg->std[c] != 0.0f && cfg->std[c] != 1.0f)) {
			st->in_mean = st->cfg.mean;
			st->in_std = st->cfg.std;
		}
	for (int c = 0; st->in_mean && c < HN_NORM_CH; c++)
		if (!(st->cfg.std[c] > 0.0f))
			st->cfg.std[c] = 1.0f;
	pick_chunk(st);
	int below[HN_MAX_LAYERS + 1] = {0}; /* below[j]: a layer under slot j has parameters */
	for (int i = 0; i < m->nlayers; i++)
		below[i + 1] = below[i] || m->layers[i].w_len > 0;
	for (int i = 0; i < m->nlayers; i++) {
		enum hn_layer_kind k = m->layers[i].kind;
		st->fused[i] = (k == HN_LAYER_CONV2D || k == HN_LAYER_DENSE || k == HN_LAYER_ADD ||
				k == HN_LAYER_BATCHNORM) &&
			       i + 1 < m->nlayers && m->layers[i + 1].kind == HN_LAYER_RELU;
		st->need_din[i] = below[m->layers[i].from ? m->layers[i].from : i];
	}
}

static int cpu_create(const struct hn_model *m, const struct hn_optim *o,
		      const struct hn_backend_config *cfg, const float *init, void **state,
		      char *err)
{
	int rc = hn_model_check(m, err);
	if (rc)
		return rc;
	if (cfg->max_batch < 1 || cfg->max_batch > (1 << 20) || cfg->threads < 0 ||
	    cfg->threads > HN_TEAM_MAX) {
		if (err)
			snprintf(err, HN_ERR_MAX,
				 "cpu backend: max batch %d or thread count %d out of range "
				 "(threads 0..%d)",
				 cfg->max_batch, cfg->threads, HN_TEAM_MAX);
		return -EINVAL;
	}
	struct cpu_state *st = calloc(1, sizeof *st);
	if (!st)
		return -ENOMEM;
	/* parallelism is ours (see the top): OpenBLAS must not start its own threads */
	openblas_set_num_threads(1);
	setup(st, m, o, cfg);
	st->nopt = m->nparams * (size_t)hn_optim_state_per_param(o->kind);
	st->params = alloc_floats(m->nparams);
	st->grads = alloc_floats(m->nparams);
	st->opt = alloc_floats(st->nopt);
	st->arena_bytes = layout(st, NULL);
	if (st->params && st->grads && st->opt &&
	    posix_memalign(&st->arena, ARENA_ALIGN, st->arena_bytes) == 0) {
		memset(st->arena, 0, st->arena_bytes);
		layout(st, st->arena);
		st->mb[0].grads = st->grads;
	} else {
		st->arena = NULL;
		cpu_destroy(st);
		if (err)
			snprintf(err, HN_ERR_MAX, "cpu backend: out of memory for model '%s'",
				 m->name);
		return -ENOMEM;
	}
	rc = hn_team_create(st->nthreads, &st->team);
	if (rc) {
		if (err)
			snprintf(err, HN_ERR_MAX, "cpu backend: cannot start %d threads",
				 st->nthreads);
		cpu_destroy(st);
		return rc;
	}
	if (init)
		memcpy(st->params, init, sizeof(float) * m->nparams);
	st->wu_stale = 1;
	snprintf(st->desc, sizeof st->desc, "cpu: %s, %d threads (%d-sample chunks)",
		 hn_backend_cpu_library(), st->nthreads, st->chunk);
	*state = st;
	return 0;
}

uint64_t hn_backend_cpu_bytes(const struct hn_model *m, const struct hn_optim *o,
			      const struct hn_backend_config *cfg)
{
	struct cpu_state *st = calloc(1, sizeof *st);
	if (!st)
		return 0;
	setup(st, m, o, cfg);
	size_t floats = m->nparams * (2 + (size_t)hn_optim_state_per_param(o->kind));
	uint64_t bytes = layout(st, NULL) + sizeof(float) * floats;
	free(st);
	return bytes;
}

/* Each member's Winograd filter gradients into its own gradients, and zeroed. */
static void dfilters_member(void *arg, int tid, int nthreads)
{
	struct cpu_state *st = arg;
	struct member_buf *mb = &st->mb[tid];
	(void)nthreads;
	for (int i = 0; i < st->m.nlayers; i++) {
		const struct hn_layer *l = &st->m.layers[i];
		if (!st->wino[i])
			continue;
		hn_wino_dfilters(mb->grads + l->w_off, mb->du[i], l);
		memset(mb->du[i], 0, sizeof(float) * hn_wino_u_floats(l));
	}
}

/* Before the members' gradients are folded: their Winograd parts in (dfilters_member). */
static void flush_dfilters(struct cpu_state *st)
{
	if (!st->du_dirty)
		return;
	hn_team_run(st->team, dfilters_member, st);
	st->du_dirty = 0;
}

/* Member tid's slice [p0, p1) of the parameters, for folding and updating. */
static int member_params(const struct cpu_state *st, int tid, int nthreads, size_t *p0, size_t *p1)
{
	const size_t np = st->m.nparams;
	long lo, hi;
	hn_team_split((long)((np + 15) / 16), tid, nthreads, &lo, &hi);
	*p0 = (size_t)lo * 16;
	*p1 = (size_t)hi * 16 < np ? (size_t)hi * 16 : np;
	return *p1 > *p0;
}

/* Fold the members' gradients of slice [p0, p1) into grads, in member order. */
static void fold_slice(struct cpu_state *st, size_t p0, size_t p1)
{
	for (int t = 1; t < st->nthreads; t++) {
		float *restrict g = st->grads, *restrict mine = st->mb[t].grads;
		for (size_t p = p0; p < p1; p++)
			g[p] += mine[p];
		memset(mine + p0, 0, sizeof(float) * (p1 - p0));
	}
}

static void fold_member(void *arg, int tid, int nthreads)
{
	struct step_job *j = arg;
	size_t p0, p1;
	if (member_params(j->st, tid, nthreads, &p0, &p1))
		fold_slice(j->st, p0, p1);
}

/* The optimizer over parameters [p0, p1), with o's settings. */
static void optim_range(struct cpu_state *st, const struct hn_optim *o, const struct step_job *j,
			size_t p0, size_t p1)
{
	const size_t np = st->m.nparams;
	if (p1 <= p0)
		return;
	float *s1 = st->nopt ? st->opt + p0 : NULL;
	float *s2 = st->nopt >= 2 * np ? st->opt + np + p0 : NULL;
	hn_optim_update(o, st->params + p0, st->grads + p0, s1, s2, p1 - p0, j->lr, j->t);
}

/*
 * Update parameters [p0, p1): the optimizer, except on the spans: batchnorm
 * gamma and beta without weight decay, and the running statistics moved
 * towards the group's batch statistics that join_sums left in their
 * gradient slots (running = (1 - m) * running + m * batch).
 */
static void update_slice(struct cpu_state *st, const struct step_job *j, size_t p0, size_t p1)
{
	struct hn_optim nodecay = st->o;
	nodecay.weight_decay = 0.0f;
	size_t p = p0;
	for (int k = 0; k < st->nspans; k++) {
		const struct span *sp = &st->spans[k];
		size_t a = sp->off > p0 ? sp->off : p0, b = sp->off + sp->len;
		if (b > p1)
			b = p1;
		if (a >= b)
			continue;
		optim_range(st, &st->o, j, p, a);
		if (sp->stats) {
			for (size_t q = a; q < b; q++) {
				st->params[q] = (1.0f - HN_BN_MOMENTUM) * st->params[q] +
						HN_BN_MOMENTUM * st->grads[q];
				st->grads[q] = 0.0f;
			}
		} else {
			optim_range(st, &nodecay, j, a, b);
		}
		p = b;
	}
	optim_range(st, &st->o, j, p, p1);
}

/* Fold the members' gradients into grads (in member order) and update, a parameter slice each. */
static void update_member(void *arg, int tid, int nthreads)
{
	struct step_job *j = arg;
	struct cpu_state *st = j->st;
	size_t p0, p1;
	if (!member_params(st, tid, nthreads, &p0, &p1))
		return;
	fold_slice(st, p0, p1);
	update_slice(st, j, p0, p1);
}

static int check_batch(const struct cpu_state *st, const uint16_t *labels, int n)
{
	if (n < 1 || n > st->max_batch)
		return -EINVAL;
	for (int s = 0; s < n; s++)
		if (labels[s] >= st->m.nclasses)
			return -EINVAL;
	return 0;
}

static void draw_masks(struct cpu_state *st, int n, uint64_t step)
{
	const struct hn_model *m = &st->m;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		if (l->kind == HN_LAYER_DROPOUT && l->p > 0.0f) {
			uint64_t salt = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL ^
					(uint64_t)st->micro << 32 ^ (uint64_t)st->cfg.rank << 48;
			hn_dropout_mask(st->mask[i], (size_t)n * out_floats(l), l->p,
					st->cfg.seed ^ salt, step);
		}
	}
}

static void sum_results(struct cpu_state *st, struct hn_step_result *res)
{
	double loss = 0;
	int correct = 0;
	for (int t = 0; t < st->nthreads; t++) {
		loss += st->mb[t].loss;
		correct += st->mb[t].correct;
	}
	if (res) {
		res->loss_sum = loss;
		res->correct = correct;
		res->compute_s = 0.0;
		res->skipped = 0;
	}
}

static int cpu_train_step(void *state, const uint8_t *tiles, const uint16_t *labels, int n,
			  int group_size, int apply, float lr, uint64_t step,
			  struct hn_step_result *res)
{
	struct cpu_state *st = state;
	/* no samples: apply what the group summed (or what cpu_grads handed out) */
	if (n == 0 && apply && (st->micro > 0 || st->folded)) {
		struct step_job j = {.st = st, .lr = lr, .t = step};
		if (res)
			memset(res, 0, sizeof *res);
		flush_dfilters(st);
		hn_team_run(st->team, update_member, &j);
		st->wu_stale = 1;
		st->micro = 0;
		st->folded = 0;
		return 0;
	}
	int rc = check_batch(st, labels, n);
	if (rc)
		return rc;
	if (group_size < 1)
		group_size = n;
	struct step_job j = {.st = st,
			     .tiles = tiles,
			     .labels = labels,
			     .n = n,
			     .train = 1,
			     .scale = 1.0f / (float)group_size,
			     .lr = lr,
			     .t = step};
	draw_masks(st, n, step);
	hn_cpu_run_step(st, &j);
	sum_results(st, res);
	st->micro++;
	st->du_dirty = 1;
	if (apply) {
		flush_dfilters(st);
		hn_team_run(st->team, update_member, &j);
		st->wu_stale = 1;
		st->micro = 0;
		st->folded = 0;
	}
	return 0;
}

/*
 * The group's gradients in one buffer: the members' folded in as
 * update_member folds them, so that summing this buffer over ranks in rank
 * order makes the additions one process with more threads makes.
 */
static float *cpu_grads(void *state)
{
	struct cpu_state *st = state;
	struct step_job j = {.st = st};
	flush_dfilters(st);
	hn_team_run(st->team, fold_member, &j);
	st->folded = 1;
	return st->grads;
}

static int cpu_evaluate(void *state, const uint8_t *tiles, const uint16_t *labels, int n,
			struct hn_step_result *res)
{
	struct cpu_state *st = state;
	int rc = check_batch(st, labels, n);
	if (rc)
		return rc;
	struct step_job j = {.st = st, .tiles = tiles, .labels = labels, .n = n, .train = 0};
	for (int k = 0; k < st->nbn; k++) { /* evaluation normalises with the running statistics */
		const struct hn_layer *l = &st->m.layers[st->bn_at[k]];
		for (int c = 0; c < l->in_c; c++) {
			st->bn_mean[st->bn_at[k]][c] = st->params[l->s_off + c];
			st->bn_invstd[st->bn_at[k]][c] =
				1.0f /
				sqrtf(fmaxf(st->params[l->s_off + l->in_c + c], 0.0f) + HN_BN_EPS);
		}
	}
	hn_cpu_run_step(st, &j);
	sum_results(st, res);
	return 0;
}

static int cpu_get_params(void *state, float *params)
{
	struct cpu_state *st = state;
	memcpy(params, st->params, sizeof(float) * st->m.nparams);
	return 0;
}

static int cpu_set_params(void *state, const float *params)
{
	struct cpu_state *st = state;
	memcpy(st->params, params, sizeof(float) * st->m.nparams);
	st->wu_stale = 1;
	return 0;
}

static int cpu_get_opt_state(void *state, float *opt)
{
	struct cpu_state *st = state;
	if (st->nopt)
		memcpy(opt, st->opt, sizeof(float) * st->nopt);
	return 0;
}

static int cpu_set_opt_state(void *state, const float *opt)
{
	struct cpu_state *st = state;
	if (st->nopt)
		memcpy(st->opt, opt, sizeof(float) * st->nopt);
	return 0;
}

const char *hn_backend_cpu_library(void)
{
	static char lib[256];
	const char *was = hn_blas_core_fell_back();
	if (!was)
		return openblas_get_config();
	if (!lib[0])
		snprintf(lib, sizeof lib,
			 "%s (OPENBLAS_CORETYPE set by hntrain: OpenBLAS took %s on this CPU)",
			 openblas_get_config(), was);
	return lib;
}

static const char *cpu_describe(void *state)
{
	struct cpu_state *st = state;
	return st->desc;
}

static uint64_t cpu_memory_bytes(void *state)
{
	struct cpu_state *st = state;
	return sizeof(float) * (2 * (uint64_t)st->m.nparams + st->nopt) + st->arena_bytes;
}

const struct hn_backend_ops hn_backend_cpu = {
	.name = "cpu",
	.create = cpu_create,
	.destroy = cpu_destroy,
	.train_step = cpu_train_step,
	.evaluate = cpu_evaluate,
	.get_params = cpu_get_params,
	.set_params = cpu_set_params,
	.get_opt_state = cpu_get_opt_state,
	.set_opt_state = cpu_set_opt_state,
	.describe = cpu_describe,
	.memory_bytes = cpu_memory_bytes,
	.grads = cpu_grads,
};
