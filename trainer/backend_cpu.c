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
 * Speed: a ReLU that follows a conv or dense layer is fused into it (bias +
 * ReLU in the conv's reorder pass, mask applied while reordering dout), and
 * every ReLU runs in place. Each conv keeps its forward im2col matrix for the
 * filter gradient unless that would take more than KEEP_COL_BYTES in all (big
 * images), in which case backward rebuilds it in a shared buffer. Layers below
 * the first parameterised layer compute no input gradient.
 *
 * Determinism: OpenBLAS sgemm is deterministic for a fixed thread count, and
 * every reduction here runs in a fixed order, so the same seed, data order
 * and thread count give bit-identical weights.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trainer/backend.h"
#include "trainer/layers.h"

#define KEEP_COL_BYTES (512ULL << 20)
#define ARENA_ALIGN 64
#define CHUNK_BYTES (2ULL << 20)
#define CHUNK_MIN 4

struct cpu_state {
	struct hn_model m;
	struct hn_optim o;
	struct hn_backend_config cfg;
	int max_batch;
	int micro; /* micro-batches since the last apply: keeps dropout masks distinct */

	float *params, *grads, *opt;
	size_t nopt;
	void *arena;
	size_t arena_bytes;

	float *act[HN_MAX_LAYERS + 1];  /* act[0] input, act[i+1] output of layer i */
	float *dact[HN_MAX_LAYERS + 1]; /* gradients w.r.t. act (dact[0] unused) */
	float *col[HN_MAX_LAYERS];      /* conv im2col, per layer or shared */
	int32_t *idx[HN_MAX_LAYERS];    /* maxpool argmax */
	float *mask[HN_MAX_LAYERS];     /* dropout */
	float *tmp, *dcol, *probs;
	int fused[HN_MAX_LAYERS];       /* layer i (conv/dense) carries the ReLU i+1 */
	int dfull[HN_MAX_LAYERS + 1];   /* dact[i] holds the batch (else one chunk) */
	int need_din[HN_MAX_LAYERS];    /* some layer below i has parameters */
	int keep_col;
	int stage; /* layers [0, stage) are per-sample spatial layers, run in chunks */
	int chunk; /* samples per chunk in that stage */
	char desc[160];
};

static size_t out_floats(const struct hn_layer *l)
{
	return (size_t)l->out_c * l->out_h * l->out_w;
}

static size_t in_floats(const struct hn_layer *l)
{
	return (size_t)l->in_c * l->in_h * l->in_w;
}

/* Reject descriptions whose shapes do not chain or whose weights fall outside nparams. */
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

static size_t layout(struct cpu_state *st, char *base)
{
	const struct hn_model *m = &st->m;
	const size_t B = (size_t)st->max_batch, C = (size_t)st->chunk;
	size_t at = 0, max_tmp = 0, max_col = 0;

	/*
	 * Gradients inside the spatial stage live only while their chunk is
	 * processed, so they take one chunk, not the batch; a ReLU shares its
	 * input's buffer, so it inherits the size of the buffer it aliases.
	 */
	st->dfull[m->nlayers] = 1;
	for (int i = m->nlayers - 1; i >= 0; i--)
		st->dfull[i] = m->layers[i].kind == HN_LAYER_RELU ? st->dfull[i + 1] : i >= st->stage;

	st->act[0] = take(base, &at, sizeof(float) * B * m->in_c * m->in_h * m->in_w);
	st->dact[0] = NULL;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		size_t of = out_floats(l), rows = i < st->stage ? C : B;
		if (l->kind == HN_LAYER_RELU) { /* in place */
			st->act[i + 1] = st->act[i];
			st->dact[i + 1] = st->dact[i];
		} else {
			st->act[i + 1] = take(base, &at, sizeof(float) * B * of);
			st->dact[i + 1] =
				take(base, &at, sizeof(float) * (st->dfull[i + 1] ? B : C) * of);
		}
		st->col[i] = NULL;
		st->idx[i] = NULL;
		st->mask[i] = NULL;
		if (l->kind == HN_LAYER_CONV2D) {
			if (st->keep_col)
				st->col[i] = take(base, &at, sizeof(float) *
								hn_conv2d_col_floats(l, (int)B));
			size_t cf = hn_conv2d_col_floats(l, (int)rows);
			if (cf > max_col)
				max_col = cf;
		}
		if (l->kind == HN_LAYER_MAXPOOL)
			st->idx[i] = take(base, &at, sizeof(int32_t) * B * of);
		if (l->kind == HN_LAYER_DROPOUT)
			st->mask[i] = take(base, &at, sizeof(float) * B * of);
		/* GEMM scratch: one chunk in the spatial stage, the batch after it */
		if (rows * of > max_tmp)
			max_tmp = rows * of;
	}
	st->tmp = take(base, &at, sizeof(float) * max_tmp);
	st->dcol = take(base, &at, sizeof(float) * max_col);
	float *shared_col = st->keep_col ? NULL : take(base, &at, sizeof(float) * max_col);
	for (int i = 0; i < m->nlayers; i++)
		if (m->layers[i].kind == HN_LAYER_CONV2D && !st->keep_col)
			st->col[i] = shared_col;
	st->probs = take(base, &at, sizeof(float) * B * m->nclasses);
	return at;
}

/*
 * Spatial stage and its chunk size: as many samples as keep one chunk's
 * activations, gradients, im2col and GEMM scratch within CHUNK_BYTES (about
 * a core's L2), but at least CHUNK_MIN so the GEMMs stay wide.
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
	st->chunk = c > (size_t)st->max_batch ? st->max_batch : (int)c;
}

static void cpu_destroy(void *state)
{
	struct cpu_state *st = state;
	if (!st)
		return;
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
	if (cfg->max_batch < 1 || cfg->max_batch > (1 << 20)) {
		if (err)
			snprintf(err, HN_ERR_MAX, "cpu backend: max batch %d out of range",
				 cfg->max_batch);
		return -EINVAL;
	}
	struct cpu_state *st = calloc(1, sizeof *st);
	if (!st)
		return -ENOMEM;
	st->m = *m;
	st->o = *o;
	st->cfg = *cfg;
	st->max_batch = cfg->max_batch;
	if (cfg->threads > 0)
		openblas_set_num_threads(cfg->threads);

	size_t cols = 0;
	for (int i = 0; i < m->nlayers; i++)
		if (m->layers[i].kind == HN_LAYER_CONV2D)
			cols += hn_conv2d_col_floats(&m->layers[i], cfg->max_batch);
	st->keep_col = cols * sizeof(float) <= KEEP_COL_BYTES;
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
	} else {
		st->arena = NULL;
		cpu_destroy(st);
		if (err)
			snprintf(err, HN_ERR_MAX, "cpu backend: out of memory for model '%s'",
				 m->name);
		return -ENOMEM;
	}
	if (init)
		memcpy(st->params, init, sizeof(float) * m->nparams);
	snprintf(st->desc, sizeof st->desc, "cpu: %s, %d threads", openblas_get_config(),
		 openblas_get_num_threads());
	*state = st;
	return 0;
}

/* Per-sample offsets of layer i's buffers, so a chunk of samples is a plain slice. */
static float *act_at(struct cpu_state *st, int i, int s0)
{
	const struct hn_model *m = &st->m;
	size_t per = i ? out_floats(&m->layers[i - 1]) : (size_t)m->in_c * m->in_h * m->in_w;
	return st->act[i] ? st->act[i] + (size_t)s0 * per : NULL;
}

static float *dact_at(struct cpu_state *st, int i, int s0)
{
	const struct hn_model *m = &st->m;
	size_t per = i ? out_floats(&m->layers[i - 1]) : (size_t)m->in_c * m->in_h * m->in_w;
	if (!st->dact[i])
		return NULL;
	return st->dfull[i] ? st->dact[i] + (size_t)s0 * per : st->dact[i];
}

static float *col_at(struct cpu_state *st, int i, int s0)
{
	return st->keep_col ? st->col[i] + (size_t)s0 * hn_conv2d_col_floats(&st->m.layers[i], 1)
			    : st->col[i];
}

/* Layers [a, b) forward on samples [s0, s0 + n). Dropout masks must already be drawn. */
static void forward_range(struct cpu_state *st, int a, int b, int s0, int n, int train)
{
	const struct hn_model *m = &st->m;
	for (int i = a; i < b; i++) {
		const struct hn_layer *l = &m->layers[i];
		const float *in = act_at(st, i, s0);
		float *out = act_at(st, i + 1, s0);
		size_t of = out_floats(l), count = (size_t)n * of;
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			hn_conv2d_forward(out, col_at(st, i, s0), st->tmp, in, st->params + l->w_off,
					  st->params + l->b_off, n, l, st->fused[i]);
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
		}
	}
}

/* Layers [a, b) backward (b-1 down to a) on samples [s0, s0 + n). */
static void backward_range(struct cpu_state *st, int a, int b, int s0, int n)
{
	const struct hn_model *m = &st->m;
	for (int i = b - 1; i >= a; i--) {
		const struct hn_layer *l = &m->layers[i];
		float *din = st->need_din[i] ? dact_at(st, i, s0) : NULL;
		const float *dout = dact_at(st, i + 1, s0);
		size_t of = out_floats(l), count = (size_t)n * of;
		float *relu_out = st->fused[i] ? act_at(st, i + 1, s0) : NULL;
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			hn_conv2d_backward(din, st->grads + l->w_off, st->grads + l->b_off,
					   col_at(st, i, s0), st->tmp, st->dcol, dout, relu_out,
					   act_at(st, i, s0), st->params + l->w_off, n, l,
					   st->keep_col);
			break;
		case HN_LAYER_DENSE:
			hn_dense_backward(din, st->grads + l->w_off, st->grads + l->b_off, st->tmp,
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
					hn_dropout_backward(din, dout, st->mask[i] + (size_t)s0 * of,
							    count);
				else
					memcpy(din, dout, sizeof(float) * count);
			}
			break;
		}
	}
}

/*
 * The spatial stage (every layer before the first dense one) runs chunk by
 * chunk of samples so each chunk's activations, im2col matrix and GEMM
 * scratch stay in cache; the dense stage runs on the whole batch.
 */
static void forward(struct cpu_state *st, const uint8_t *tiles, int n, int train, uint64_t step)
{
	const struct hn_model *m = &st->m;
	hn_input_forward(st->act[0], tiles, n, m->in_c, m->in_h, m->in_w);
	for (int i = 0; train && i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		if (l->kind == HN_LAYER_DROPOUT && l->p > 0.0f) {
			uint64_t salt = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL ^
					(uint64_t)st->micro << 32;
			hn_dropout_mask(st->mask[i], (size_t)n * out_floats(l), l->p,
					st->cfg.seed ^ salt, step);
		}
	}
	for (int s0 = 0; s0 < n; s0 += st->chunk)
		forward_range(st, 0, st->stage, s0, n - s0 < st->chunk ? n - s0 : st->chunk,
			      train);
	forward_range(st, st->stage, m->nlayers, 0, n, train);
}

static void backward(struct cpu_state *st, int n)
{
	backward_range(st, st->stage, st->m.nlayers, 0, n);
	for (int s0 = 0; s0 < n; s0 += st->chunk)
		backward_range(st, 0, st->stage, s0, n - s0 < st->chunk ? n - s0 : st->chunk);
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

static int cpu_train_step(void *state, const uint8_t *tiles, const uint16_t *labels, int n,
			  int group_size, int apply, float lr, uint64_t step,
			  struct hn_step_result *res)
{
	struct cpu_state *st = state;
	const struct hn_model *m = &st->m;
	int rc = check_batch(st, labels, n);
	if (rc)
		return rc;
	if (group_size < 1)
		group_size = n;

	forward(st, tiles, n, 1, step);
	int correct = 0;
	double loss = hn_softmax_ce_forward(st->probs, st->act[m->nlayers], labels, n, m->nclasses,
					    &correct);
	hn_softmax_ce_backward(st->dact[m->nlayers], st->probs, labels, n, m->nclasses,
			       1.0f / (float)group_size);
	backward(st, n);
	st->micro++;
	if (apply) {
		hn_optim_update(&st->o, st->params, st->grads, st->opt, m->nparams, lr, step);
		st->micro = 0;
	}
	if (res) {
		res->loss_sum = loss;
		res->correct = correct;
		res->compute_s = 0.0;
		res->skipped = 0;
	}
	return 0;
}

static int cpu_evaluate(void *state, const uint8_t *tiles, const uint16_t *labels, int n,
			struct hn_step_result *res)
{
	struct cpu_state *st = state;
	int rc = check_batch(st, labels, n);
	if (rc)
		return rc;
	forward(st, tiles, n, 0, 0);
	int correct = 0;
	double loss = hn_softmax_ce_forward(st->probs, st->act[st->m.nlayers], labels, n,
					    st->m.nclasses, &correct);
	if (res) {
		res->loss_sum = loss;
		res->correct = correct;
		res->compute_s = 0.0;
		res->skipped = 0;
	}
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
};
