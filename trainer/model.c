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

#include "common/error.h"
#include "common/perm.h"
#include "trainer/model.h"

#define MAX_DIM	   65536	/* channels / units / spatial size */
#define MAX_PARAMS (1ULL << 31) /* floats: 8 GiB of weights is far past any use here */
#define NO_BIAS	   ((size_t)-1) /* a conv prototype's b_len: no bias ("nb") */

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
	/*
	 * resnet-fm: a small residual net for 28x28 gray tiles (Fashion-MNIST):
	 * a 3x3 stem of 32 and a 2x2 max-pool (so the blocks start at 14x14),
	 * a basic block at 32, then 64 and 128 channels at stride 2 with
	 * projections, global average pooling: 0.31M parameters, 10M
	 * multiply-adds a sample (docs/HNTRAIN.md).
	 */
	{"resnet-fm", "c32k3p1nb-bn-r-m2-res32-res64s2p-res128s2p-gap"},
};

/*
 * resnet18 / resnet50, torchvision's layouts (stages of 2-2-2-2 basic or
 * 3-4-6-3 bottleneck blocks, 64..512 wide), with the stem by tile size: the
 * ImageNet one (7x7 stride 2, 3x3 stride-2 max-pool) for tiles of 64x64 and
 * larger, the CIFAR one (3x3 stride 1, no max-pool) below.
 */
#define RESNET_LARGE 64
#define STEM_LARGE   "c64k7s2p3nb-bn-r-m3s2p1-"
#define STEM_SMALL   "c64k3p1nb-bn-r-"
#define RESNET18     "res64x2-res128s2px2-res256s2px2-res512s2px2-gap"
#define RESNET50     "bot64px3-bot128s2px4-bot256s2px6-bot512s2px3-gap"
static const struct {
	const char *name, *large, *small;
} resnets[] = {
	{"resnet18", STEM_LARGE RESNET18, STEM_SMALL RESNET18},
	{"resnet50", STEM_LARGE RESNET50, STEM_SMALL RESNET50},
};

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
	if (m->nlayers >= HN_MAX_LAYERS)
		return sprite_fail(err, -EINVAL, "model: too many layers at '%s' (at most 64)",
				   tok);
	struct hn_layer *l = &m->layers[m->nlayers];
	const struct hn_layer *prev = m->nlayers ? &m->layers[m->nlayers - 1] : NULL;
	*l = *proto;
	if (l->from) /* a projection: its input is a save's output (slot from) */
		prev = &m->layers[l->from - 1];
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
			return sprite_fail(err, -EINVAL, "model: layer '%s': %s", tok, d);
		}
		if (l->pad >= l->k || (l->kind == HN_LAYER_MAXPOOL && 2 * l->pad > l->k))
			return sprite_fail(
				err, -EINVAL,
				"model: layer '%s': padding must be below k (maxpool: at most k / 2)",
				tok);
		l->out_h = (int)oh;
		l->out_w = (int)ow;
		if (l->kind == HN_LAYER_CONV2D) {
			l->w_len = (size_t)l->out_c * l->in_c * l->k * l->k;
			l->b_len = proto->b_len == NO_BIAS ? 0 : (size_t)l->out_c;
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
	case HN_LAYER_SAVE:
	case HN_LAYER_ADD:
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
	if ((uint64_t)l->out_c * l->out_h * l->out_w > (uint64_t)MAX_DIM * MAX_DIM)
		return sprite_fail(err, -EINVAL, "model: layer '%s': output too large", tok);
	if (l->w_len) {
		l->w_off = m->nparams;
		l->b_off = m->nparams + l->w_len;
		l->s_off = l->s_len ? l->b_off + l->b_len : 0;
		m->nparams += l->w_len + l->b_len + l->s_len;
		if (m->nparams > MAX_PARAMS)
			return sprite_fail(err, -EINVAL,
					   "model: layer '%s': more than 2^31 parameters", tok);
	}
	m->nlayers++;
	return 0;
}

/*
 * A residual block token: res<c> (basic: two 3x3 convs of c channels) or
 * bot<w> (bottleneck: 1x1 w, 3x3 w, 1x1 4w), [s<stride>] on the first
 * block's first 3x3 conv, [p] a 1x1 projection shortcut on the first block,
 * [x<n>] n blocks (the others stride 1, identity shortcuts).
 */
struct block {
	int bottleneck, c, stride, proj, count;
};

/* One token ("c32k3p1", "m2", "r", "d128", "x0.25", "bn", "gap", "res64s2px2") -> a layer
 * prototype, or a block (*blk, when blk->count > 0). */
static int parse_token(const char *tok, struct hn_layer *l, struct block *blk)
{
	const char *p = tok + 1;
	memset(l, 0, sizeof *l);
	memset(blk, 0, sizeof *blk);
	if (!strcmp(tok, "bn") || !strcmp(tok, "gap")) {
		l->kind = tok[0] == 'b' ? HN_LAYER_BATCHNORM : HN_LAYER_AVGPOOL;
		return 0;
	}
	if (!strncmp(tok, "res", 3) || !strncmp(tok, "bot", 3)) {
		p = tok + 3;
		blk->bottleneck = tok[0] == 'b';
		blk->stride = blk->count = 1;
		if (parse_int(&p, 1, blk->bottleneck ? MAX_DIM / 4 : MAX_DIM, &blk->c))
			return -EINVAL;
		if (*p == 's' && (p++, parse_int(&p, 1, 64, &blk->stride)))
			return -EINVAL;
		if (*p == 'p')
			p++, blk->proj = 1;
		if (*p == 'x' && (p++, parse_int(&p, 1, HN_MAX_LAYERS, &blk->count)))
			return -EINVAL;
		return *p == '\0' ? 0 : -EINVAL;
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
		if (p[0] == 'n' && p[1] == 'b')
			p += 2, l->b_len = NO_BIAS;
		break;
	case 'm':
		l->kind = HN_LAYER_MAXPOOL;
		if (parse_int(&p, 1, 64, &l->k))
			return -EINVAL;
		l->stride = l->k;
		if (*p == 's' && (p++, parse_int(&p, 1, 64, &l->stride)))
			return -EINVAL;
		if (*p == 'p' && (p++, parse_int(&p, 0, 32, &l->pad)))
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

/* A conv prototype: out channels, k x k, stride, "same" padding, no bias, input slot. */
static struct hn_layer conv_nb(int out_c, int k, int stride, int from)
{
	struct hn_layer l;
	memset(&l, 0, sizeof l);
	l.kind = HN_LAYER_CONV2D;
	l.out_c = out_c;
	l.k = k;
	l.stride = stride;
	l.pad = k / 2;
	l.b_len = NO_BIAS;
	l.from = from;
	return l;
}

static int add_kind(struct hn_model *m, enum hn_layer_kind kind, int shortcut, const char *tok,
		    char *err)
{
	struct hn_layer l;
	memset(&l, 0, sizeof l);
	l.kind = kind;
	l.shortcut = shortcut;
	return add_layer(m, &l, tok, err);
}

/*
 * One residual block as torchvision builds it: save X, the main path (each
 * conv bias-free and batch-normalised, ReLUs between), the 1x1 projection
 * of X and its batchnorm where asked, the add and a ReLU. The stride sits
 * on the first 3x3 conv (torchvision's "v1.5" bottleneck too).
 */
static int add_block(struct hn_model *m, const struct block *b, const char *tok, char *err)
{
	struct hn_layer l;
	int rc, save = m->nlayers;
	const int out = b->bottleneck ? 4 * b->c : b->c;
	if ((rc = add_kind(m, HN_LAYER_SAVE, 0, tok, err)))
		return rc;
	const struct hn_layer *x = &m->layers[save];
	int xc = x->out_c, xh = x->out_h, xw = x->out_w;
	int ks[3] = {3, 3, 0}, cs[3] = {b->c, b->c, 0}, ss[3] = {b->stride, 1, 1};
	if (b->bottleneck) {
		ks[0] = 1, ks[1] = 3, ks[2] = 1;
		cs[2] = out;
		ss[0] = 1, ss[1] = b->stride;
	}
	for (int k = 0; k < 3 && ks[k]; k++) {
		l = conv_nb(cs[k], ks[k], ss[k], 0);
		if ((rc = add_layer(m, &l, tok, err)) ||
		    (rc = add_kind(m, HN_LAYER_BATCHNORM, 0, tok, err)))
			return rc;
		if (k < 2 && ks[k + 1] && (rc = add_kind(m, HN_LAYER_RELU, 0, tok, err)))
			return rc;
	}
	const struct hn_layer *y = &m->layers[m->nlayers - 1];
	int shortcut = save + 1;
	if (b->proj) {
		shortcut = m->nlayers;
		l = conv_nb(out, 1, b->stride, save + 1);
		if ((rc = add_layer(m, &l, tok, err)) ||
		    (rc = add_kind(m, HN_LAYER_BATCHNORM, 0, tok, err)))
			return rc;
	} else if (y->out_c != xc || y->out_h != xh || y->out_w != xw) {
		char d[160];
		snprintf(d, sizeof d,
			 "its shortcut goes from %dx%dx%d into %dx%dx%d: a different shape needs a "
			 "projection (add 'p', as in res128s2p)",
			 xc, xh, xw, y->out_c, y->out_h, y->out_w);
		return sprite_fail(err, -EINVAL, "model: block '%s': %s", tok, d);
	}
	if ((rc = add_kind(m, HN_LAYER_ADD, shortcut, tok, err)))
		return rc;
	return add_kind(m, HN_LAYER_RELU, 0, tok, err);
}

/* The spec of a built-in name for an h x w tile, or name_or_spec itself. */
static const char *spec_of(const char *name_or_spec, int h, int w)
{
	for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
		if (!strcmp(name_or_spec, builtins[i].name))
			return builtins[i].spec;
	for (size_t i = 0; i < sizeof resnets / sizeof resnets[0]; i++)
		if (!strcmp(name_or_spec, resnets[i].name))
			return h >= RESNET_LARGE && w >= RESNET_LARGE ? resnets[i].large
								      : resnets[i].small;
	return name_or_spec;
}

int hn_model_check_spec(const char *name_or_spec, char *err)
{
	char buf[1024];
	if (!name_or_spec || !*name_or_spec)
		return sprite_fail(err, -EINVAL, "model: empty model name");
	const char *spec = spec_of(name_or_spec, RESNET_LARGE, RESNET_LARGE);
	if (strlen(spec) >= sizeof buf)
		return sprite_fail(err, -EINVAL, "model: spec too long (max 1023 characters)");
	strcpy(buf, spec);
	char *save = NULL;
	int n = 0;
	for (char *tok = strtok_r(buf, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
		struct hn_layer l;
		struct block b;
		if (parse_token(tok, &l, &b))
			return sprite_fail(
				err, -EINVAL,
				"model: bad layer '%s' in '%s' (want c<out>k<k>[s<s>][p<p>][nb], "
				"m<k>[s<s>][p<p>], r, d<out>, x<p>, bn, gap, "
				"res<c>[s<s>][p][x<n>], bot<w>[s<s>][p][x<n>])",
				tok, name_or_spec);
		if (++n > HN_MAX_LAYERS)
			return sprite_fail(err, -EINVAL,
					   "model: too many layers at '%s' (at most 64)", tok);
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
	    in_w > MAX_DIM || nclasses < 1 || nclasses > MAX_DIM)
		return sprite_fail(err, -EINVAL, "model: bad input shape or class count");
	memset(m, 0, sizeof *m);
	snprintf(m->name, sizeof m->name, "%s", name_or_spec);
	/* fits: checked above (both layouts of a resnet are as long) */
	snprintf(buf, sizeof buf, "%s", spec_of(name_or_spec, in_h, in_w));
	m->in_c = in_c;
	m->in_h = in_h;
	m->in_w = in_w;
	m->nclasses = nclasses;

	char *save = NULL;
	for (char *tok = strtok_r(buf, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
		struct hn_layer l;
		struct block b;
		parse_token(tok, &l, &b); /* parses: checked above */
		for (int k = 0; k < b.count; k++) {
			struct block one = b;
			if (k) /* the stage's later blocks: stride 1, identity */
				one.stride = 1, one.proj = 0;
			if ((rc = add_block(m, &one, tok, err)))
				return rc;
		}
		if (!b.count && (rc = add_layer(m, &l, tok, err)))
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

size_t hn_model_trainable(const struct hn_model *m)
{
	size_t stats = 0;
	for (int i = 0; i < m->nlayers; i++)
		stats += m->layers[i].s_len;
	return m->nparams - stats;
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
	case HN_LAYER_SAVE:
		return "save";
	case HN_LAYER_ADD:
		return "add";
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
		if (l->kind == HN_LAYER_CONV2D && l->from)
			snprintf(extra, sizeof extra, " k%d s%d p%d%s of %d", l->k, l->stride,
				 l->pad, l->b_len ? "" : " nb", l->from - 1);
		else if (l->kind == HN_LAYER_CONV2D)
			snprintf(extra, sizeof extra, " k%d s%d p%d%s", l->k, l->stride, l->pad,
				 l->b_len ? "" : " nb");
		else if (l->kind == HN_LAYER_MAXPOOL)
			snprintf(extra, sizeof extra, " k%d s%d p%d", l->k, l->stride, l->pad);
		else if (l->kind == HN_LAYER_ADD)
			snprintf(extra, sizeof extra, " + output of %d", l->shortcut - 1);
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
