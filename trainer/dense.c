/*
 * dense.c - fully connected layer: out[n][o] = in[n][i] . w[o][i] + b[o].
 *
 * Weights are [out][in] row-major (PyTorch's nn.Linear layout, portable
 * between backends) and the input is the previous activation flattened in
 * CHW order, so no reshaping is ever needed: the batch is the GEMM's M.
 * A following ReLU is fused into the bias pass; in backward its mask gates
 * dout into tmp before the two GEMMs.
 */
#include <cblas.h>

#include "trainer/layers.h"

HN_HOT void hn_dense_forward(float *out, const float *in, const float *w, const float *b, int n,
			     const struct hn_layer *l, int relu)
{
	const int ni = l->in_c * l->in_h * l->in_w, no = l->out_c;

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, no, ni, 1.0f, in, ni, w, ni, 0.0f,
		    out, no);
	for (int s = 0; s < n; s++) {
		float *restrict row = out + (size_t)s * no;
		const float *restrict bias = b;
		if (relu) {
			for (int o = 0; o < no; o++) {
				float v = row[o] + bias[o];
				row[o] = v > 0.0f ? v : 0.0f;
			}
		} else {
			for (int o = 0; o < no; o++)
				row[o] += bias[o];
		}
	}
}

HN_HOT void hn_dense_backward(float *din, float *dw, float *db, float *tmp, const float *dout,
			      const float *out_relu, const float *in, const float *w, int n,
			      const struct hn_layer *l)
{
	const int ni = l->in_c * l->in_h * l->in_w, no = l->out_c;
	const float *g = dout;

	if (out_relu) {
		for (size_t i = 0; i < (size_t)n * no; i++) {
			float v = dout[i]; /* unconditional load: vectorizes */
			tmp[i] = out_relu[i] > 0.0f ? v : 0.0f;
		}
		g = tmp;
	}
	/* bias: sample-outer so each o is an independent lane (vectorizes, fixed order) */
	for (int s = 0; s < n; s++) {
		const float *restrict row = g + (size_t)s * no;
		float *restrict acc = db;
		for (int o = 0; o < no; o++)
			acc[o] += row[o];
	}
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, no, ni, n, 1.0f, g, no, in, ni, 1.0f,
		    dw, ni);
	if (din)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, ni, no, 1.0f, g, no, w,
			    ni, 0.0f, din, ni);
}
