/*
 * test_gpu_layers - the gpu backend against the cpu backend, layer by layer.
 *
 * For a matrix of small models (conv alone, strided/padded conv, conv +
 * maxpool, overlapping pool, dense, relu, dropout p=0, the built-in cnn,
 * batchnorm after conv and dense layers and on the input, global average
 * pooling, residual and bottleneck blocks with both shortcuts)
 * on random tiles, both backends start from the same weights and must agree:
 *   - forward: evaluate's loss_sum (relative 1e-4) and correct (equal), at
 *     max_batch and at a smaller batch;
 *   - every gradient: with sgd, lr = 1 and no weight decay, params before
 *     minus params after one train_step IS the gradient; compared per layer
 *     and tensor, max |gpu - cpu| <= 1e-3 * max |cpu| (fp32); batchnorm's
 *     running statistics after the step likewise; the bias of a layer that
 *     a batchnorm follows has a zero gradient up to rounding, and is held to
 *     the model's largest gradient instead (bias_cancelled);
 *   - accumulation: two half batches with apply only on the second give the
 *     full-batch gradient (with batchnorm, the cpu's sum of the same halves);
 *   - momentum and adam (with weight decay) over three steps: parameter
 *     changes and optimizer state within 2e-3 of the largest;
 *   - --amp: the gradient's direction, by cosine per tensor, per filter and
 *     over the whole model, to bounds per model (compare_amp says why not
 *     elementwise, amp_bounds how far), after the loss scale has settled
 *     (skipped steps leave params unchanged).
 * Plus gpu-only checks: dropout p=0.5 is the same for the same (seed, step)
 * and differs for another step; stage() (the next batch copied while the
 * current call computes) gives the results of unstaged calls, and really
 * copies during the call before (a batch changed after it is announced and
 * that call has returned is trained on as it was then). Prints the model, layer, tensor and errors
 * of any failure. Skips (77) only when the plugin finds no GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu_common.h"
#include "trainer/backend.h"
#include "trainer/model.h"

#define NB 6 /* max_batch */

static const struct hn_backend_ops *gpu;
static int failures;
static int bf16_ok; /* the GPU takes --amp=bf16 (compute capability 8.0 or later) */

struct rng {
	uint64_t s;
};

static uint32_t rnd(struct rng *r)
{
	r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(r->s >> 33);
}

struct shape {
	const char *spec;
	int c, h, w, classes;
};

static const struct shape shapes[] = {
	{"c4k3", 1, 8, 8, 5},
	{"c4k3s2p1", 3, 9, 9, 5},
	{"c4k3-m2", 2, 10, 10, 4},
	{"c3k3-r-m3s2", 1, 11, 11, 5},
	{"d16", 1, 6, 6, 5},
	{"d16-r", 3, 5, 5, 7},
	{"d16-x0", 1, 6, 6, 5},
	{"c8k5p2-r-m2-c8k3-r-m2-d32-r-x0", 3, 16, 16, 10},
	{"cnn", 1, 28, 28, 10},
	/* batch normalisation after conv and dense layers, global average pooling */
	{"c4k3p1-bn-r-m2-c6k3-bn-r-gap-d8-bn-r", 2, 10, 10, 5},
	{"bn-c4k3-r-gap", 1, 7, 7, 4},
	/*
	 * per-channel sums over more than 16k elements (6 x 80 x 80) are split
	 * in parts across blocks and added in order (kernels.cu, chan_parts)
	 */
	{"c4k3p1-bn-r-c4k3p1-r-gap", 1, 80, 80, 3},
	/*
	 * residual blocks (issue 31): identity and projection shortcuts, stride
	 * 2, bias-free convs, the padded max-pool of resnet's stem, bottlenecks
	 */
	{"c4k3p1nb-bn-r-res4-res6s2p-gap", 1, 8, 8, 5},
	{"c4k3s2p1nb-bn-r-m3s2p1-res4x2-bot2s2p-gap", 2, 11, 11, 3},
	{"resnet-fm", 1, 28, 28, 10},
};

/* Does the model normalise with batch statistics (so half batches are not the whole)? */
static int has_bn(const struct hn_model *m)
{
	for (int i = 0; i < m->nlayers; i++)
		if (m->layers[i].kind == HN_LAYER_BATCHNORM)
			return 1;
	return 0;
}

/*
 * A conv or dense bias that a batchnorm follows directly: the batchnorm
 * subtracts each channel's batch mean, which removes a per-channel constant
 * exactly, so the bias's gradient is zero in exact arithmetic and what both
 * backends compute for it is rounding noise (about 1e-7 of the other
 * gradients, of either sign). Such a tensor is held to the model's scale,
 * not to its own largest element.
 */
static int bias_cancelled(const struct hn_model *m, int i)
{
	const struct hn_layer *l = &m->layers[i];
	return l->b_len && (l->kind == HN_LAYER_CONV2D || l->kind == HN_LAYER_DENSE) &&
	       i + 1 < m->nlayers && m->layers[i + 1].kind == HN_LAYER_BATCHNORM;
}

static double max_abs(const float *v, size_t n)
{
	double mx = 0;
	for (size_t j = 0; j < n; j++)
		mx = fmax(mx, fabs((double)v[j]));
	return mx;
}

/*
 * Compare a parameter-sized vector per layer and tensor; tol relative to the
 * tensor's max |ref| (for a bias_cancelled one, to the whole vector's).
 */
static void compare_tensors(const char *what, const char *spec, const struct hn_model *m,
			    const float *ref, const float *got, float tol)
{
	const double model_max = max_abs(ref, m->nparams);
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		for (int t = 0; t < 3; t++) { /* weights, bias, batchnorm running statistics */
			size_t off = t == 2 ? l->s_off : t ? l->b_off : l->w_off;
			size_t len = t == 2 ? l->s_len : t ? l->b_len : l->w_len;
			if (!len)
				continue;
			double maxref = 0, maxerr = 0;
			size_t at = 0;
			int bad = 0;
			for (size_t j = 0; j < len; j++) {
				double r = ref[off + j], g = got[off + j];
				if (!isfinite(g))
					bad = 1;
				if (fabs(r) > maxref)
					maxref = fabs(r);
				if (fabs(r - g) > maxerr) {
					maxerr = fabs(r - g);
					at = j;
				}
			}
			if (t == 1 && bias_cancelled(m, i))
				maxref = model_max;
			double limit = tol * maxref + 1e-7;
			if (bad || maxerr > limit) {
				printf("FAIL %s [%s] layer %d %s: max abs err %.3g at %zu "
				       "(cpu %.6g gpu %.6g), max |cpu| %.3g, rel %.3g > %.3g\n",
				       what, spec, i,
				       t == 2 ? "running statistics"
				       : t    ? "bias"
					      : "weights",
				       maxerr, at, (double)ref[off + at], (double)got[off + at],
				       maxref, maxref > 0 ? maxerr / maxref : maxerr, (double)tol);
				failures++;
			}
		}
	}
}

/* cosine similarity of n floats (1 where both are zero) */
static double cosine(const float *a, const float *b, size_t n)
{
	double ab = 0, aa = 0, bb = 0;
	for (size_t j = 0; j < n; j++) {
		ab += (double)a[j] * b[j];
		aa += (double)a[j] * a[j];
		bb += (double)b[j] * b[j];
	}
	return aa == 0 && bb == 0 ? 1.0 : aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

/* Euclidean norm of n floats */
static double vec_norm(const float *a, size_t n)
{
	double aa = 0;
	for (size_t j = 0; j < n; j++)
		aa += (double)a[j] * a[j];
	return sqrt(aa);
}

/*
 * --amp gradients against the cpu's fp32 ones. Not elementwise: 16-bit
 * rounding flips a few ReLU masks and max-pool choices (near-ties), which
 * moves whole contributions, so single elements differ by a fifth (fp16)
 * to a half (bf16) of their tensor's largest, sign included, with nothing
 * wrong (tests/amp_model.py models the plugin's amp arithmetic and
 * measures it). What holds is the direction, by cosine: per tensor, per row
 * of conv and dense weights (one filter, one unit) holding at least half
 * the largest row's norm, and over all trained parameters at once (the
 * whole model). How far it holds depends on the model: amp_bounds, each
 * bound twice as far from 1 as amp_model.py's worst, rounded down to 0.01;
 * -1 where no bound holds a correct gradient.
 *
 * Plain models (the default, measured on the cnn, 100 batches: tensor
 * 0.998 fp16, 0.973 bf16; row 0.98): 0.99 / 0.95 per tensor, 0.9 per row.
 * Residual models normalise 24 to 96 values a channel (6 samples of 2x2 to
 * 4x4 pixels), so one flipped ReLU moves every gradient below it, and a
 * batchnorm that makes the loss blind to a scale leaves a gradient close to
 * zero that rounding alone turns round. Worst cosines of 2000 batches
 * (amp_model.py --batches 2000), per tensor / row / whole model:
 *   res4-res6s2p    fp16 -0.82 / 0.865 / 0.990   bf16 -0.79 / 0.481 / 0.964
 *   res4x2-bot2s2p  fp16 -1.00 / -0.36 / 0.258   bf16 -1.00 / -1.00 / 0.564
 *   resnet-fm       fp16 0.988 / 0.759 / 0.997   bf16 0.929 / 0.733 / 0.986
 * The H100's bf16 failures under the plain bounds (res4x2-bot2s2p layer 22
 * bias 0.892, resnet-fm layer 23 row 0.862) are rounding: 6.4% and 9.3% of
 * correct batches go as low. A filter of the wrong sign (row cosine
 * about -1) fails where there is a row bound, filters out of order where
 * the tensor or row bound is 0.5 or more; the tiny res4x2-bot2s2p has no
 * direction rounding cannot turn at 6 samples, so its check is in effect
 * the loss, finite values and no skipped step.
 */
struct amp_bound {
	const char *spec;		    /* NULL: the default */
	double tensor[2], row[2], whole[2]; /* [0] fp16, [1] bf16 */
};

static const struct amp_bound amp_bounds[] = {
	{NULL, {0.99, 0.95}, {0.9, 0.9}, {-1, -1}},
	{"c4k3p1nb-bn-r-res4-res6s2p-gap", {-1, -1}, {0.73, -0.04}, {0.97, 0.92}},
	{"c4k3s2p1nb-bn-r-m3s2p1-res4x2-bot2s2p-gap", {-1, -1}, {-1, -1}, {-0.48, 0.12}},
	{"resnet-fm", {0.97, 0.85}, {0.51, 0.46}, {0.99, 0.97}},
};

static const struct amp_bound *amp_bound_of(const char *spec)
{
	for (size_t i = 1; i < sizeof(amp_bounds) / sizeof(amp_bounds[0]); i++)
		if (!strcmp(amp_bounds[i].spec, spec))
			return &amp_bounds[i];
	return &amp_bounds[0];
}

/* Does compare_amp hold layer i's tensor t (0 weights, 1 bias) to a direction? */
static int amp_directed(const struct hn_model *m, int i, int t)
{
	const struct hn_layer *l = &m->layers[i];
	return t == 0 ? l->w_len > 0 : l->b_len > 0 && !bias_cancelled(m, i);
}

/* The cosine over every trained tensor compare_amp holds to a direction. */
static double whole_cosine(const struct hn_model *m, const float *ref, const float *got)
{
	double ab = 0, aa = 0, bb = 0;
	for (int i = 0; i < m->nlayers; i++)
		for (int t = 0; t < 2; t++) {
			const struct hn_layer *l = &m->layers[i];
			size_t off = t ? l->b_off : l->w_off, len = t ? l->b_len : l->w_len;
			if (!amp_directed(m, i, t))
				continue;
			for (size_t j = off; j < off + len; j++) {
				ab += (double)ref[j] * got[j];
				aa += (double)ref[j] * ref[j];
				bb += (double)got[j] * got[j];
			}
		}
	return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : aa == bb ? 1.0 : 0.0;
}

static void compare_amp(const char *spec, int amp, const struct hn_model *m, const float *ref,
			const float *got)
{
	const char *kind = amp == HN_AMP_BF16 ? "bf16" : "fp16";
	const struct amp_bound *bd = amp_bound_of(spec);
	const int k = amp == HN_AMP_BF16;
	const double tensor_min = bd->tensor[k], row_min = bd->row[k];
	double whole = whole_cosine(m, ref, got);
	if (!(whole >= bd->whole[k])) {
		printf("FAIL %s gradient [%s] whole model: cosine %.5f < %.2f\n", kind, spec, whole,
		       bd->whole[k]);
		failures++;
	}
	const double model_max = max_abs(ref, m->nparams);
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		for (int t = 0; t < 3; t++) {
			size_t off = t == 2 ? l->s_off : t ? l->b_off : l->w_off;
			size_t len = t == 2 ? l->s_len : t ? l->b_len : l->w_len;
			const char *name = t == 2 ? "running statistics" : t ? "bias" : "weights";
			if (!len)
				continue;
			for (size_t j = 0; j < len; j++)
				if (!isfinite(got[off + j])) {
					printf("FAIL %s gradient [%s] layer %d %s: element %zu is %g\n",
					       kind, spec, i, name, j, (double)got[off + j]);
					failures++;
					break;
				}
			if (t == 1 && bias_cancelled(m, i)) { /* noise: no direction to compare */
				double g = max_abs(got + off, len);
				if (!(g <= 1e-3 * model_max)) {
					printf("FAIL %s gradient [%s] layer %d bias (a batchnorm "
					       "follows: zero up to rounding): max %.3g > 1e-3 of the "
					       "model's largest %.3g\n",
					       kind, spec, i, g, model_max);
					failures++;
				}
				continue;
			}
			double c = cosine(ref + off, got + off, len);
			if (!(c >= tensor_min)) {
				printf("FAIL %s gradient [%s] layer %d %s: cosine %.5f < %.2f\n",
				       kind, spec, i, name, c, tensor_min);
				failures++;
			}
			int rows = l->out_c;
			if (t || rows < 2 || len % (size_t)rows ||
			    (l->kind != HN_LAYER_CONV2D && l->kind != HN_LAYER_DENSE))
				continue;
			size_t per = len / (size_t)rows;
			double top = 0;
			for (int r = 0; r < rows; r++)
				top = fmax(top, vec_norm(ref + off + (size_t)r * per, per));
			for (int r = 0; r < rows; r++) {
				const float *a = ref + off + (size_t)r * per,
					    *b = got + off + (size_t)r * per;
				if (vec_norm(a, per) < 0.5 * top)
					continue;
				double cr = cosine(a, b, per);
				if (!(cr >= row_min)) {
					printf("FAIL %s gradient [%s] layer %d weights, row %d: cosine "
					       "%.4f < %.2f\n",
					       kind, spec, i, r, cr, row_min);
					failures++;
				}
			}
		}
	}
}

static void compare_plain(const char *what, const char *spec, const float *ref, const float *got,
			  size_t len, float tol)
{
	double maxref = 0, maxerr = 0;
	for (size_t j = 0; j < len; j++) {
		maxref = fmax(maxref, fabs(ref[j]));
		double e = fabs((double)ref[j] - got[j]);
		if (!(e <= maxerr))
			maxerr = isfinite(e) ? e : INFINITY;
	}
	if (maxerr > tol * maxref + 1e-7) {
		printf("FAIL %s [%s]: max abs err %.3g, max |cpu| %.3g\n", what, spec, maxerr,
		       maxref);
		failures++;
	}
}

/* loss_sum within tol (relative); correct equal, except that fp16 logits may flip a near tie */
static void compare_result(const char *what, const char *spec, const struct hn_step_result *c,
			   const struct hn_step_result *g, double tol)
{
	double d = fabs(c->loss_sum - g->loss_sum);
	int slack = tol > 1e-3 ? 1 : 0;
	if (!(d <= tol * fabs(c->loss_sum) + 1e-6) || abs(c->correct - g->correct) > slack) {
		printf("FAIL %s [%s]: cpu loss %.7g correct %d, gpu loss %.7g correct %d\n", what,
		       spec, c->loss_sum, c->correct, g->loss_sum, g->correct);
		failures++;
	}
}

struct pair {
	const struct hn_backend_ops *ops[2]; /* cpu, gpu */
	void *st[2];
};

static int pair_create(struct pair *p, const struct hn_model *m, const struct hn_optim *o, int amp,
		       const float *init, const char *spec)
{
	struct hn_backend_config cfg = {.threads = 1, .max_batch = NB, .amp = 0, .seed = 7};
	char err[HN_ERR_MAX] = "";
	p->ops[0] = &hn_backend_cpu;
	p->ops[1] = gpu;
	p->st[0] = p->st[1] = NULL;
	for (int k = 0; k < 2; k++) {
		cfg.amp = k == 1 ? amp : 0;
		if (p->ops[k]->create(m, o, &cfg, init, &p->st[k], err) < 0) {
			printf("FAIL [%s]: %s create: %s\n", spec, p->ops[k]->name, err);
			failures++;
			if (k == 1)
				p->ops[0]->destroy(p->st[0]);
			return -1;
		}
	}
	return 0;
}

static void pair_destroy(struct pair *p)
{
	for (int k = 0; k < 2; k++)
		p->ops[k]->destroy(p->st[k]);
}

/* One step on both; out[k] = params after. Returns -1 (and counts a failure) on error. */
static int pair_step(struct pair *p, const char *spec, const uint8_t *tiles, const uint16_t *labels,
		     int n, int group, int apply, float lr, uint64_t step,
		     struct hn_step_result res[2])
{
	for (int k = 0; k < 2; k++) {
		int r = p->ops[k]->train_step(p->st[k], tiles, labels, n, group, apply, lr, step,
					      &res[k]);
		if (r < 0) {
			printf("FAIL [%s]: %s train_step: %d\n", spec, p->ops[k]->name, r);
			failures++;
			return -1;
		}
	}
	return 0;
}

static void test_model(const struct shape *s, struct rng *rg)
{
	struct hn_model m;
	char err[HN_ERR_MAX] = "";
	if (hn_model_build(s->spec, s->c, s->h, s->w, s->classes, &m, err) < 0) {
		printf("FAIL [%s]: model: %s\n", s->spec, err);
		failures++;
		return;
	}
	size_t np = m.nparams, tile = (size_t)s->c * s->h * s->w;
	float *init = malloc(np * sizeof(float));
	float *after[2] = {malloc(np * sizeof(float)), malloc(np * sizeof(float))};
	float *grad[2] = {malloc(np * sizeof(float)), malloc(np * sizeof(float))};
	float *opt[2] = {malloc(2 * np * sizeof(float)), malloc(2 * np * sizeof(float))};
	uint8_t *tiles = malloc(tile * NB * 3);
	uint16_t labels[NB * 3];
	for (size_t j = 0; j < tile * NB * 3; j++)
		tiles[j] = (uint8_t)rnd(rg);
	for (int j = 0; j < NB * 3; j++)
		labels[j] = (uint16_t)(rnd(rg) % (uint32_t)s->classes);
	hn_model_init_params(&m, 1234, init);
	for (size_t j = 0; j < np; j++) /* non-zero biases, so bias paths are exercised */
		init[j] += 0.01f * (float)((int)(rnd(rg) % 201) - 100) / 100.0f;

	struct hn_optim sgd = {.kind = HN_OPT_SGD};
	struct pair p;
	struct hn_step_result res[2];
	if (pair_create(&p, &m, &sgd, 0, init, s->spec) < 0)
		goto out;

	/* forward at max_batch and at a smaller batch */
	for (int n = NB; n >= NB / 2; n -= NB / 2) {
		for (int k = 0; k < 2; k++)
			if (p.ops[k]->evaluate(p.st[k], tiles, labels, n, &res[k]) < 0) {
				printf("FAIL [%s]: %s evaluate\n", s->spec, p.ops[k]->name);
				failures++;
				goto out_pair;
			}
		compare_result(n == NB ? "forward" : "forward (small batch)", s->spec, &res[0],
			       &res[1], 1e-4);
	}

	/* gradient = params before - after, sgd lr 1 */
	if (pair_step(&p, s->spec, tiles, labels, NB, NB, 1, 1.0f, 1, res) < 0)
		goto out_pair;
	compare_result("train_step loss", s->spec, &res[0], &res[1], 1e-4);
	for (int k = 0; k < 2; k++) {
		p.ops[k]->get_params(p.st[k], after[k]);
		for (size_t j = 0; j < np; j++)
			grad[k][j] = init[j] - after[k][j];
	}
	compare_tensors("gradient", s->spec, &m, grad[0], grad[1], 1e-3f);

	/* accumulation: two halves, apply on the second, equals the full-batch gradient */
	for (int k = 0; k < 2; k++)
		p.ops[k]->set_params(p.st[k], init);
	if (pair_step(&p, s->spec, tiles, labels, NB / 2, NB, 0, 1.0f, 1, res) < 0 ||
	    pair_step(&p, s->spec, tiles + tile * (NB / 2), labels + NB / 2, NB / 2, NB, 1, 1.0f, 1,
		      res) < 0)
		goto out_pair;
	/*
	 * Without batchnorm the two halves make the whole batch's gradient; with
	 * it each half is normalised with its own statistics, so the gpu's sum
	 * must be the cpu's sum of the same halves.
	 */
	for (int k = 0; k < 2; k++) {
		p.ops[k]->get_params(p.st[k], after[k]);
		for (size_t j = 0; j < np; j++)
			after[k][j] = init[j] - after[k][j];
	}
	compare_tensors("accumulated gradient", s->spec, &m, has_bn(&m) ? after[0] : grad[0],
			after[1], 1e-3f);
	pair_destroy(&p);

	/* optimizers with weight decay over three steps on different batches */
	struct hn_optim opts[2] = {
		{.kind = HN_OPT_MOMENTUM, .momentum = 0.9f, .weight_decay = 1e-3f},
		{.kind = HN_OPT_ADAM,
		 .beta1 = 0.9f,
		 .beta2 = 0.999f,
		 .eps = 1e-4f,
		 .weight_decay = 1e-2f},
	};
	for (int oi = 0; oi < 2; oi++) {
		const char *oname = oi ? "adam" : "momentum";
		if (pair_create(&p, &m, &opts[oi], 0, init, s->spec) < 0)
			goto out;
		for (int st = 0; st < 3; st++)
			if (pair_step(&p, s->spec, tiles + tile * NB * st, labels + NB * st, NB, NB,
				      1, 0.01f, (uint64_t)st + 1, res) < 0)
				goto out_pair;
		for (int k = 0; k < 2; k++) {
			p.ops[k]->get_params(p.st[k], after[k]);
			for (size_t j = 0; j < np; j++)
				grad[k][j] = after[k][j] - init[j];
			p.ops[k]->get_opt_state(p.st[k], opt[k]);
		}
		char what[64];
		snprintf(what, sizeof(what), "%s update", oname);
		compare_tensors(what, s->spec, &m, grad[0], grad[1], 2e-3f);
		snprintf(what, sizeof(what), "%s state", oname);
		compare_plain(what, s->spec, opt[0], opt[1],
			      np * (size_t)hn_optim_state_per_param(opts[oi].kind), 2e-3f);
		pair_destroy(&p);
	}

	/* amp, fp16 and bf16: the gradient's direction, once fp16's loss scale stops overflowing */
	for (int amp = HN_AMP_FP16; amp <= HN_AMP_BF16; amp++) {
		const char *kind = amp == HN_AMP_BF16 ? "bf16" : "fp16";
		if (amp == HN_AMP_BF16 && !bf16_ok)
			break;
		if (pair_create(&p, &m, &sgd, amp, init, s->spec) < 0)
			goto out;
		int tries = 0, ok = 1;
		if (p.ops[0]->train_step(p.st[0], tiles, labels, NB, NB, 1, 1.0f, 1, &res[0]) < 0) {
			printf("FAIL [%s]: cpu train_step\n", s->spec);
			ok = 0;
		}
		do {
			if (ok && p.ops[1]->train_step(p.st[1], tiles, labels, NB, NB, 1, 1.0f, 1,
						       &res[1]) < 0) {
				printf("FAIL [%s]: %s train_step\n", s->spec, kind);
				ok = 0;
			}
		} while (ok && res[1].skipped && ++tries < 40);
		if (ok && res[1].skipped) {
			printf("FAIL [%s]: %s skipped %d steps in a row\n", s->spec, kind, tries);
			ok = 0;
		}
		if (ok && amp == HN_AMP_BF16 && tries) {
			printf("FAIL [%s]: bf16 skipped a step (it has no loss scale)\n", s->spec);
			ok = 0;
		}
		if (!ok) {
			failures++;
			pair_destroy(&p);
			continue;
		}
		char what[64];
		snprintf(what, sizeof what, "%s train_step loss", kind);
		compare_result(what, s->spec, &res[0], &res[1], 2e-2);
		for (int k = 0; k < 2; k++) {
			p.ops[k]->get_params(p.st[k], after[k]);
			for (size_t j = 0; j < np; j++)
				grad[k][j] = init[j] - after[k][j];
		}
		compare_amp(s->spec, amp, &m, grad[0], grad[1]);
		printf("ok [%s] %s: %d layers, %zu params (skipped %d first)\n", s->spec, kind,
		       m.nlayers, np, tries);
		pair_destroy(&p);
	}
	goto out;
out_pair:
	pair_destroy(&p);
out:
	free(init);
	for (int k = 0; k < 2; k++) {
		free(after[k]);
		free(grad[k]);
		free(opt[k]);
	}
	free(tiles);
}

/* gpu only: dropout masks follow (seed, step), and p=0.5 really drops. */
static void test_dropout(struct rng *rg)
{
	struct hn_model m;
	char err[HN_ERR_MAX] = "";
	if (hn_model_build("d32-x0.5", 1, 6, 6, 5, &m, err) < 0) {
		printf("FAIL dropout model: %s\n", err);
		failures++;
		return;
	}
	size_t np = m.nparams;
	float *init = malloc(np * sizeof(float)), *out[3];
	uint8_t tiles[36 * NB];
	uint16_t labels[NB];
	for (size_t j = 0; j < sizeof(tiles); j++)
		tiles[j] = (uint8_t)rnd(rg);
	for (int j = 0; j < NB; j++)
		labels[j] = (uint16_t)(rnd(rg) % 5);
	hn_model_init_params(&m, 99, init);
	struct hn_optim sgd = {.kind = HN_OPT_SGD};
	struct hn_backend_config cfg = {.threads = 1, .max_batch = NB, .seed = 42};
	struct hn_step_result res, ev_cpu, ev_gpu;
	uint64_t steps[3] = {5, 5, 6};
	for (int k = 0; k < 3; k++) {
		void *st = NULL;
		out[k] = malloc(np * sizeof(float));
		if (gpu->create(&m, &sgd, &cfg, init, &st, err) < 0 ||
		    gpu->train_step(st, tiles, labels, NB, NB, 1, 0.1f, steps[k], &res) < 0 ||
		    gpu->get_params(st, out[k]) < 0) {
			printf("FAIL dropout run %d: %s\n", k, err);
			failures++;
			memset(out[k], 0, np * sizeof(float));
		}
		if (k == 0 && st) {
			/* eval ignores dropout: matches the cpu backend's eval */
			void *cst = NULL;
			if (gpu->evaluate(st, tiles, labels, NB, &ev_gpu) < 0 ||
			    hn_backend_cpu.create(&m, &sgd, &cfg, out[0], &cst, err) < 0 ||
			    hn_backend_cpu.evaluate(cst, tiles, labels, NB, &ev_cpu) < 0) {
				printf("FAIL dropout eval: %s\n", err);
				failures++;
			} else {
				compare_result("dropout eval", "d32-x0.5", &ev_cpu, &ev_gpu, 1e-4);
			}
			if (cst)
				hn_backend_cpu.destroy(cst);
		}
		if (st)
			gpu->destroy(st);
	}
	if (memcmp(out[0], out[1], np * sizeof(float)) != 0) {
		printf("FAIL dropout: same (seed, step) gave different updates\n");
		failures++;
	}
	if (memcmp(out[0], out[2], np * sizeof(float)) == 0) {
		printf("FAIL dropout: another step gave the same update (mask ignores step)\n");
		failures++;
	}
	double diff = 0;
	for (size_t j = 0; j < np; j++)
		diff += fabs(out[0][j] - init[j]);
	if (!(diff > 0)) {
		printf("FAIL dropout: training step changed nothing\n");
		failures++;
	}
	for (int k = 0; k < 3; k++)
		free(out[k]);
	free(init);
}

/*
 * gpu only: the trainer's sequence, stage(k+1) then train_step(k), ends
 * with the same weights and results as plain calls; an evaluate staged the
 * same way too; a call given another batch than the announced one trains
 * on its own (the same weights as that sequence without stage()). Batch 2 is overwritten after
 * train_step(1), which staged it, has returned (breaking the contract on purpose): training on it
 * must see the bytes as they were, proof that the copy happened during step 1.
 */
static void test_stage(struct rng *rg)
{
	struct hn_model m;
	char err[HN_ERR_MAX] = "";
	const char *spec = "c4k3-r-m2-d10";
	if (hn_model_build(spec, 1, 8, 8, 5, &m, err) < 0) {
		printf("FAIL stage model: %s\n", err);
		failures++;
		return;
	}
	enum { K = 4, T = 64 * NB };
	static uint8_t tiles[K][T], keep[T];
	static uint16_t labels[K][NB];
	for (int k = 0; k < K; k++) {
		for (int j = 0; j < T; j++)
			tiles[k][j] = (uint8_t)rnd(rg);
		for (int j = 0; j < NB; j++)
			labels[k][j] = (uint16_t)(rnd(rg) % 5);
	}
	size_t np = m.nparams;
	float *init = malloc(np * sizeof(float)), *out[4];
	hn_model_init_params(&m, 5, init);
	struct hn_optim o = {.kind = HN_OPT_SGD, .momentum = 0.9f};
	struct hn_backend_config cfg = {.threads = 1, .max_batch = NB, .seed = 3};
	double loss[4] = {0, 0, 0, 0};
	/* runs: 0 plain, 1 staged, 2 staged with an extra batch, 3 plain with it */
	for (int run = 0; run < 4; run++) {
		void *st = NULL;
		struct hn_step_result res = {0};
		out[run] = calloc(np, sizeof(float));
		int rc = gpu->create(&m, &o, &cfg, init, &st, err);
		for (int k = 0; rc == 0 && k < K; k++) {
			if ((run == 1 || run == 2) && k + 1 < K)
				rc = gpu->stage(st, tiles[k + 1], labels[k + 1], NB);
			if (run >= 2 && k == 1) /* announce batch 2, then hand batch 3 instead */
				rc = rc ? rc
					: gpu->train_step(st, tiles[3], labels[3], NB, NB, 1, 0.05f,
							  100, &res);
			if (rc == 0)
				rc = gpu->train_step(st, tiles[k], labels[k], NB, NB, 1, 0.05f,
						     (uint64_t)k + 1, &res);
			if (run == 1 && k == 1) {
				memcpy(keep, tiles[2], T);
				memset(tiles[2], 0, T);
			}
			if (run == 1 && k == 2)
				memcpy(tiles[2], keep, T);
			loss[run] += res.loss_sum;
		}
		struct hn_step_result ev = {0};
		if (rc == 0 && (run == 1 || run == 2))
			rc = gpu->stage(st, tiles[1], labels[1], NB);
		if (rc == 0)
			rc = gpu->evaluate(st, tiles[0], labels[0], NB, &ev);
		if (rc == 0)
			rc = gpu->evaluate(st, tiles[1], labels[1], NB, &res);
		if (rc == 0)
			rc = gpu->get_params(st, out[run]);
		if (rc < 0) {
			printf("FAIL stage run %d: %s\n", run, err);
			failures++;
		}
		loss[run] += ev.loss_sum + res.loss_sum;
		if (st)
			gpu->destroy(st);
	}
	if (memcmp(out[0], out[1], np * sizeof(float)) != 0 || loss[0] != loss[1]) {
		printf("FAIL stage: staged calls (batch 2 changed after it was staged) gave other "
		       "weights or losses (%.9g vs %.9g)\n",
		       loss[0], loss[1]);
		failures++;
	}
	if (memcmp(out[2], out[3], np * sizeof(float)) != 0 || loss[2] != loss[3]) {
		printf("FAIL stage: a call given another batch than the announced one did not "
		       "train on its own batch\n");
		failures++;
	}
	for (int k = 0; k < 4; k++)
		free(out[k]);
	free(init);
}

int main(void)
{
	gpu = gpu_test_load("test_gpu_layers");
	struct rng rg = {0x5eed};
	{
		struct hn_model m;
		struct hn_optim sgd = {.kind = HN_OPT_SGD};
		struct hn_backend_config cfg = {.max_batch = NB, .amp = HN_AMP_BF16};
		char err[HN_ERR_MAX] = "";
		float w[64] = {0};
		void *st = NULL;
		if (hn_model_build("d4", 1, 2, 2, 2, &m, err) == 0 && m.nparams <= 64 &&
		    gpu->create(&m, &sgd, &cfg, w, &st, err) == 0) {
			bf16_ok = 1;
			gpu->destroy(st);
		} else if (strstr(err, "compute capability")) {
			printf("bf16 not checked: %s\n", err);
		} else {
			printf("FAIL bf16 set-up: %s\n", err);
			failures++;
		}
	}
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		test_model(&shapes[i], &rg);
	test_dropout(&rg);
	test_stage(&rg);
	if (failures) {
		printf("test_gpu_layers: %d failures\n", failures);
		return 1;
	}
	printf("test_gpu_layers: all passed\n");
	return 0;
}
