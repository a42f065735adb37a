/*
 * norm.c - batch normalisation and global average pooling on the CPU.
 *
 * Batch normalisation needs statistics of the whole batch, while the backend
 * runs the batch as members' rows in chunks. So the layer is split where the
 * batch must meet: members first sum their own rows per channel
 * (hn_batchnorm_sums, in double, in a fixed order), the backend adds the
 * members' sums in member order and turns them into mean and 1/std, and only
 * then does each member normalise its rows (hn_batchnorm_forward). Backward
 * mirrors it: hn_batchnorm_backward_sums gives each member's sum(dy) and
 * sum(dy * xhat) per channel (which are also dbeta and dgamma), and once
 * they are added over the batch hn_batchnorm_backward gives
 *   dx = gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M),
 * M = samples x H x W, xhat = (x - mean) * invstd recomputed from x, so
 * nothing but the per-channel mean and invstd is kept between the passes.
 */
#include "trainer/layers.h"

/*
 * Sums of a plane in LANES independent double lanes, added in a fixed order:
 * the loop vectorizes (no -ffast-math needed), and the result depends only
 * on the plane, never on the thread or the chunk that summed it.
 */
#define LANES 8

HN_HOT static void plane_sums(const float *restrict x, size_t P, double *sa, double *sb)
{
	double a[LANES] = {0}, b[LANES] = {0};
	size_t i = 0;
	for (; i + LANES <= P; i += LANES)
		for (int u = 0; u < LANES; u++) {
			double v = x[i + u];
			a[u] += v;
			b[u] += v * v;
		}
	double ra = 0, rb = 0;
	for (; i < P; i++) {
		double v = x[i];
		ra += v;
		rb += v * v;
	}
	for (int u = 0; u < LANES; u++) {
		ra += a[u];
		rb += b[u];
	}
	*sa += ra;
	*sb += rb;
}

HN_HOT void hn_batchnorm_sums(double *restrict sum, double *restrict sumsq,
			      const float *restrict in, int n, const struct hn_layer *l)
{
	const int C = l->in_c;
	const size_t P = (size_t)l->in_h * l->in_w;
	for (int s = 0; s < n; s++)
		for (int c = 0; c < C; c++)
			plane_sums(in + ((size_t)s * C + c) * P, P, &sum[c], &sumsq[c]);
}

HN_HOT void hn_batchnorm_forward(float *restrict out, const float *restrict in,
				 const float *restrict mean, const float *restrict invstd,
				 const float *restrict gamma, const float *restrict beta, int n,
				 const struct hn_layer *l)
{
	const int C = l->in_c;
	const size_t P = (size_t)l->in_h * l->in_w;
	for (int s = 0; s < n; s++)
		for (int c = 0; c < C; c++) {
			const float *restrict x = in + ((size_t)s * C + c) * P;
			float *restrict y = out + ((size_t)s * C + c) * P;
			const float a = gamma[c] * invstd[c], b = beta[c] - mean[c] * a;
			for (size_t i = 0; i < P; i++)
				y[i] = x[i] * a + b;
		}
}

HN_HOT void hn_batchnorm_backward_sums(double *restrict sdy, double *restrict sdyx,
				       const float *restrict dout, const float *restrict in,
				       const float *restrict mean, const float *restrict invstd,
				       int n, const struct hn_layer *l)
{
	const int C = l->in_c;
	const size_t P = (size_t)l->in_h * l->in_w;
	for (int s = 0; s < n; s++)
		for (int c = 0; c < C; c++) {
			const float *restrict x = in + ((size_t)s * C + c) * P;
			const float *restrict dy = dout + ((size_t)s * C + c) * P;
			const float mu = mean[c], is = invstd[c];
			double a[LANES] = {0}, b[LANES] = {0}, ra = 0, rb = 0;
			size_t i = 0;
			for (; i + LANES <= P; i += LANES)
				for (int u = 0; u < LANES; u++) {
					float g = dy[i + u];
					a[u] += g;
					b[u] += (double)(g * ((x[i + u] - mu) * is));
				}
			for (; i < P; i++) {
				float g = dy[i];
				ra += g;
				rb += (double)(g * ((x[i] - mu) * is));
			}
			for (int u = 0; u < LANES; u++) {
				ra += a[u];
				rb += b[u];
			}
			sdy[c] += ra;
			sdyx[c] += rb;
		}
}

HN_HOT void hn_batchnorm_backward(float *restrict din, const float *restrict dout,
				  const float *restrict in, const float *restrict mean,
				  const float *restrict invstd, const float *restrict gamma,
				  const float *restrict mdy, const float *restrict mdyx, int n,
				  const struct hn_layer *l)
{
	const int C = l->in_c;
	const size_t P = (size_t)l->in_h * l->in_w;
	for (int s = 0; s < n; s++)
		for (int c = 0; c < C; c++) {
			const float *restrict x = in + ((size_t)s * C + c) * P;
			const float *restrict dy = dout + ((size_t)s * C + c) * P;
			float *restrict dx = din + ((size_t)s * C + c) * P;
			const float mu = mean[c], is = invstd[c], g = gamma[c] * is;
			const float m1 = mdy[c], m2 = mdyx[c];
			for (size_t i = 0; i < P; i++)
				dx[i] = g * (dy[i] - m1 - (x[i] - mu) * is * m2);
		}
}

HN_HOT void hn_avgpool_forward(float *restrict out, const float *restrict in, int n,
			       const struct hn_layer *l)
{
	const size_t P = (size_t)l->in_h * l->in_w, planes = (size_t)n * l->in_c;
	const float inv = 1.0f / (float)P;
	for (size_t pl = 0; pl < planes; pl++) {
		const float *restrict x = in + pl * P;
		float acc = 0.0f;
		for (size_t i = 0; i < P; i++)
			acc += x[i];
		out[pl] = acc * inv;
	}
}

HN_HOT void hn_avgpool_backward(float *restrict din, const float *restrict dout, int n,
				const struct hn_layer *l)
{
	const size_t P = (size_t)l->in_h * l->in_w, planes = (size_t)n * l->in_c;
	const float inv = 1.0f / (float)P;
	for (size_t pl = 0; pl < planes; pl++) {
		float *restrict dx = din + pl * P;
		const float g = dout[pl] * inv;
		for (size_t i = 0; i < P; i++)
			dx[i] = g;
	}
}
