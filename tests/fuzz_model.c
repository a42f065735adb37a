/*
 * fuzz_model.c - fuzz target: model descriptions (struct hn_model) as a
 * backend receives them from a checkpoint, a --model spec or the plugin
 * interface, checked by the one hn_model_check() (trainer/model_check.c).
 *
 * The input's bytes are the description itself (shorter inputs are padded
 * with zeros). Seeds are the descriptions trainer/model.c builds for every
 * preset and some specs, each of which the check must accept. For any input
 * the check accepts, this target re-derives, in 128-bit arithmetic, what a
 * backend sizes from it: every parameter range inside the block, shapes that
 * chain to one value per class, weight counts that match the geometry. An
 * accepted description that breaks one of these aborts; a refused one must
 * say why.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz.h"
#include "trainer/model.h"
#include "trainer/model_check.h"

typedef unsigned __int128 u128;

static void broken(const char *what, int layer)
{
	fprintf(stderr, "fuzz_model: layer %d: %s\n", layer, what);
	abort();
}

static void check_accepted(const struct hn_model *m)
{
	if (m->nlayers < 1 || m->nlayers > HN_MAX_LAYERS || m->nclasses < 1 ||
	    m->nclasses > 65535 || m->nparams > HN_CHECK_MAX_PARAMS)
		broken("accepted counts out of range", -1);
	int c = m->in_c, h = m->in_h, w = m->in_w;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		if (l->in_c != c || l->in_h != h || l->in_w != w || c < 1 || h < 1 || w < 1)
			broken("accepted shapes that do not chain", i);
		u128 in = (u128)c * h * w, out = (u128)l->out_c * l->out_h * l->out_w;
		if (in > HN_CHECK_MAX_FLOATS || out > HN_CHECK_MAX_FLOATS || l->out_c < 1 ||
		    l->out_h < 1 || l->out_w < 1)
			broken("accepted an activation out of range", i);
		if ((u128)l->w_off + l->w_len > m->nparams ||
		    (u128)l->b_off + l->b_len > m->nparams ||
		    (u128)l->s_off + l->s_len > m->nparams)
			broken("accepted parameters outside the block", i);
		u128 wl = 0, bl = 0;
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			wl = (u128)l->out_c * l->in_c * l->k * l->k;
			bl = (u128)l->out_c;
			break;
		case HN_LAYER_DENSE:
			wl = out * in;
			bl = out;
			break;
		case HN_LAYER_BATCHNORM:
			wl = bl = (u128)l->in_c;
			if (l->s_len != 2 * (size_t)l->in_c)
				broken("accepted batchnorm statistics of the wrong size", i);
			break;
		case HN_LAYER_MAXPOOL:
		case HN_LAYER_RELU:
		case HN_LAYER_DROPOUT:
		case HN_LAYER_AVGPOOL:
			break;
		default:
			broken("accepted an unknown kind", i);
		}
		if (wl != l->w_len || bl != l->b_len)
			broken("accepted weights that do not match the geometry", i);
		if ((l->kind == HN_LAYER_CONV2D || l->kind == HN_LAYER_MAXPOOL) &&
		    (l->k < 1 || l->stride < 1 || l->pad < 0 ||
		     (l->in_h + 2 * l->pad - l->k) / l->stride + 1 != l->out_h ||
		     (l->in_w + 2 * l->pad - l->k) / l->stride + 1 != l->out_w))
			broken("accepted a window that does not give its output", i);
		c = l->out_c;
		h = l->out_h;
		w = l->out_w;
	}
	if ((u128)c * h * w != (u128)m->nclasses)
		broken("accepted a last layer that is not one value per class", m->nlayers - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hn_model m;
	memset(&m, 0, sizeof m);
	memcpy(&m, data, size < sizeof m ? size : sizeof m);
	char err[HN_ERR_MAX] = "";
	int rc = hn_model_check(&m, err);
	if (rc < 0) {
		if (rc != -EINVAL || !err[0])
			broken("refused without -EINVAL and a message", -1);
		return 0;
	}
	check_accepted(&m);
	fuzz_accepted++;
	fuzz_sink += m.nparams;
	return 0;
}

static const struct {
	const char *spec;
	int c, h, w, classes;
} models[] = {
	{"mlp", 1, 28, 28, 10},
	{"cnn", 1, 28, 28, 10},
	{"cnn-bn", 1, 28, 28, 10},
	{"cnn", 3, 64, 64, 1000},
	{"c8k3s2p1-r-m3s2-c16k5p2-bn-r-gap-x0.25", 3, 37, 41, 7},
	{"d16-r-x0.5", 2, 3, 3, 65535},
};

static int seeds(struct fuzz_buf **out, char *err)
{
	size_t n = sizeof models / sizeof models[0];
	struct fuzz_buf *b = calloc(n, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	for (size_t i = 0; i < n; i++) {
		struct hn_model m;
		memset(&m, 0, sizeof m);
		if (hn_model_build(models[i].spec, models[i].c, models[i].h, models[i].w,
				   models[i].classes, &m, err) < 0)
			return -1;
		if (hn_model_check(&m, err) < 0)
			return -1; /* the check refuses what model.c builds */
		b[i].data = malloc(sizeof m);
		if (!b[i].data)
			return -1;
		memcpy(b[i].data, &m, sizeof m);
		b[i].len = sizeof m;
		snprintf(b[i].name, sizeof b[i].name, "model-%zu", i);
	}
	return (int)n;
}

const struct fuzz_target fuzz_target = {"fuzz_model", seeds, NULL};
