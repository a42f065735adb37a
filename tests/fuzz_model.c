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
	int reads[HN_MAX_LAYERS + 1] = {0}; /* per slot: skip readers (projections, adds) */
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		if (l->from) { /* a projection: its input is an earlier save's output */
			if (l->kind != HN_LAYER_CONV2D || l->from < 1 || l->from >= i ||
			    m->layers[l->from - 1].kind != HN_LAYER_SAVE)
				broken("accepted an input slot that is not an earlier save", i);
			const struct hn_layer *s = &m->layers[l->from - 1];
			c = s->out_c, h = s->out_h, w = s->out_w;
			reads[l->from]++;
		}
		if (l->kind == HN_LAYER_ADD) {
			int j = l->shortcut;
			if (j < 1 || j >= i)
				broken("accepted a shortcut that is not an earlier output", i);
			const struct hn_layer *s = &m->layers[j - 1];
			if (s->out_c != c || s->out_h != h || s->out_w != w)
				broken("accepted a shortcut of another shape", i);
			if (s->kind != HN_LAYER_SAVE && !m->layers[j].from)
				broken("accepted a shortcut that two layers read", i);
			reads[j]++;
		} else if (l->shortcut) {
			broken("accepted a shortcut on a layer that is not an add", i);
		}
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
			bl = l->b_len ? (u128)l->out_c : 0; /* bias-free: resnets' */
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
		case HN_LAYER_SAVE:
		case HN_LAYER_ADD:
			if (out != in || l->out_c != c)
				broken("accepted a save or add that changes the shape", i);
			break;
		case HN_LAYER_MAXPOOL:
			if (2 * (u128)l->pad > (u128)l->k)
				broken("accepted a max-pool padded past half its window", i);
			break;
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
	/* every gradient a backend adds up has its writers: a save is read once more, */
	for (int i = 0; i < m->nlayers; i++) {
		if (m->layers[i].kind == HN_LAYER_SAVE && reads[i + 1] != 1)
			broken("accepted a save not read by exactly one shortcut", i);
		if (m->layers[i].kind != HN_LAYER_SAVE && reads[i + 1] > 1)
			broken("accepted an output read by two shortcuts", i);
		/* and what a projection steps over is added back later */
		if (m->layers[i].from) {
			int added = 0;
			for (int a = i + 1; a < m->nlayers; a++)
				added += m->layers[a].kind == HN_LAYER_ADD &&
					 m->layers[a].shortcut == i;
			if (added != 1)
				broken("accepted a projection whose skipped output is lost", i);
		}
	}
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
	{"resnet-fm", 1, 28, 28, 10},
	{"resnet18", 3, 32, 32, 10},
	{"resnet18", 3, 64, 64, 1000},
	{"resnet50", 1, 28, 28, 10},
	{"c8k3s2p1nb-bn-r-m3s2p1-res8-bot4s2p-gap", 2, 17, 19, 5},
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
