/*
 * model.c - model descriptions (struct hn_model) from a built-in name or a
 * spec string, their shapes and parameter layout, and seeded initialisation.
 *
 * Built-ins are spelled as specs, so there is one parser and one shape
 * checker: "mlp" = d256-r-d128-r, "cnn" = c32k3-r-m2-c64k3-r-m2-d128-r,
 * "lenet5" = c6k5p2-r-m2-c16k5-r-m2-d120-r-d84-r, "cnn-bn" (below), each followed by the
 * final dense layer to nclasses. Parameters are laid out layer by layer,
 * weights then bias, in one allocation: the same layout on every backend and
 * in checkpoints. Every number in a spec is bounded before use (the spec can
 * come from a user), and every shape is checked to stay >= 1.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/perm.h"
#include "trainer/model.h"

#define MAX_DIM	   65536	/* channels / units / spatial size */
#define MAX_PARAMS (1ULL << 31) /* floats: 8 GiB of weights is far past any use here */

static const struct {
	const char *name, *spec;
} builtins[] = {
	{"mlp", "d256-r-d128-r"},
	{"cnn", "c32k3-r-m2-c64k3-r-m2-d128-r"},
	{"lenet5", "c6k5p2-r-m2-c16k5-r-m2-d120-r-d84-r"},
	/*
	 * cnn-bn: the cnn's two convolutions padded ("same") and each followed by
	 * batch normalisation, a batch-normalised dense layer of 256 and dropout:
	 * 826k parameters, 93% on Fashion-MNIST within 15 epochs (docs/HNTRAIN.md).
	 */
	{"cnn-bn", "c32k3p1-bn-r-m2-c64k3p1-bn-r-m2-d256-bn-r-x0.3"},
};

static void set_err(char *err, const char *fmt, const char *tok, const char *detail)
{
	if (err)
		snprintf(err, HN_ERR_MAX, fmt, tok, detail);
}

/* Parse an unsigned decimal at *p into [lo, hi]; advances *p. */
static int parse_int(const char **p, long lo, long hi, int *out)
{
	char *end;
	if (**p < '0' || **p > '9')
		return -EINVAL;
	long v = strtol(*p, &end, 10);
	if (end == *p || v < lo || v > hi)
		return -EINVAL;
	*p = end;
	*out = (int)v;
	return 0;
}

static int add_layer(struct hn_model *m, const struct hn_layer *proto, const char *tok, char *err)
{
	if (m->nlayers >= HN_MAX_LAYERS) {
		set_err(err, "model: too many layers at '%s' (%s)", tok, "at most 64");
		return -EINVAL;
	}
	struct hn_layer *l = &m->layers[m->nlayers];
	const struct hn_layer *prev = m->nlayers ? &m->layers[m->nlayers - 1] : NULL;
	*l = *proto;
	l->in_c = prev ? prev->out_c : m->in_c;
	l->in_h = prev ? prev->out_h : m->in_h;
	l->in_w = prev ? prev->out_w : m->in_w;
	l->w_off = l->w_len = l->b_off = l->b_len = l->s_off = l->s_len = 0;

	switch (l->kind) {
	case HN_LAYER_CONV2D:
	case HN_LAYER_MAXPOOL: {
		if (l->kind == HN_LAYER_MAXPOOL)
			l->out_c = l->in_c;
		long oh = ((long)l->in_h + 2L * l->pad - l->k) / l->stride + 1;
		long ow = ((long)l->in_w + 2L * l->pad - l->k) / l->stride + 1;
		if (l->in_h + 2 * l->pad < l->k || l->in_w + 2 * l->pad < l->k || oh < 1 ||
		    ow < 1) {
			char d[96];
			snprintf(d, sizeof d, "a %dx%d window does not fit a %dx%d input", l->k,
				 l->k, l->in_h, l->in_w);
			set_err(err, "model: layer '%s': %s", tok, d);
			return -EINVAL;
		}
		if (l->pad >= l->k) {
			set_err(err, "model: layer '%s': %s", tok, "padding must be below k");
			return -EINVAL;
		}
		l->out_h = (int)oh;
		l->out_w = (int)ow;
		if (l->kind == HN_LAYER_CONV2D) {
			l->w_len = (size_t)l->out_c * l->in_c * l->k * l->k;
			l->b_len = (size_t)l->out_c;
		}
		break;
	}
	case HN_LAYER_DENSE:
		l->out_h = l->out_w = 1;
		l->w_len = (size_t)l->out_c * l->in_c * l->in_h * l->in_w;
		l->b_len = (size_t)l->out_c;
		break;
	case HN_LAYER_RELU:
	case HN_LAYER_DROPOUT:
	case HN_LAYER_BATCHNORM:
		l->out_c = l->in_c;
		l->out_h = l->in_h;
		l->out_w = l->in_w;
		if (l->kind == HN_LAYER_BATCHNORM) {
			l->w_len = l->b_len = (size_t)l->out_c;
			l->s_len = 2 * (size_t)l->out_c;
		}
		break;
	case HN_LAYER_AVGPOOL:
		l->out_c = l->in_c;
		l->out_h = l->out_w = 1;
		break;
	}
	if ((uint64_t)l->out_c * l->out_h * l->out_w > (uint64_t)MAX_DIM * MAX_DIM) {
		set_err(err, "model: layer '%s': %s", tok, "output too large");
		return -EINVAL;
	}
	if (l->w_len) {
		l->w_off = m->nparams;
		l->b_off = m->nparams + l->w_len;
		l->s_off = l->s_len ? l->b_off + l->b_len : 0;
		m->nparams += l->w_len + l->b_len + l->s_len;
		if (m->nparams > MAX_PARAMS) {
			set_err(err, "model: layer '%s': %s", tok, "more than 2^31 parameters");
			return -EINVAL;
		}
	}
	m->nlayers++;
	return 0;
}

/* One token ("c32k3p1", "m2", "r", "d128", "x0.25", "bn", "gap") -> a layer prototype. */
static int parse_token(const char *tok, struct hn_layer *l)
{
	const char *p = tok + 1;
	memset(l, 0, sizeof *l);
	if (!strcmp(tok, "bn") || !strcmp(tok, "gap")) {
		l->kind = tok[0] == 'b' ? HN_LAYER_BATCHNORM : HN_LAYER_AVGPOOL;
		return 0;
	}
	switch (tok[0]) {
	case 'c':
		l->kind = HN_LAYER_CONV2D;
		l->stride = 1;
		if (parse_int(&p, 1, MAX_DIM, &l->out_c) || *p++ != 'k' ||
		    parse_int(&p, 1, 64, &l->k))
			return -EINVAL;
		if (*p == 's' && (p++, parse_int(&p, 1, 64, &l->stride)))
			return -EINVAL;
		if (*p == 'p' && (p++, parse_int(&p, 0, 64, &l->pad)))
			return -EINVAL;
		break;
	case 'm':
		l->kind = HN_LAYER_MAXPOOL;
		if (parse_int(&p, 1, 64, &l->k))
			return -EINVAL;
		l->stride = l->k;
		if (*p == 's' && (p++, parse_int(&p, 1, 64, &l->stride)))
			return -EINVAL;
		break;
	case 'r':
		l->kind = HN_LAYER_RELU;
		break;
	case 'd':
		l->kind = HN_LAYER_DENSE;
		if (parse_int(&p, 1, MAX_DIM, &l->out_c))
			return -EINVAL;
		break;
	case 'x': {
		char *end;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		double v = strtod(p, &end);
		if (end == p || !(v >= 0.0 && v < 1.0))
			return -EINVAL;
		l->kind = HN_LAYER_DROPOUT;
		l->p = (float)v;
		p = end;
		break;
	}
	default:
		return -EINVAL;
	}
	return *p == '\0' ? 0 : -EINVAL;
}

/* The spec of a built-in name, or name_or_spec itself. */
static const char *spec_of(const char *name_or_spec)
{
	for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
		if (!strcmp(name_or_spec, builtins[i].name))
			return builtins[i].spec;
	return name_or_spec;
}

int hn_model_check_spec(const char *name_or_spec, char *err)
{
	char buf[1024];
	if (!name_or_spec || !*name_or_spec) {
		set_err(err, "model: %s%s", "empty model name", "");
		return -EINVAL;
	}
	const char *spec = spec_of(name_or_spec);
	if (strlen(spec) >= sizeof buf) {
		set_err(err, "model: spec too long (%s%s)", "max 1023 characters", "");
		return -EINVAL;
	}
	strcpy(buf, spec);
	char *save = NULL;
	int n = 0;
	for (char *tok = strtok_r(buf, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
		struct hn_layer l;
		if (parse_token(tok, &l)) {
			set_err(err,
				"model: bad layer '%s' in '%s' (want c<out>k<k>[s<s>][p<p>], "
				"m<k>[s<s>], r, d<out>, x<p>, bn, gap)",
				tok, name_or_spec);
			return -EINVAL;
		}
		if (++n > HN_MAX_LAYERS) {
			set_err(err, "model: too many layers at '%s' (%s)", tok, "at most 64");
			return -EINVAL;
		}
	}
	return 0;
}

int hn_model_build(const char *name_or_spec, int in_c, int in_h, int in_w, int nclasses,
		   struct hn_model *m, char *err)
{
	char buf[1024];

	int rc = hn_model_check_spec(name_or_spec, err);
	if (rc < 0)
		return rc;
	if (in_c < 1 || in_h < 1 || in_w < 1 || in_c > MAX_DIM || in_h > MAX_DIM ||
	    in_w > MAX_DIM || nclasses < 1 || nclasses > MAX_DIM) {
		set_err(err, "model: bad input shape or class count%s%s", "", "");
		return -EINVAL;
	}
	memset(m, 0, sizeof *m);
	snprintf(m->name, sizeof m->name, "%s", name_or_spec);
	snprintf(buf, sizeof buf, "%s", spec_of(name_or_spec)); /* fits: checked above */
	m->in_c = in_c;
	m->in_h = in_h;
	m->in_w = in_w;
	m->nclasses = nclasses;

	char *save = NULL;
	for (char *tok = strtok_r(buf, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
		struct hn_layer l;
		parse_token(tok, &l); /* parses: checked above */
		if ((rc = add_layer(m, &l, tok, err)))
			return rc;
	}
	const struct hn_layer *last = m->nlayers ? &m->layers[m->nlayers - 1] : NULL;
	if (!last || last->kind != HN_LAYER_DENSE || last->out_c != nclasses) {
		struct hn_layer l;
		memset(&l, 0, sizeof l);
		l.kind = HN_LAYER_DENSE;
		l.out_c = nclasses;
		if ((rc = add_layer(m, &l, "(final dense)", err)))
			return rc;
	}
	return 0;
}

void hn_model_init_params(const struct hn_model *m, uint64_t seed, float *params)
{
	struct sprite_rng r;

	/* salt: the init stream must not coincide with the (seed, epoch) sample-order streams */
	sprite_rng_init(&r, seed ^ 0x696e697470617261ULL, 0);
	memset(params, 0, sizeof(float) * m->nparams);
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		if (l->kind == HN_LAYER_BATCHNORM) { /* gamma 1, beta 0, mean 0, var 1 */
			for (size_t c = 0; c < l->w_len; c++) {
				params[l->w_off + c] = 1.0f;
				params[l->s_off + l->w_len + c] = 1.0f;
			}
			continue;
		}
		if (!l->w_len)
			continue;
		/* He/Kaiming-uniform for ReLU nets: U(-b, b), b = sqrt(6 / fan_in) */
		size_t fan_in = l->w_len / (size_t)l->out_c;
		float bound = (float)sqrt(6.0 / (double)fan_in);
		float *w = params + l->w_off;
		for (size_t j = 0; j < l->w_len; j++)
			w[j] = (2.0f * sprite_rng_uniform(&r) - 1.0f) * bound;
	}
}

uint64_t hn_model_activation_floats(const struct hn_model *m)
{
	uint64_t sum = (uint64_t)m->in_c * m->in_h * m->in_w;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		sum += (uint64_t)l->out_c * l->out_h * l->out_w;
	}
	return sum;
}

double hn_model_train_flops(const struct hn_model *m)
{
	double flops = 0;
	int below = 0; /* a layer below this one has parameters */
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		double macs = 0;
		if (l->kind == HN_LAYER_CONV2D)
			macs = (double)l->out_c * l->out_h * l->out_w * l->in_c * l->k * l->k;
		else if (l->kind == HN_LAYER_DENSE)
			macs = (double)l->out_c * l->in_c * l->in_h * l->in_w;
		flops += 2 * macs * (below ? 3 : 2);
		below |= l->w_len > 0;
	}
	return flops;
}

static const char *kind_name(enum hn_layer_kind k)
{
	switch (k) {
	case HN_LAYER_CONV2D:
		return "conv2d";
	case HN_LAYER_MAXPOOL:
		return "maxpool";
	case HN_LAYER_RELU:
		return "relu";
	case HN_LAYER_DENSE:
		return "dense";
	case HN_LAYER_DROPOUT:
		return "dropout";
	case HN_LAYER_BATCHNORM:
		return "batchnorm";
	case HN_LAYER_AVGPOOL:
		return "avgpool";
	}
	return "?";
}

void hn_model_describe(const struct hn_model *m, char *buf, size_t cap)
{
	size_t at = 0;
	if (!cap)
		return;
	buf[0] = '\0';
	for (int i = 0; i < m->nlayers && at < cap; i++) {
		const struct hn_layer *l = &m->layers[i];
		char extra[48] = "";
		if (l->kind == HN_LAYER_CONV2D)
			snprintf(extra, sizeof extra, " k%d s%d p%d", l->k, l->stride, l->pad);
		else if (l->kind == HN_LAYER_MAXPOOL)
			snprintf(extra, sizeof extra, " k%d s%d", l->k, l->stride);
		else if (l->kind == HN_LAYER_DROPOUT)
			snprintf(extra, sizeof extra, " p=%.3g", l->p);
		int w = snprintf(buf + at, cap - at, "%-8s%s %dx%dx%d -> %dx%dx%d, %zu params\n",
				 kind_name(l->kind), extra, l->in_c, l->in_h, l->in_w, l->out_c,
				 l->out_h, l->out_w, l->w_len + l->b_len + l->s_len);
		if (w < 0)
			return;
		at += (size_t)w;
	}
	if (at < cap)
		snprintf(buf + at, cap - at, "total %zu params\n", m->nparams);
}
