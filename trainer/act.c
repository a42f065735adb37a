/*
 * act.c - elementwise layers: the input conversion (and per-channel
 * normalisation), ReLU, inverted dropout, and residual blocks' add and
 * save (the gradient of a block's input is its two readers' sum).
 *
 * ReLU runs in place (the backend aliases its input and output buffers), and
 * its backward reads the output's sign, which is the same mask as the input's.
 * Dropout keeps a float mask of 0 or 1/(1-p) so forward and backward are one
 * multiply each; the mask comes from sprite_rng (common/perm.h) seeded by
 * (seed, step), so a step's mask does not depend on anything but those two
 * numbers and the layer's position in the stream.
 */
#include "common/perm.h"
#include "trainer/layers.h"

HN_HOT void hn_input_forward(float *restrict out, const uint8_t *restrict tiles, int n, int c,
			     int h, int w, const float *mean, const float *std)
{
	const size_t hw = (size_t)h * w;
	const float scale = 1.0f / 255.0f;

	for (int s = 0; s < n; s++) {
		const uint8_t *restrict src = tiles + (size_t)s * hw * c;
		float *restrict dst = out + (size_t)s * hw * c;
		if (c == 1) {
			for (size_t i = 0; i < hw; i++)
				dst[i] = src[i] * scale;
		} else {
			for (int ch = 0; ch < c; ch++)
				for (size_t i = 0; i < hw; i++)
					dst[ch * hw + i] = src[i * c + ch] * scale;
		}
		if (!mean)
			continue;
		for (int ch = 0; ch < c && ch < HN_NORM_CH; ch++) {
			const float mu = mean[ch], inv = 1.0f / std[ch];
			float *restrict p = dst + ch * hw;
			for (size_t i = 0; i < hw; i++)
				p[i] = (p[i] - mu) * inv;
		}
	}
}

HN_HOT void hn_relu_forward(float *out, const float *in, size_t count)
{
	for (size_t i = 0; i < count; i++)
		out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

HN_HOT void hn_relu_backward(float *din, const float *dout, const float *out, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		float g = dout[i]; /* unconditional load: lets the loop vectorize */
		din[i] = out[i] > 0.0f ? g : 0.0f;
	}
}

void hn_dropout_mask(float *restrict mask, size_t count, float p, uint64_t seed, uint64_t step)
{
	struct sprite_rng r;
	const float keep = 1.0f / (1.0f - p);

	/* a salt keeps the dropout stream apart from the sample order's (seed, epoch) stream */
	sprite_rng_init(&r, seed ^ 0x64726f706f757421ULL, step);
	for (size_t i = 0; i < count; i++)
		mask[i] = sprite_rng_uniform(&r) < p ? 0.0f : keep;
}

HN_HOT void hn_dropout_forward(float *restrict out, const float *restrict in,
			       const float *restrict mask, size_t count)
{
	for (size_t i = 0; i < count; i++)
		out[i] = in[i] * mask[i];
}

HN_HOT void hn_dropout_backward(float *restrict din, const float *restrict dout,
				const float *restrict mask, size_t count)
{
	for (size_t i = 0; i < count; i++)
		din[i] = dout[i] * mask[i];
}

/* Residual add: out = x + y, then ReLU when relu (the add's fused ReLU). */
HN_HOT void hn_add_forward(float *restrict out, const float *restrict x, const float *restrict y,
			   size_t count, int relu)
{
	if (relu) {
		for (size_t i = 0; i < count; i++) {
			float v = x[i] + y[i];
			out[i] = v > 0.0f ? v : 0.0f;
		}
	} else {
		for (size_t i = 0; i < count; i++)
			out[i] = x[i] + y[i];
	}
}

/*
 * Its backward: both operands get dout, through the fused ReLU's mask
 * (out_relu > 0) when out_relu is given; dx may be NULL (nothing below).
 */
HN_HOT void hn_add_backward(float *restrict dx, float *restrict dy, const float *restrict dout,
			    const float *restrict out_relu, size_t count)
{
	if (out_relu) {
		for (size_t i = 0; i < count; i++) {
			float g = dout[i];
			dy[i] = out_relu[i] > 0.0f ? g : 0.0f;
		}
	} else {
		for (size_t i = 0; i < count; i++)
			dy[i] = dout[i];
	}
	if (dx)
		for (size_t i = 0; i < count; i++)
			dx[i] = dy[i];
}

/* A shortcut save's backward: the block input's gradient is the sum of its two readers'. */
HN_HOT void hn_save_backward(float *restrict dx, const float *restrict dout,
			     const float *restrict dskip, size_t count)
{
	for (size_t i = 0; i < count; i++)
		dx[i] = dout[i] + dskip[i];
}
