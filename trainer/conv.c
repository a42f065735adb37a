/*
 * conv.c - 2-D convolution on the CPU: im2col over all n samples handed in
 * and one OpenBLAS sgemm per pass.
 *
 * Why this shape: a per-sample GEMM for a small layer (e.g. 64 x 288 x 121)
 * leaves OpenBLAS starved, while one GEMM over several samples (64 x 288 x
 * 484 for a 4-sample chunk; the backend picks n to fit the cache) runs near
 * peak. The price is a reorder between the GEMM's [out_c][n*P] result and
 * NCHW activations; it is a copy of contiguous runs of P floats, and the bias
 * add and a following ReLU are fused into it, so it costs one pass over the
 * output. Backward mirrors it: dout is reordered into [out_c][n*P] (gated by
 * the fused ReLU's mask, summed for the bias), the filter gradient is one
 * sgemm against the im2col matrix, and the input gradient is one sgemm into a
 * column matrix folded back by col2im.
 */
#include <string.h>

#include <cblas.h>

#include "trainer/layers.h"

size_t hn_conv2d_col_floats(const struct hn_layer *l, int n)
{
	return (size_t)l->in_c * l->k * l->k * (size_t)n * l->out_h * l->out_w;
}

/* Sum of x[0..len) in 16 independent lanes: vectorizes without -ffast-math, fixed order. */
HN_HOT static float sum_lanes(const float *restrict x, size_t len)
{
	float acc[16] = {0};
	size_t i = 0;
	for (; i + 16 <= len; i += 16)
		for (int u = 0; u < 16; u++)
			acc[u] += x[i + u];
	float s = 0.0f;
	for (; i < len; i++)
		s += x[i];
	for (int u = 0; u < 16; u++)
		s += acc[u];
	return s;
}

/*
 * col[(c*k + ki)*k + kj][s*P + oh*out_w + ow] = in[s][c][oh*stride + ki - pad][ow*stride + kj -
 * pad] (0 outside the image). Stride-1 rows are one memcpy between zeroed edges.
 */
HN_HOT void hn_im2col(float *restrict col, const float *restrict in, int n,
		      const struct hn_layer *l)
{
	const int C = l->in_c, H = l->in_h, W = l->in_w, K = l->k, S = l->stride, Pd = l->pad;
	const int OH = l->out_h, OW = l->out_w;
	const size_t P = (size_t)OH * OW, NP = (size_t)n * P;

	for (int c = 0; c < C; c++) {
		for (int ki = 0; ki < K; ki++) {
			for (int kj = 0; kj < K; kj++) {
				float *row = col + ((size_t)(c * K + ki) * K + kj) * NP;
				/* valid ow range: 0 <= ow*S + kj - Pd < W */
				int ow0 = 0, ow1 = OW;
				while (ow0 < OW && ow0 * S + kj - Pd < 0)
					ow0++;
				while (ow1 > ow0 && (ow1 - 1) * S + kj - Pd >= W)
					ow1--;
				for (int s = 0; s < n; s++) {
					const float *plane = in + ((size_t)s * C + c) * H * W;
					float *dst = row + (size_t)s * P;
					for (int oh = 0; oh < OH; oh++, dst += OW) {
						int ih = oh * S + ki - Pd;
						if (ih < 0 || ih >= H) {
							memset(dst, 0, sizeof(float) * OW);
							continue;
						}
						const float *src = plane + (size_t)ih * W + kj - Pd;
						for (int ow = 0; ow < ow0; ow++)
							dst[ow] = 0.0f;
						if (S == 1) {
							memcpy(dst + ow0, src + ow0,
							       sizeof(float) * (ow1 - ow0));
						} else {
							for (int ow = ow0; ow < ow1; ow++)
								dst[ow] = src[(size_t)ow * S];
						}
						for (int ow = ow1; ow < OW; ow++)
							dst[ow] = 0.0f;
					}
				}
			}
		}
	}
}

/* The adjoint of hn_im2col: din = 0, then every column entry is added back where it came from. */
HN_HOT void hn_col2im(float *restrict din, const float *restrict dcol, int n,
		      const struct hn_layer *l)
{
	const int C = l->in_c, H = l->in_h, W = l->in_w, K = l->k, S = l->stride, Pd = l->pad;
	const int OH = l->out_h, OW = l->out_w;
	const size_t P = (size_t)OH * OW, NP = (size_t)n * P;

	memset(din, 0, sizeof(float) * (size_t)n * C * H * W);
	/* sample-outer so one sample's planes stay in cache while all k*k taps land */
	for (int s = 0; s < n; s++) {
		for (int c = 0; c < C; c++) {
			float *plane = din + ((size_t)s * C + c) * H * W;
			for (int ki = 0; ki < K; ki++) {
				for (int kj = 0; kj < K; kj++) {
					const float *src = dcol +
							   ((size_t)(c * K + ki) * K + kj) * NP +
							   (size_t)s * P;
					int ow0 = 0, ow1 = OW;
					while (ow0 < OW && ow0 * S + kj - Pd < 0)
						ow0++;
					while (ow1 > ow0 && (ow1 - 1) * S + kj - Pd >= W)
						ow1--;
					for (int oh = 0; oh < OH; oh++, src += OW) {
						int ih = oh * S + ki - Pd;
						if (ih < 0 || ih >= H)
							continue;
						float *dst = plane + (size_t)ih * W + kj - Pd;
						if (S == 1) {
							for (int ow = ow0; ow < ow1; ow++)
								dst[ow] += src[ow];
						} else {
							for (int ow = ow0; ow < ow1; ow++)
								dst[(size_t)ow * S] += src[ow];
						}
					}
				}
			}
		}
	}
}

HN_HOT void hn_conv2d_forward(float *out, float *col, float *tmp, const float *in, const float *w,
			      const float *b, int n, const struct hn_layer *l, int relu)
{
	const int M = l->out_c, K = l->in_c * l->k * l->k;
	const size_t P = (size_t)l->out_h * l->out_w;
	const int N = (int)(n * P);

	hn_im2col(col, in, n, l);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, w, K, col, N, 0.0f,
		    tmp, N);
	for (int oc = 0; oc < M; oc++) {
		const float bias = b ? b[oc] : 0.0f;
		for (int s = 0; s < n; s++) {
			const float *restrict src = tmp + (size_t)oc * N + (size_t)s * P;
			float *restrict dst = out + ((size_t)s * M + oc) * P;
			if (relu) {
				for (size_t p = 0; p < P; p++) {
					float v = src[p] + bias;
					dst[p] = v > 0.0f ? v : 0.0f;
				}
			} else {
				for (size_t p = 0; p < P; p++)
					dst[p] = src[p] + bias;
			}
		}
	}
}

HN_HOT void hn_conv2d_backward(float *din, float *dw, float *db, float *col, float *tmp,
			       float *dcol, const float *dout, const float *out_relu,
			       const float *in, const float *w, int n, const struct hn_layer *l,
			       int col_valid)
{
	const int M = l->out_c, K = l->in_c * l->k * l->k;
	const size_t P = (size_t)l->out_h * l->out_w;
	const int N = (int)(n * P);

	/* dout NCHW -> tmp [out_c][n*P], through the fused ReLU's mask; bias gradient on the way */
	for (int oc = 0; oc < M; oc++) {
		float *restrict row = tmp + (size_t)oc * N;
		for (int s = 0; s < n; s++) {
			const float *restrict src = dout + ((size_t)s * M + oc) * P;
			float *restrict dst = row + (size_t)s * P;
			if (out_relu) {
				const float *restrict o = out_relu + ((size_t)s * M + oc) * P;
				for (size_t p = 0; p < P; p++) {
					float g = src[p]; /* unconditional load: vectorizes */
					dst[p] = o[p] > 0.0f ? g : 0.0f;
				}
			} else {
				memcpy(dst, src, sizeof(float) * P);
			}
		}
		if (db)
			db[oc] += sum_lanes(row, (size_t)N);
	}
	if (!col_valid)
		hn_im2col(col, in, n, l);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N, 1.0f, tmp, N, col, N, 1.0f,
		    dw, K);
	if (din) {
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M, 1.0f, w, K, tmp, N,
			    0.0f, dcol, N);
		hn_col2im(din, dcol, n, l);
	}
}
