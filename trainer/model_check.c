/*
 * model_check.c - the one check of a model description, shared by every
 * backend.
 *
 * A model description reaches a backend from a --model spec, a checkpoint or
 * the plugin interface, so it is a trust boundary: the CPU library and the
 * CUDA plugin both call hn_model_check() before they size a buffer from it,
 * and tests/fuzz_model.c drives it with hostile descriptions. It depends on
 * nothing but backend.h and libc so that the plugin can build it in.
 *
 * All arithmetic is in size_t after each factor is bounded, and every
 * "offset + length <= total" test is written as "length <= total - offset"
 * once offset <= total is known, so no sum can wrap.
 *
 * What a backend adds on top (cuDNN's limits, say) stays in that backend.
 */
#include "trainer/model_check.h"

#include <errno.h>
#include <stdio.h>

static size_t floats_in(const struct hn_layer *l)
{
	return (size_t)l->in_c * l->in_h * l->in_w;
}

static size_t floats_out(const struct hn_layer *l)
{
	return (size_t)l->out_c * l->out_h * l->out_w;
}

/* len floats at off inside a block of n, without overflow */
static int in_block(size_t off, size_t len, size_t n)
{
	return off <= n && len <= n - off;
}

/* k x k window, stride, padding: the output side the layer must declare */
static int window_ok(int in, int k, int stride, int pad, int out)
{
	if (k < 1 || stride < 1 || pad < 0 || pad > HN_CHECK_MAX_SIDE || k > in + 2 * pad)
		return 0;
	return (in + 2 * pad - k) / stride + 1 == out;
}

/* out_c * in_c * k * k into *n, or 0 where it does not fit */
static int conv_weights(const struct hn_layer *l, size_t *n)
{
	size_t a;
	return !__builtin_mul_overflow((size_t)l->out_c, (size_t)l->in_c, &a) &&
	       !__builtin_mul_overflow(a, (size_t)l->k, &a) &&
	       !__builtin_mul_overflow(a, (size_t)l->k, n);
}

static const char *check_layer(const struct hn_model *m, const struct hn_layer *l)
{
	size_t nin = floats_in(l), nout = floats_out(l), n;
	switch (l->kind) {
	case HN_LAYER_CONV2D:
		if (!window_ok(l->in_h, l->k, l->stride, l->pad, l->out_h) ||
		    !window_ok(l->in_w, l->k, l->stride, l->pad, l->out_w))
			return "bad conv2d window geometry";
		if (!conv_weights(l, &n) || l->w_len != n ||
		    (l->b_len != (size_t)l->out_c && l->b_len != 0))
			return "conv2d weight or bias size does not match its shape";
		return NULL;
	case HN_LAYER_MAXPOOL:
		if (l->pad < 0 || l->pad > l->k / 2 || l->out_c != l->in_c)
			return "maxpool pads at most half its window and keeps channels";
		if (!window_ok(l->in_h, l->k, l->stride, l->pad, l->out_h) ||
		    !window_ok(l->in_w, l->k, l->stride, l->pad, l->out_w))
			return "bad maxpool window geometry";
		if (l->w_len || l->b_len || l->s_len)
			return "maxpool has no parameters";
		return NULL;
	case HN_LAYER_DENSE:
		if (l->out_h != 1 || l->out_w != 1)
			return "dense output is not C x 1 x 1";
		if (l->w_len != nout * nin || l->b_len != nout)
			return "dense weight or bias size does not match its shape";
		return NULL;
	case HN_LAYER_RELU:
	case HN_LAYER_DROPOUT:
		if (l->out_c != l->in_c || l->out_h != l->in_h || l->out_w != l->in_w)
			return "an element-wise layer changes the shape";
		if (!(l->p >= 0.0f && l->p < 1.0f))
			return "dropout rate not in [0, 1)";
		if (l->w_len || l->b_len || l->s_len)
			return "an element-wise layer has no parameters";
		return NULL;
	case HN_LAYER_BATCHNORM:
		if (l->out_c != l->in_c || l->out_h != l->in_h || l->out_w != l->in_w ||
		    l->w_len != (size_t)l->in_c || l->b_len != l->w_len ||
		    l->b_off != l->w_off + l->w_len || l->s_len != 2 * l->w_len ||
		    l->s_off != l->b_off + l->b_len || !in_block(l->s_off, l->s_len, m->nparams))
			return "batchnorm parameters do not match its channels";
		return NULL;
	case HN_LAYER_AVGPOOL:
		if (l->out_c != l->in_c || l->out_h != 1 || l->out_w != 1)
			return "global average pooling keeps channels and gives C x 1 x 1";
		if (l->w_len || l->b_len || l->s_len)
			return "global average pooling has no parameters";
		return NULL;
	case HN_LAYER_SAVE:
	case HN_LAYER_ADD:
		if (l->out_c != l->in_c || l->out_h != l->in_h || l->out_w != l->in_w)
			return "a shortcut save or add changes the shape";
		if (l->w_len || l->b_len || l->s_len)
			return "a shortcut save or add has no parameters";
		return NULL;
	}
	return "unknown layer kind";
}

/* Does slot j (1 <= j <= layers; layer j-1's output) have the shape of l's input? */
static int same_shape_as_slot(const struct hn_model *m, int j, const struct hn_layer *l)
{
	const struct hn_layer *o = &m->layers[j - 1];
	return o->out_c == l->in_c && o->out_h == l->in_h && o->out_w == l->in_w;
}

/* Layers other than j's successor that read slot j: convs with from j, adds with shortcut j. */
static int skip_readers(const struct hn_model *m, int j)
{
	int n = 0;
	for (int i = 0; i < m->nlayers; i++)
		n += m->layers[i].from == j ||
		     (m->layers[i].kind == HN_LAYER_ADD && m->layers[i].shortcut == j);
	return n;
}

/*
 * The residual wiring, once every layer's own shape is known to be sound:
 * each SAVE is read again exactly once (by an add or a projection conv);
 * an add's shortcut is an earlier slot of its input's shape that is either
 * a SAVE's output or the output that a projection conv steps over, read by
 * that add alone; and what a projection conv steps over is such a shortcut.
 * Then every gradient of a slot has exactly the writers the backends give it.
 */
static const char *check_shortcuts(const struct hn_model *m, int *at)
{
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		*at = i;
		if (l->kind == HN_LAYER_SAVE && skip_readers(m, i + 1) != 1)
			return "a shortcut save is not read by exactly one add or projection";
		if (l->kind == HN_LAYER_ADD) {
			int j = l->shortcut;
			if (j < 1 || j >= i)
				return "an add's shortcut is not an earlier layer's output";
			if (!same_shape_as_slot(m, j, l))
				return "an add's shortcut differs in shape from its input "
				       "(a projection is needed)";
			if (m->layers[j - 1].kind != HN_LAYER_SAVE && !m->layers[j].from)
				return "an add's shortcut is neither a save nor the output a "
				       "projection steps over";
			if (skip_readers(m, j) != 1)
				return "a shortcut slot is read by more than one add or projection";
		}
		if (l->from) {
			int readers = 0;
			for (int a = i + 1; a < m->nlayers; a++)
				readers += m->layers[a].kind == HN_LAYER_ADD &&
					   m->layers[a].shortcut == i;
			if (readers != 1)
				return "what a projection steps over is not added back by a later add";
		}
	}
	return NULL;
}

int hn_model_check(const struct hn_model *m, char *err)
{
	const char *why = NULL;
	int at = -1;
	if (m->nlayers < 1 || m->nlayers > HN_MAX_LAYERS)
		why = "layer count out of range";
	else if (m->in_c < 1 || m->in_c > HN_CHECK_MAX_CHANNELS || m->in_h < 1 ||
		 m->in_h > HN_CHECK_MAX_SIDE || m->in_w < 1 || m->in_w > HN_CHECK_MAX_SIDE)
		why = "input shape out of range";
	else if ((size_t)m->in_c * m->in_h * m->in_w > HN_CHECK_MAX_FLOATS)
		why = "input larger than 2^31 floats per sample";
	else if (m->nclasses < 1 || m->nclasses > HN_CHECK_MAX_CLASSES)
		why = "class count out of range (1..65535)";
	else if (m->nparams > HN_CHECK_MAX_PARAMS)
		why = "more than 2^31 parameters";
	int c = m->in_c, h = m->in_h, w = m->in_w;
	for (int i = 0; !why && i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		at = i;
		if (l->from && (l->kind != HN_LAYER_CONV2D || l->from < 1 || l->from >= i ||
				m->layers[l->from - 1].kind != HN_LAYER_SAVE))
			why = "only a convolution takes its input from an earlier shortcut save";
		else if (l->shortcut && l->kind != HN_LAYER_ADD)
			why = "only an add layer has a shortcut";
		else if (l->from ? !same_shape_as_slot(m, l->from, l)
				 : l->in_c != c || l->in_h != h || l->in_w != w)
			why = "its input is not the previous layer's output";
		else if (l->out_c < 1 || l->out_c > HN_CHECK_MAX_CHANNELS || l->out_h < 1 ||
			 l->out_h > HN_CHECK_MAX_SIDE || l->out_w < 1 ||
			 l->out_w > HN_CHECK_MAX_SIDE)
			why = "output shape out of range";
		else if (floats_out(l) > HN_CHECK_MAX_FLOATS)
			why = "output larger than 2^31 floats per sample";
		else if (!in_block(l->w_off, l->w_len, m->nparams) ||
			 !in_block(l->b_off, l->b_len, m->nparams) ||
			 !in_block(l->s_off, l->s_len, m->nparams))
			why = "parameters outside the parameter block";
		else
			why = check_layer(m, l);
		c = l->out_c;
		h = l->out_h;
		w = l->out_w;
	}
	if (!why)
		why = check_shortcuts(m, &at);
	if (!why && (size_t)c * h * w != (size_t)m->nclasses) {
		why = "the last layer's output is not one value per class";
		at = m->nlayers - 1;
	}
	if (!why)
		return 0;
	if (err) {
		if (at >= 0)
			snprintf(err, HN_ERR_MAX, "model '%.32s': layer %d: %s", m->name, at, why);
		else
			snprintf(err, HN_ERR_MAX, "model '%.32s': %s", m->name, why);
	}
	return -EINVAL;
}
