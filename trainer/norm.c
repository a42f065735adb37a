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
#include "trainer/vec4.h"

/*
 * Sums of a plane in LANES independent double lanes, added in a fixed order:
 * the result depends only on the plane, never on the thread or the chunk
 * that summed it. The lanes are two 4-double vectors (GCC's vector
 * extensions): written as a loop over 8 scalars, the float-to-double
 * widening kept GCC from vectorizing it, and these sums took more time than
 * the batchnorm layers' elementwise passes. Each lane does what the scalar
 * loop did, so the sums are the same to the bit.
 */
#define LANES 8

typedef double v4d __attribute__((vector_size(32)));

/* a macro, not a function: a 32-byte vector passed by value warns of ABI in the baseline clone */
#define widen4(v) __builtin_convertvector((v), v4d)

/* r + lanes 0..3 of a[0], then of a[1] (the scalar loop's order over its 8 lanes) */
static inline double add_lanes(double r, const v4d *a)
{
	for (int k = 0; k < 2; k++)
		for (int u = 0; u < 4; u++)
			r += a[k][u];
	return r;
}

HN_HOT static void plane_sums(const float *restrict x, size_t P, double *sa, double *sb)
{
	v4d a[2] = {{0}}, b[2] = {{0}};
	size_t i = 0;
	for (; i + LANES <= P; i += LANES)
		for (int k = 0; k < 2; k++) {
			v4d v = widen4(ld4(x + i + 4 * k));
			a[k] += v;
			b[k] += v * v;
		}
	double ra = 0, rb = 0;
	for (; i < P; i++) {
		double v = x[i];
		ra += v;
		rb += v * v;
	}
	*sa += add_lanes(ra, a);
	*sb += add_lanes(rb, b);
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
				 const struct hn_layer *l, int relu)
{
	const int C = l->in_c;
	const size_t P = (size_t)l->in_h * l->in_w;
	for (int s = 0; s < n; s++)
		for (int c = 0; c < C; c++) {
			const float *restrict x = in + ((size_t)s * C + c) * P;
			float *restrict y = out + ((size_t)s * C + c) * P;
			const float a = gamma[c] * invstd[c], b = beta[c] - mean[c] * a;
			if (relu)
				for (size_t i = 0; i < P; i++) {
					float v = x[i] * a + b;
					y[i] = v > 0.0f ? v : 0.0f;
				}
			else
				for (size_t i = 0; i < P; i++)
					y[i] = x[i] * a + b;
		}
}

/* dy through a fused ReLU's mask (its output o > 0), to the bit what hn_relu_backward gives */
static inline v4f gate4(v4f g, const float *o)
{
	return (v4f)((v4si)g & (ld4(o) > 0.0f));
}

HN_HOT void hn_batchnorm_backward_sums(double *restrict sdy, double *restrict sdyx,
				       const float *restrict dout, const float *restrict out_relu,
				       const float *restrict in, const float *restrict mean,
				       const float *restrict invstd, int n,
				       const struct hn_layer *l)
{
	const int C = l->in_c;
	const size_t P = (size_t)l->in_h * l->in_w;
	for (int s = 0; s < n; s++)
		for (int c = 0; c < C; c++) {
			const size_t at = ((size_t)s * C + c) * P;
			const float *restrict x = in + at, *restrict dy = dout + at;
			const float *restrict o = out_relu ? out_relu + at : NULL;
			const float mu = mean[c], is = invstd[c];
			v4d a[2] = {{0}}, b[2] = {{0}};
			double ra = 0, rb = 0;
			size_t i = 0;
			for (; i + LANES <= P; i += LANES)
				for (int k = 0; k < 2; k++) {
					v4f g = ld4(dy + i + 4 * k);
					if (o)
						g = gate4(g, o + i + 4 * k);
					a[k] += widen4(g);
					b[k] += widen4(g * ((ld4(x + i + 4 * k) - mu) * is));
				}
			for (; i < P; i++) {
				float g = dy[i];
				if (o && !(o[i] > 0.0f))
					g = 0.0f;
				ra += g;
				rb += (double)(g * ((x[i] - mu) * is));
			}
			ra = add_lanes(ra, a);
			rb = add_lanes(rb, b);
			sdy[c] += ra;
			sdyx[c] += rb;
		}
}

HN_HOT void hn_batchnorm_backward(float *restrict din, const float *restrict dout,
				  const float *restrict out_relu, const float *restrict in,
				  const float *restrict mean, const float *restrict invstd,
				  const float *restrict gamma, const float *restrict mdy,
				  const float *restrict mdyx, int n, const struct hn_layer *l)
{
	const int C = l->in_c;
	const size_t P = (size_t)l->in_h * l->in_w;
	for (int s = 0; s < n; s++)
		for (int c = 0; c < C; c++) {
			const size_t at = ((size_t)s * C + c) * P;
			const float *restrict x = in + at, *restrict dy = dout + at;
			float *restrict dx = din + at;
			const float mu = mean[c], is = invstd[c], g = gamma[c] * is;
			const float m1 = mdy[c], m2 = mdyx[c];
			if (out_relu) {
				const float *restrict o = out_relu + at;
				for (size_t i = 0; i < P; i++) {
					float d = dy[i]; /* unconditional load: vectorizes */
					d = o[i] > 0.0f ? d : 0.0f;
					dx[i] = g * (d - m1 - (x[i] - mu) * is * m2);
				}
			} else {
				for (size_t i = 0; i < P; i++)
					dx[i] = g * (dy[i] - m1 - (x[i] - mu) * is * m2);
			}
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
