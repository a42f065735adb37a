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
 * Cache: every layer before the first dense one (the spatial stage) runs in
 * chunks of a few samples, so a chunk's activations, im2col matrix and GEMM
 * scratch stay in the core's L2; gradients inside that stage only ever hold
 * one chunk. A ReLU after a conv or dense layer is fused into it, and every
 * ReLU runs in place. A conv keeps its forward im2col matrix for the filter
 * gradient unless all of them would take more than KEEP_COL_BYTES (large
 * images), in which case backward rebuilds it.
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

#include "trainer/backend.h"
#include "trainer/layers.h"
#include "trainer/team.h"

#define KEEP_COL_BYTES (512ULL << 20)
#define ARENA_ALIGN    64
#define CHUNK_BYTES    (2ULL << 20)
#define CHUNK_MIN      4

/* What one team member owns: its scratch, its chunk-sized gradients, its weight gradients. */
struct member_buf {
	float *tmp, *dcol, *col;	/* col: shared im2col when not kept per layer */
	float *dact[HN_MAX_LAYERS + 1]; /* gradients w.r.t. act (dact[0] unused) */
	float *grads;			/* member 0: the state's grads; others: own */
	double *bnp[HN_MAX_LAYERS];	/* batchnorm i: this member's 2 x C partial sums */
	double loss;
	int correct;
};

struct cpu_state {
	struct hn_model m;
	struct hn_optim o;
	struct hn_backend_config cfg;
	int max_batch;
	int micro;  /* micro-batches since the last apply: keeps dropout masks distinct */
	int folded; /* cpu_grads handed the group's gradients out: the next apply takes them */
	hn_team *team;
	int nthreads;

	float *params, *grads, *opt;
	size_t nopt;
	void *arena;
	size_t arena_bytes;

	float *act[HN_MAX_LAYERS + 1]; /* act[0] input, act[i+1] output of layer i (batch) */
	float *col[HN_MAX_LAYERS];     /* kept conv im2col matrices (batch), or NULL */
	int32_t *idx[HN_MAX_LAYERS];   /* maxpool argmax */
	float *mask[HN_MAX_LAYERS];    /* dropout */
	float *probs;
	struct member_buf mb[HN_TEAM_MAX];
	int fused[HN_MAX_LAYERS];     /* layer i (conv/dense) carries the ReLU i+1 */
	int dfull[HN_MAX_LAYERS + 1]; /* dact[i] holds the member's rows (else one chunk) */
	int need_din[HN_MAX_LAYERS];  /* some layer below i has parameters */
	int keep_col;
	int stage; /* layers [0, stage) are per-sample spatial layers, run in chunks */
	int chunk; /* samples per chunk in that stage */
	int rows;  /* most samples one member takes from a max_batch batch */
	/* batch normalisation: the layers, in order, and per layer the batch's numbers */
	int nbn, bn_at[HN_MAX_LAYERS];
	float *bn_mean[HN_MAX_LAYERS], *bn_invstd[HN_MAX_LAYERS]; /* C each */
	float *bn_mdy[HN_MAX_LAYERS], *bn_mdyx[HN_MAX_LAYERS];	  /* backward: batch means */
	/* parameter spans the optimizer treats apart, in offset order (see update_slice) */
	int nspans;
	struct span {
		size_t off, len;
		int stats; /* 1: running statistics; 0: trained without weight decay */
	} spans[2 * HN_MAX_LAYERS];
	const float *in_mean, *in_std; /* input normalisation, or NULL */
	char desc[200];
};

static size_t out_floats(const struct hn_layer *l)
{
	return (size_t)l->out_c * l->out_h * l->out_w;
}

static size_t in_floats(const struct hn_layer *l)
{
	return (size_t)l->in_c * l->in_h * l->in_w;
}

static int check_model(const struct hn_model *m, char *err)
{
	const char *why = NULL;
	if (m->nlayers < 1 || m->nlayers > HN_MAX_LAYERS || m->in_c < 1 || m->in_h < 1 ||
	    m->in_w < 1 || m->nclasses < 1 || m->nclasses > 65535)
		why = "bad layer count, input shape or class count";
	for (int i = 0; !why && i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		const struct hn_layer *p = i ? &m->layers[i - 1] : NULL;
		int c = p ? p->out_c : m->in_c, h = p ? p->out_h : m->in_h,
		    w = p ? p->out_w : m->in_w;
		if (l->in_c != c || l->in_h != h || l->in_w != w || l->out_c < 1 || l->out_h < 1 ||
		    l->out_w < 1)
			why = "layer shapes do not chain";
		else if (l->w_off + l->w_len > m->nparams || l->b_off + l->b_len > m->nparams)
			why = "weights outside the parameter block";
		else if (l->kind == HN_LAYER_CONV2D || l->kind == HN_LAYER_MAXPOOL) {
			if (l->k < 1 || l->stride < 1 || l->pad < 0 ||
			    (l->in_h + 2 * l->pad - l->k) / l->stride + 1 != l->out_h ||
			    (l->in_w + 2 * l->pad - l->k) / l->stride + 1 != l->out_w ||
			    l->in_h + 2 * l->pad < l->k || l->in_w + 2 * l->pad < l->k)
				why = "bad window geometry";
			else if (l->kind == HN_LAYER_CONV2D &&
				 (l->w_len != (size_t)l->out_c * l->in_c * l->k * l->k ||
				  l->b_len != (size_t)l->out_c))
				why = "conv weight size mismatch";
			else if (l->kind == HN_LAYER_MAXPOOL && (l->pad || l->out_c != l->in_c))
				why = "maxpool takes no padding and keeps channels";
		} else if (l->kind == HN_LAYER_DENSE) {
			if (l->out_h != 1 || l->out_w != 1 ||
			    l->w_len != (size_t)l->out_c * in_floats(l) ||
			    l->b_len != (size_t)l->out_c)
				why = "dense weight size mismatch";
		} else if (l->kind == HN_LAYER_RELU || l->kind == HN_LAYER_DROPOUT) {
			if (out_floats(l) != in_floats(l) || !(l->p >= 0.0f && l->p < 1.0f))
				why = "elementwise layer changes shape or has a bad rate";
		} else if (l->kind == HN_LAYER_BATCHNORM) {
			if (out_floats(l) != in_floats(l) || l->out_c != l->in_c ||
			    l->w_len != (size_t)l->in_c || l->b_len != l->w_len ||
			    l->b_off != l->w_off + l->w_len || l->s_len != 2 * l->w_len ||
			    l->s_off != l->b_off + l->b_len || l->s_off + l->s_len > m->nparams)
				why = "batchnorm parameters do not match its channels";
		} else if (l->kind == HN_LAYER_AVGPOOL) {
			if (l->out_c != l->in_c || l->out_h != 1 || l->out_w != 1 || l->w_len)
				why = "global average pooling keeps channels and has no parameters";
		} else {
			why = "unknown layer kind";
		}
	}
	if (!why) {
		const struct hn_layer *last = &m->layers[m->nlayers - 1];
		if (out_floats(last) != (size_t)m->nclasses)
			why = "last layer's output is not nclasses";
	}
	if (why) {
		if (err)
			snprintf(err, HN_ERR_MAX, "cpu backend: model '%s': %s", m->name, why);
		return -EINVAL;
	}
	return 0;
}

/* Hand out arena space: with base == NULL only counts, so one function plans and assigns. */
static void *take(char *base, size_t *at, size_t bytes)
{
	void *p = base ? base + *at : NULL;
	*at += (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	return p;
}

/* Member tid's samples of an n-sample batch: whole chunks, split as evenly as possible. */
static void member_rows(const struct cpu_state *st, int n, int tid, int *s0, int *s1)
{
	long nchunks = (n + st->chunk - 1) / st->chunk, c0, c1;
	hn_team_split(nchunks, tid, st->nthreads, &c0, &c1);
	*s0 = (int)(c0 * st->chunk);
	*s1 = (int)(c1 * st->chunk < n ? c1 * st->chunk : n);
	if (*s0 > n)
		*s0 = n;
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
	while (st->stage < m->nlayers && m->layers[st->stage].kind != HN_LAYER_DENSE)
		st->stage++;
	for (int i = 0; i < st->stage; i++) {
		const struct hn_layer *l = &m->layers[i];
		per += 3 * out_floats(l) * sizeof(float);
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
	size_t at = 0, max_tmp = 0, max_col = 0;

	/*
	 * Gradients inside the spatial stage live only while their chunk is
	 * processed, so they take one chunk; after it, one member's rows. A
	 * ReLU shares its input's buffer, so it inherits the size it aliases.
	 */
	st->dfull[m->nlayers] = 1;
	for (int i = m->nlayers - 1; i >= 0; i--)
		st->dfull[i] =
			m->layers[i].kind == HN_LAYER_RELU ? st->dfull[i + 1] : i >= st->stage;
	/*
	 * A batchnorm's output gradient is summed over the member's rows before
	 * its input gradient can be made: it holds them all, and so does every
	 * ReLU buffer that aliases it.
	 */
	for (int k = 0; k < st->nbn; k++)
		for (int i = st->bn_at[k] + 1; i <= m->nlayers; i++) {
			st->dfull[i] = 1;
			if (i >= m->nlayers || m->layers[i].kind != HN_LAYER_RELU)
				break;
		}

	st->act[0] = take(base, &at, sizeof(float) * B * m->in_c * m->in_h * m->in_w);
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		size_t of = out_floats(l), rows = i < st->stage ? C : R;
		st->act[i + 1] = l->kind == HN_LAYER_RELU ? st->act[i] /* in place */
							  : take(base, &at, sizeof(float) * B * of);
		st->col[i] = NULL;
		st->idx[i] = NULL;
		st->mask[i] = NULL;
		if (l->kind == HN_LAYER_CONV2D) {
			if (st->keep_col)
				st->col[i] = take(base, &at,
						  sizeof(float) * hn_conv2d_col_floats(l, (int)B));
			size_t cf = hn_conv2d_col_floats(l, (int)rows);
			if (cf > max_col)
				max_col = cf;
		}
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
		for (int i = 0; i < m->nlayers; i++)
			mb->bnp[i] =
				m->layers[i].kind == HN_LAYER_BATCHNORM
					? take(base, &at, 2 * sizeof(double) * m->layers[i].in_c)
					: NULL;
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

static float *alloc_floats(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, ARENA_ALIGN, sizeof(float) * (n ? n : 1)))
		return NULL;
	memset(p, 0, sizeof(float) * (n ? n : 1));
	return p;
}

static int cpu_create(const struct hn_model *m, const struct hn_optim *o,
		      const struct hn_backend_config *cfg, const float *init, void **state,
		      char *err)
{
	int rc = check_model(m, err);
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
	st->m = *m;
	st->o = *o;
	st->cfg = *cfg;
	st->max_batch = cfg->max_batch;
	st->nthreads = cfg->threads;
	if (st->nthreads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		st->nthreads = n < 1 ? 1 : n > HN_TEAM_MAX ? HN_TEAM_MAX : (int)n;
	}
	/* parallelism is ours (see the top): OpenBLAS must not start its own threads */
	openblas_set_num_threads(1);

	size_t cols = 0;
	for (int i = 0; i < m->nlayers; i++)
		if (m->layers[i].kind == HN_LAYER_CONV2D)
			cols += hn_conv2d_col_floats(&m->layers[i], cfg->max_batch);
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
	for (int i = 0; i < m->nlayers; i++) {
		enum hn_layer_kind k = m->layers[i].kind;
		st->fused[i] = (k == HN_LAYER_CONV2D || k == HN_LAYER_DENSE) &&
			       i + 1 < m->nlayers && m->layers[i + 1].kind == HN_LAYER_RELU;
		st->need_din[i] = i > 0 && (st->need_din[i - 1] || m->layers[i - 1].w_len > 0);
	}

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
	snprintf(st->desc, sizeof st->desc, "cpu: %s, %d threads (%d-sample chunks)",
		 openblas_get_config(), st->nthreads, st->chunk);
	*state = st;
	return 0;
}

static float *act_at(struct cpu_state *st, int i, int s0)
{
	const struct hn_model *m = &st->m;
	size_t per = i ? out_floats(&m->layers[i - 1]) : (size_t)m->in_c * m->in_h * m->in_w;
	return st->act[i] + (size_t)s0 * per;
}

/* Member gradients: full-size ones are indexed from the member's first row r0. */
static float *dact_at(struct cpu_state *st, int tid, int i, int s0, int r0)
{
	const struct hn_model *m = &st->m;
	float *d = st->mb[tid].dact[i];
	if (!d)
		return NULL;
	size_t per = out_floats(&m->layers[i - 1]);
	return st->dfull[i] ? d + (size_t)(s0 - r0) * per : d;
}

static float *col_at(struct cpu_state *st, int tid, int i, int s0)
{
	return st->keep_col ? st->col[i] + (size_t)s0 * hn_conv2d_col_floats(&st->m.layers[i], 1)
			    : st->mb[tid].col;
}

/* Layers [a, b) forward on samples [s0, s0 + n), by member tid. Dropout masks are drawn. */
static void forward_range(struct cpu_state *st, int tid, int a, int b, int s0, int n, int train)
{
	const struct hn_model *m = &st->m;
	for (int i = a; i < b; i++) {
		const struct hn_layer *l = &m->layers[i];
		const float *in = act_at(st, i, s0);
		float *out = act_at(st, i + 1, s0);
		size_t of = out_floats(l), count = (size_t)n * of;
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			hn_conv2d_forward(out, col_at(st, tid, i, s0), st->mb[tid].tmp, in,
					  st->params + l->w_off, st->params + l->b_off, n, l,
					  st->fused[i]);
			break;
		case HN_LAYER_DENSE:
			hn_dense_forward(out, in, st->params + l->w_off, st->params + l->b_off, n,
					 l, st->fused[i]);
			break;
		case HN_LAYER_MAXPOOL:
			hn_maxpool_forward(out, st->idx[i] + (size_t)s0 * of, in, n, l);
			break;
		case HN_LAYER_RELU:
			if (!(i > 0 && st->fused[i - 1]))
				hn_relu_forward(out, in, count);
			break;
		case HN_LAYER_DROPOUT:
			if (train && l->p > 0.0f)
				hn_dropout_forward(out, in, st->mask[i] + (size_t)s0 * of, count);
			else
				memcpy(out, in, sizeof(float) * count);
			break;
		case HN_LAYER_BATCHNORM:
			hn_batchnorm_forward(out, in, st->bn_mean[i], st->bn_invstd[i],
					     st->params + l->w_off, st->params + l->b_off, n, l);
			break;
		case HN_LAYER_AVGPOOL:
			hn_avgpool_forward(out, in, n, l);
			break;
		}
	}
}

/* Layers [a, b) backward (b-1 down to a) on samples [s0, s0 + n) of member tid's rows from r0. */
static void backward_range(struct cpu_state *st, int tid, int a, int b, int s0, int n, int r0)
{
	const struct hn_model *m = &st->m;
	float *grads = st->mb[tid].grads;
	for (int i = b - 1; i >= a; i--) {
		const struct hn_layer *l = &m->layers[i];
		float *din = st->need_din[i] ? dact_at(st, tid, i, s0, r0) : NULL;
		const float *dout = dact_at(st, tid, i + 1, s0, r0);
		size_t of = out_floats(l), count = (size_t)n * of;
		float *relu_out = st->fused[i] ? act_at(st, i + 1, s0) : NULL;
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			hn_conv2d_backward(din, grads + l->w_off, grads + l->b_off,
					   col_at(st, tid, i, s0), st->mb[tid].tmp,
					   st->mb[tid].dcol, dout, relu_out, act_at(st, i, s0),
					   st->params + l->w_off, n, l, st->keep_col);
			break;
		case HN_LAYER_DENSE:
			hn_dense_backward(din, grads + l->w_off, grads + l->b_off, st->mb[tid].tmp,
					  dout, relu_out, act_at(st, i, s0), st->params + l->w_off,
					  n, l);
			break;
		case HN_LAYER_MAXPOOL:
			if (din)
				hn_maxpool_backward(din, dout, st->idx[i] + (size_t)s0 * of, n, l);
			break;
		case HN_LAYER_RELU:
			if (din && !(i > 0 && st->fused[i - 1]))
				hn_relu_backward(din, dout, act_at(st, i + 1, s0), count);
			break;
		case HN_LAYER_DROPOUT:
			if (din) {
				if (l->p > 0.0f)
					hn_dropout_backward(din, dout,
							    st->mask[i] + (size_t)s0 * of, count);
				else
					memcpy(din, dout, sizeof(float) * count);
			}
			break;
		case HN_LAYER_BATCHNORM:
			if (din)
				hn_batchnorm_backward(din, dout, act_at(st, i, s0), st->bn_mean[i],
						      st->bn_invstd[i], st->params + l->w_off,
						      st->bn_mdy[i], st->bn_mdyx[i], n, l);
			break;
		case HN_LAYER_AVGPOOL:
			if (din)
				hn_avgpool_backward(din, dout, n, l);
			break;
		}
	}
}

/*
 * One dispatch of a step to the team. Without batch normalisation a step is
 * one dispatch: forward [fa, fb), the loss, backward [ba, bb). Each
 * batchnorm layer cuts it where the whole batch must meet: the dispatch
 * before it ends by summing the layer's input (bn_fwd) or output gradient
 * (bn_bwd) over each member's rows, and the main thread joins the sums
 * before the next dispatch goes on from the layer.
 */
struct step_job {
	struct cpu_state *st;
	const uint8_t *tiles;
	const uint16_t *labels;
	int n, train;
	float scale; /* 1 / group_size */
	float lr;
	uint64_t t;
	int fa, fb;	    /* forward through layers [fa, fb) */
	int loss;	    /* then the loss (and, training, its gradient) */
	int ba, bb;	    /* then backward through layers [ba, bb) */
	int bn_fwd, bn_bwd; /* then the partial sums of this batchnorm layer, or -1 */
};

/* Layers [a, b) forward on rows [r0, r1): the spatial ones chunk by chunk, then the rest. */
static void forward_rows(struct cpu_state *st, struct step_job *j, int tid, int a, int b, int r0,
			 int r1)
{
	const struct hn_model *m = &st->m;
	const size_t tile = (size_t)m->in_c * m->in_h * m->in_w;
	const int sb = b < st->stage ? b : st->stage;
	if (a == 0 || a < sb)
		for (int s0 = r0; s0 < r1; s0 += st->chunk) {
			int cn = r1 - s0 < st->chunk ? r1 - s0 : st->chunk;
			if (a == 0)
				hn_input_forward(act_at(st, 0, s0), j->tiles + (size_t)s0 * tile,
						 cn, m->in_c, m->in_h, m->in_w, st->in_mean,
						 st->in_std);
			forward_range(st, tid, a, sb, s0, cn, j->train);
		}
	if (b > st->stage)
		forward_range(st, tid, a > st->stage ? a : st->stage, b, r0, r1 - r0, j->train);
}

/* Layers [a, b) backward on rows [r0, r1): the dense ones on all rows, then the spatial ones. */
static void backward_rows(struct cpu_state *st, int tid, int a, int b, int r0, int r1)
{
	if (b > st->stage)
		backward_range(st, tid, a > st->stage ? a : st->stage, b, r0, r1 - r0, r0);
	const int sb = b < st->stage ? b : st->stage;
	if (a < sb)
		for (int s0 = r0; s0 < r1; s0 += st->chunk) {
			int cn = r1 - s0 < st->chunk ? r1 - s0 : st->chunk;
			backward_range(st, tid, a, sb, s0, cn, r0);
		}
}

/*
 * One member's share of a dispatch: its samples through the job's forward
 * layers, the loss, and (training) backward in the reverse order, weight
 * gradients into its own buffer; then its batchnorm partial sums.
 */
static void step_member(void *arg, int tid, int nthreads)
{
	struct step_job *j = arg;
	struct cpu_state *st = j->st;
	const struct hn_model *m = &st->m;
	struct member_buf *mb = &st->mb[tid];
	const int L = m->nlayers, K = m->nclasses;
	int r0, r1;

	(void)nthreads;
	member_rows(st, j->n, tid, &r0, &r1);
	if (j->loss) {
		mb->loss = 0;
		mb->correct = 0;
	}
	int bn = j->bn_fwd >= 0 ? j->bn_fwd : j->bn_bwd;
	if (bn >= 0)
		memset(mb->bnp[bn], 0, 2 * sizeof(double) * m->layers[bn].in_c);
	if (r1 <= r0)
		return;
	forward_rows(st, j, tid, j->fa, j->fb, r0, r1);
	if (j->loss) {
		float *probs = st->probs + (size_t)r0 * K;
		mb->loss = hn_softmax_ce_forward(probs, act_at(st, L, r0), j->labels + r0, r1 - r0,
						 K, &mb->correct);
		if (j->train)
			hn_softmax_ce_backward(dact_at(st, tid, L, r0, r0), probs, j->labels + r0,
					       r1 - r0, K, j->scale);
	}
	backward_rows(st, tid, j->ba, j->bb, r0, r1);
	if (bn < 0)
		return;
	const struct hn_layer *l = &m->layers[bn];
	double *p = mb->bnp[bn];
	if (j->bn_fwd >= 0)
		hn_batchnorm_sums(p, p + l->in_c, act_at(st, bn, r0), r1 - r0, l);
	else
		hn_batchnorm_backward_sums(p, p + l->in_c, dact_at(st, tid, bn + 1, r0, r0),
					   act_at(st, bn, r0), st->bn_mean[bn], st->bn_invstd[bn],
					   r1 - r0, l);
}

/*
 * Join the members' sums of batchnorm layer i (in member order) over the n
 * samples of the step. Forward: the batch mean and 1/std the layer
 * normalises with, and the batch's mean and unbiased variance added into
 * the running statistics' gradient slots, weighted like a gradient (n *
 * scale), so that the group (and, summed over ranks, the global batch)
 * leaves its average there for update_slice. Backward: sum(dy) and
 * sum(dy * xhat) are dbeta and dgamma, and their batch means go to the
 * input gradient.
 */
static void join_sums(struct cpu_state *st, int i, int fwd, int n, float scale)
{
	const struct hn_layer *l = &st->m.layers[i];
	const int C = l->in_c;
	const double M = (double)n * l->in_h * l->in_w;
	for (int c = 0; c < C; c++) {
		double a = 0, b = 0;
		for (int t = 0; t < st->nthreads; t++) {
			a += st->mb[t].bnp[i][c];
			b += st->mb[t].bnp[i][C + c];
		}
		if (fwd) {
			double mean = a / M, var = b / M - mean * mean;
			if (var < 0)
				var = 0;
			st->bn_mean[i][c] = (float)mean;
			st->bn_invstd[i][c] = (float)(1.0 / sqrt(var + HN_BN_EPS));
			double unbiased = M > 1 ? var * M / (M - 1) : var;
			st->grads[l->s_off + c] += (float)(mean * n) * scale;
			st->grads[l->s_off + C + c] += (float)(unbiased * n) * scale;
		} else {
			st->grads[l->b_off + c] += (float)a;
			st->grads[l->w_off + c] += (float)b;
			st->bn_mdy[i][c] = (float)(a / M);
			st->bn_mdyx[i][c] = (float)(b / M);
		}
	}
}

/*
 * A whole forward (and, training, backward) pass over the batch of j: one
 * dispatch, or one per batchnorm cut and direction (see struct step_job).
 */
static void run_step(struct cpu_state *st, struct step_job *j)
{
	const int L = st->m.nlayers, nbn = j->train ? st->nbn : 0;
	j->loss = 0;
	j->ba = j->bb = 0;
	j->bn_bwd = -1;
	int a = 0;
	for (int k = 0; k < nbn; k++) { /* forward up to each batchnorm, then its sums */
		j->fa = a;
		j->fb = st->bn_at[k];
		j->bn_fwd = st->bn_at[k];
		hn_team_run(st->team, step_member, j);
		join_sums(st, st->bn_at[k], 1, j->n, j->scale);
		a = st->bn_at[k];
	}
	j->fa = a;
	j->fb = L;
	j->bn_fwd = -1;
	j->loss = 1;
	if (j->train) {
		j->ba = nbn ? st->bn_at[nbn - 1] + 1 : 0;
		j->bb = L;
		j->bn_bwd = nbn ? st->bn_at[nbn - 1] : -1;
	}
	hn_team_run(st->team, step_member, j);
	j->loss = 0;
	j->fa = j->fb = 0;
	for (int k = nbn - 1; k >= 0; k--) { /* each batchnorm's input gradient, and down */
		join_sums(st, st->bn_at[k], 0, j->n, j->scale);
		j->ba = k ? st->bn_at[k - 1] + 1 : 0;
		j->bb = st->bn_at[k] + 1;
		j->bn_bwd = k ? st->bn_at[k - 1] : -1;
		hn_team_run(st->team, step_member, j);
	}
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
		hn_team_run(st->team, update_member, &j);
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
	run_step(st, &j);
	sum_results(st, res);
	st->micro++;
	if (apply) {
		hn_team_run(st->team, update_member, &j);
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
	run_step(st, &j);
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
	return openblas_get_config();
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
