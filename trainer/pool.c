/*
 * pool.c - max pooling (k x k window, stride, padding that never wins) with
 * argmax indices.
 *
 * The forward pass records, per output element, the index of the winning
 * input within its channel plane (int32: planes are small even when batches
 * are not), so backward is a scatter with no comparisons and no recompute.
 * Ties go to the first element in row-major order. The common 2x2 stride-2
 * case has its own loop: it is most of the pooling in the built-in models.
 */
#include <string.h>

#include "trainer/layers.h"

HN_HOT void hn_maxpool_forward(float *out, int32_t *idx, const float *in, int n,
			       const struct hn_layer *l)
{
	const int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w, K = l->k, S = l->stride;
	const int Pd = l->pad;
	const size_t planes = (size_t)n * l->in_c;

	for (size_t pl = 0; pl < planes; pl++) {
		const float *restrict src = in + pl * H * W;
		float *restrict dst = out + pl * OH * OW;
		int32_t *restrict id = idx + pl * OH * OW;
		if (K == 2 && S == 2 && !Pd) {
			for (int oh = 0; oh < OH; oh++) {
				const float *r0 = src + (size_t)(2 * oh) * W, *r1 = r0 + W;
				/* branchless selects: the compiler can vectorize across ow */
				for (int ow = 0; ow < OW; ow++) {
					int j = 2 * ow;
					int32_t base = 2 * oh * W + j;
					float a = r0[j], b = r0[j + 1], c = r1[j], d = r1[j + 1];
					float m = a;
					int32_t at = base;
					at = b > m ? base + 1 : at;
					m = b > m ? b : m;
					at = c > m ? base + W : at;
					m = c > m ? c : m;
					at = d > m ? base + W + 1 : at;
					m = d > m ? d : m;
					dst[oh * OW + ow] = m;
					id[oh * OW + ow] = at;
				}
			}
			continue;
		}
		for (int oh = 0; oh < OH; oh++) {
			/* the window's rows and columns inside the plane (padding never wins) */
			const int h0 = oh * S - Pd > 0 ? oh * S - Pd : 0;
			const int h1 = oh * S - Pd + K < H ? oh * S - Pd + K : H;
			for (int ow = 0; ow < OW; ow++) {
				const int w0 = ow * S - Pd > 0 ? ow * S - Pd : 0;
				const int w1 = ow * S - Pd + K < W ? ow * S - Pd + K : W;
				int32_t at = h0 * W + w0;
				float m = src[at];
				for (int ih = h0; ih < h1; ih++) {
					for (int iw = w0; iw < w1; iw++) {
						int32_t i = ih * W + iw;
						if (src[i] > m) {
							m = src[i];
							at = i;
						}
					}
				}
				dst[oh * OW + ow] = m;
				id[oh * OW + ow] = at;
			}
		}
	}
}

HN_HOT void hn_maxpool_backward(float *din, const float *dout, const int32_t *idx, int n,
				const struct hn_layer *l)
{
	const size_t in_plane = (size_t)l->in_h * l->in_w, out_plane = (size_t)l->out_h * l->out_w;
	const size_t planes = (size_t)n * l->in_c;

	memset(din, 0, sizeof(float) * planes * in_plane);
	for (size_t pl = 0; pl < planes; pl++) {
		float *restrict dst = din + pl * in_plane;
		const float *restrict src = dout + pl * out_plane;
		const int32_t *restrict id = idx + pl * out_plane;
		/* += : overlapping windows (stride < k) may pick the same input twice */
		for (size_t o = 0; o < out_plane; o++)
			dst[id[o]] += src[o];
	}
}
