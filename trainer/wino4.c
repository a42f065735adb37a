/*
 * wino4.c - 3x3 stride-1 convolutions by Winograd's F(4x4, 3x3) on the CPU.
 *
 * Why: F(2x2, 3x3) (wino.c) spends 16 multiply-adds per channel pair on a
 * 2x2 output tile, 4 per output; F(4x4, 3x3) makes a 4x4 tile from a 6x6
 * input tile with 36, 2.25 per output, so its 36 sgemms do 1.78x less work
 * and its transformed input is smaller. wino.c picks it for maps where the
 * 4x4 tiles waste little and the channels are many (hn_wino4_pays: 32 or
 * more input channels, 36 products per channel pair and sample fewer than
 * F(2x2)'s 16 per 2x2 tile); on 2x2 outputs F(2x2) stays.
 *
 * The matrices are Lavin and Gray's (2015), interpolation points 0, 1, -1,
 * 2, -2 and infinity, the best conditioned of F(4x4)'s (NNPACK's too):
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
 *          0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6;
 *          1/24 -1/12 1/6; 0 0 1]
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * U = G g G^T, V = B^T d B, M = sum over input channels of U (.) V (36
 * sgemms), Y = A^T M A; backward is the exact adjoint, as in wino.c
 * (dM = A dY A^T, dV = U^T dM, din = sum of B dV B^T, dU = dM V^T,
 * dw += G^T dU G), so test_gradcheck's finite differences hold it, and
 * test_layers holds it to im2col's within fp32 rounding. Every sum has a
 * fixed order: weights stay bit-identical run to run.
 *
 * Layouts as wino.c's with 36 frequencies: V [36][in_c][n * T], U
 * [36][out_c][in_c], T = ceil(out_h/4) * ceil(out_w/4) tiles per sample.
 */
#include <stdlib.h>
#include <string.h>

#include "trainer/layers.h"
#include "trainer/vec4.h"
#include "trainer/wino4.h"

/*
 * Fewer input channels: the transforms, more work per element than F(2x2)'s,
 * would outweigh the sgemms' saving. At 32 (resnet-fm's first stage, cnn's
 * second conv) F(4x4) pays since its transforms store and read in runs:
 * resnet-fm's two 32-channel convs took 7-12% less CPU than by F(2x2), the
 * cnn ran 1.12x faster (one thread).
 */
#define WINO4_MIN_IN 32

static int tiles_h(const struct hn_layer *l)
{
	return (l->out_h + 3) / 4;
}

static int tiles_w(const struct hn_layer *l)
{
	return (l->out_w + 3) / 4;
}

static size_t tiles(const struct hn_layer *l, int n)
{
	return (size_t)n * tiles_h(l) * tiles_w(l);
}

int hn_wino4_pays(const struct hn_layer *l)
{
	size_t t2 = (size_t)((l->out_h + 1) / 2) * ((l->out_w + 1) / 2);
	return l->in_c >= WINO4_MIN_IN && l->out_h >= 4 && l->out_w >= 4 &&
	       36 * tiles(l, 1) < 16 * t2;
}

size_t hn_wino4_v_floats(const struct hn_layer *l, int n)
{
	return 36 * (size_t)l->in_c * tiles(l, n);
}

size_t hn_wino4_u_floats(const struct hn_layer *l)
{
	return 36 * (size_t)l->out_c * l->in_c;
}

size_t hn_wino4_ws_floats(const struct hn_layer *l, int n)
{
	return 36 * tiles(l, n) * ((size_t)l->out_c + l->in_c);
}

#define FB 16 /* filters per block of the filter transforms, vectorised across them */

/* o[0..5] = G (a, b, c), of len filters */
static inline void g_fwd(float o[][FB], const float *restrict a, const float *restrict b,
			 const float *restrict c, int len)
{
	for (int f = 0; f < len; f++) {
		o[0][f] = 0.25f * a[f];
		o[1][f] = -(a[f] + b[f] + c[f]) * (1.0f / 6);
		o[2][f] = -(a[f] - b[f] + c[f]) * (1.0f / 6);
		o[3][f] = a[f] * (1.0f / 24) + b[f] * (1.0f / 12) + c[f] * (1.0f / 6);
		o[4][f] = a[f] * (1.0f / 24) - b[f] * (1.0f / 12) + c[f] * (1.0f / 6);
		o[5][f] = c[f];
	}
}

/* x[0..2] = G^T (u0..u5), of len filters: the adjoint of g_fwd */
static inline void g_adj(float x[][FB], const float *restrict u0, const float *restrict u1,
			 const float *restrict u2, const float *restrict u3,
			 const float *restrict u4, const float *restrict u5, int len)
{
	for (int f = 0; f < len; f++) {
		x[0][f] = 0.25f * u0[f] - (u1[f] + u2[f]) * (1.0f / 6) +
			  (u3[f] + u4[f]) * (1.0f / 24);
		x[1][f] = (u2[f] - u1[f]) * (1.0f / 6) + (u3[f] - u4[f]) * (1.0f / 12);
		x[2][f] = (u3[f] + u4[f] - u1[f] - u2[f]) * (1.0f / 6) + u5[f];
	}
}

HN_HOT void hn_wino4_filters(float *restrict U, const float *restrict w, const struct hn_layer *l,
			     int oc0, int oc1)
{
	const int C = l->in_c;
	const size_t MC = (size_t)l->out_c * C, f1 = (size_t)oc1 * C;
	for (size_t f0 = (size_t)oc0 * C; f0 < f1; f0 += FB) {
		int len = f1 - f0 < FB ? (int)(f1 - f0) : FB;
		float g[9][FB], r[18][FB], u[6][FB]; /* r: G g, row i, column b at 3 * i + b */
		for (int f = 0; f < len; f++)
			for (int e = 0; e < 9; e++)
				g[e][f] = w[9 * (f0 + f) + e];
		for (int b = 0; b < 3; b++) {
			float c[6][FB];
			g_fwd(c, g[b], g[3 + b], g[6 + b], len);
			for (int i = 0; i < 6; i++)
				memcpy(r[3 * i + b], c[i], sizeof(float) * len);
		}
		for (int i = 0; i < 6; i++) {
			g_fwd(u, r[3 * i], r[3 * i + 1], r[3 * i + 2], len);
			for (int j = 0; j < 6; j++)
				memcpy(U + (6 * i + j) * MC + f0, u[j], sizeof(float) * len);
		}
	}
}

HN_HOT void hn_wino4_dfilters(float *restrict dw, const float *restrict dU,
			      const struct hn_layer *l)
{
	const size_t MC = (size_t)l->out_c * l->in_c;
	for (size_t f0 = 0; f0 < MC; f0 += FB) {
		int len = MC - f0 < FB ? (int)(MC - f0) : FB;
		float r[18][FB], x[3][FB]; /* r: G^T dU, row a, column j at 6 * a + j */
		const float *d = dU + f0;
		for (int j = 0; j < 6; j++) {
			g_adj(x, d + j * MC, d + (6 + j) * MC, d + (12 + j) * MC, d + (18 + j) * MC,
			      d + (24 + j) * MC, d + (30 + j) * MC, len);
			for (int a = 0; a < 3; a++)
				memcpy(r[6 * a + j], x[a], sizeof(float) * len);
		}
		for (int a = 0; a < 3; a++) {
			g_adj(x, r[6 * a], r[6 * a + 1], r[6 * a + 2], r[6 * a + 3], r[6 * a + 4],
			      r[6 * a + 5], len);
			for (int f = 0; f < len; f++)
				for (int b = 0; b < 3; b++)
					dw[9 * (f0 + f) + 3 * a + b] += x[b][f];
		}
	}
}

/* q0..q5 = B^T (d0..d5), elementwise over len columns: down a tile's rows */
static inline void bt_rows(float *restrict q0, float *restrict q1, float *restrict q2,
			   float *restrict q3, float *restrict q4, float *restrict q5,
			   const float *restrict d0, const float *restrict d1,
			   const float *restrict d2, const float *restrict d3,
			   const float *restrict d4, const float *restrict d5, int len)
{
	for (int x = 0; x < len; x++) {
		float a = d4[x] - 4.0f * d2[x], b = d3[x] - 4.0f * d1[x];
		float e = d4[x] - d2[x], f = 2.0f * (d3[x] - d1[x]);
		q0[x] = 4.0f * d0[x] - 5.0f * d2[x] + d4[x];
		q1[x] = a + b;
		q2[x] = a - b;
		q3[x] = e + f;
		q4[x] = e - f;
		q5[x] = 4.0f * d1[x] - 5.0f * d3[x] + d5[x];
	}
}

/* v[j * vs + tx] = (B^T (rr[4 tx .. 4 tx + 5]))[j] for TW tiles: across a tile's columns */
static inline void bt_cols(float *restrict v, size_t vs, const float *restrict rr, int TW)
{
	for (int tx = 0; tx < TW; tx++) {
		const float *x = rr + 4 * tx;
		float a = x[4] - 4.0f * x[2], b = x[3] - 4.0f * x[1];
		float e = x[4] - x[2], f = 2.0f * (x[3] - x[1]);
		v[tx] = 4.0f * x[0] - 5.0f * x[2] + x[4];
		v[vs + tx] = a + b;
		v[2 * vs + tx] = a - b;
		v[3 * vs + tx] = e + f;
		v[4 * vs + tx] = e - f;
		v[5 * vs + tx] = 4.0f * x[1] - 5.0f * x[3] + x[5];
	}
}

/*
 * Lanes of a and b picked by four constant indices (0-3 a's, 4-7 b's): gcc's
 * and clang's builtins for the same moves. LO/HI interleave the low/high
 * halves, L2/H2 take the low/high pairs.
 */
#ifdef __clang__
#define SHUF4(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#define SHUF4(a, b, i, j, k, l) __builtin_shuffle(a, b, (v4si){i, j, k, l})
#endif
#define LO(a, b) SHUF4(a, b, 0, 4, 1, 5)
#define HI(a, b) SHUF4(a, b, 2, 6, 3, 7)
#define L2(a, b) SHUF4(a, b, 0, 1, 4, 5)
#define H2(a, b) SHUF4(a, b, 2, 3, 6, 7)

/* x0..x3 transposed in place, as the rows of a 4x4 matrix */
static inline void tr4(v4f *x0, v4f *x1, v4f *x2, v4f *x3)
{
	v4f t0 = LO(*x0, *x1), t1 = LO(*x2, *x3);
	v4f t2 = HI(*x0, *x1), t3 = HI(*x2, *x3);
	*x0 = L2(t0, t1);
	*x1 = H2(t0, t1);
	*x2 = L2(t2, t3);
	*x3 = H2(t2, t3);
}

/*
 * bt_cols for TW = 4 (14x14 to 16x16 maps): the four tiles' six columns
 * transposed out of rr[0..19] into 4-float vectors, then the same
 * expressions lane by lane (the same bits), one vector per output row.
 */
static inline void bt_cols4(float *restrict v, size_t vs, const float *restrict rr)
{
	v4f a0 = ld4(rr), a1 = ld4(rr + 4), a2 = ld4(rr + 8), a3 = ld4(rr + 12), a4 = ld4(rr + 16);
	v4f t0 = LO(a0, a1), t1 = LO(a2, a3);
	v4f t2 = HI(a0, a1), t3 = HI(a2, a3);
	v4f u0 = LO(a1, a2), u1 = LO(a3, a4);
	v4f x0 = L2(t0, t1), x1 = H2(t0, t1);
	v4f x2 = L2(t2, t3), x3 = H2(t2, t3);
	v4f x4 = L2(u0, u1), x5 = H2(u0, u1);
	v4f a = x4 - 4.0f * x2, b = x3 - 4.0f * x1;
	v4f e = x4 - x2, f = 2.0f * (x3 - x1);
	st4(v, 4.0f * x0 - 5.0f * x2 + x4);
	st4(v + vs, a + b);
	st4(v + 2 * vs, a - b);
	st4(v + 3 * vs, e + f);
	st4(v + 4 * vs, e - f);
	st4(v + 5 * vs, 4.0f * x1 - 5.0f * x3 + x5);
}

/*
 * V = B^T d B of every tile: per tile row, its six input rows (the zero row
 * zr, W floats, where they fall outside the input) are combined down the
 * rows into rows of 4 * TW + 2 columns, zero in the padding, then across
 * each tile's six columns. A channel's tiles go to a buffer after zr
 * (36 * n * T floats) first, then to V in 36 runs: the stores are faster
 * that way than in 36 streams at once (resnet18 +5%).
 */
HN_HOT static void input_transform(float *restrict V, float *restrict zr, const float *restrict in,
				   int n, const struct hn_layer *l)
{
	const int C = l->in_c, H = l->in_h, W = l->in_w, Pd = l->pad;
	const int TH = tiles_h(l), TW = tiles_w(l), WP = 4 * TW + 2;
	const size_t T = (size_t)TH * TW, NT = (size_t)n * T, CNT = (size_t)C * NT;
	float q[6][WP + 2]; /* + 2: bt_cols4 reads 20 */

	float *restrict vb = zr + ((size_t)W + 15) / 16 * 16; /* a channel's [36][n * T] */

	memset(zr, 0, sizeof(float) * W);
	for (int i = 0; i < 6; i++)
		for (int x = 0; x < WP + 2; x++)
			q[i][x] = 0.0f; /* the padding columns stay 0 */
	for (int c = 0; c < C; c++) {
		for (int s = 0; s < n; s++) {
			const float *plane = in + ((size_t)s * C + c) * H * W;
			float *v = vb + (size_t)s * T;
			for (int ty = 0; ty < TH; ty++, v += TW) {
				const float *r[6];
				for (int i = 0; i < 6; i++) {
					int iy = 4 * ty - Pd + i;
					r[i] = iy >= 0 && iy < H ? plane + (size_t)iy * W : zr;
				}
				bt_rows(q[0] + Pd, q[1] + Pd, q[2] + Pd, q[3] + Pd, q[4] + Pd,
					q[5] + Pd, r[0], r[1], r[2], r[3], r[4], r[5], W);
				for (int i = 0; i < 6; i++)
					if (TW == 4)
						bt_cols4(v + (size_t)(6 * i) * NT, NT, q[i]);
					else
						bt_cols(v + (size_t)(6 * i) * NT, NT, q[i], TW);
			}
		}
		for (int xi = 0; xi < 36; xi++) /* 36 runs, not 36 streams of stores */
			memcpy(V + xi * CNT + (size_t)c * NT, vb + xi * NT, sizeof(float) * NT);
	}
}

#define TB 64 /* tiles per block of the output transforms, their rows on the stack */

/* y0..y3 = A^T (m0..m5) (+ bias) of len tiles, vectorised across them */
static inline void at4(float *restrict y0, float *restrict y1, float *restrict y2,
		       float *restrict y3, const float *restrict m0, const float *restrict m1,
		       const float *restrict m2, const float *restrict m3, const float *restrict m4,
		       const float *restrict m5, int len, float bias)
{
	for (int t = 0; t < len; t++) {
		float p = m1[t] + m2[t], q = m1[t] - m2[t], r = m3[t] + m4[t], s = m3[t] - m4[t];
		y0[t] = m0[t] + p + r + bias;
		y1[t] = q + 2.0f * s + bias;
		y2[t] = p + 4.0f * r + bias;
		y3[t] = q + 8.0f * s + m5[t] + bias;
	}
}

/*
 * out = A^T M A of every tile (+ bias, ReLU when asked), the part inside the
 * output: per output channel, the 16 outputs of all n * T tiles first
 * (vectorised across tiles, TB at a time), then laid into the planes.
 * y: 16 * n * T floats.
 */
HN_HOT static void output_transform(float *restrict out, const float *restrict Mm,
				    float *restrict y, const float *b, int n,
				    const struct hn_layer *l, int relu)
{
	const int M = l->out_c, OH = l->out_h, OW = l->out_w;
	const int TH = tiles_h(l), TW = tiles_w(l);
	const size_t T = (size_t)TH * TW, NT = (size_t)n * T, MNT = (size_t)M * NT;
	float sb[24][TB]; /* A^T M of a block: row a, column j at sb[6 * a + j] */

	for (int oc = 0; oc < M; oc++) {
		const float bias = b ? b[oc] : 0.0f;
		const float *m = Mm + (size_t)oc * NT;
		for (size_t t0 = 0; t0 < NT; t0 += TB) {
			int len = NT - t0 < TB ? (int)(NT - t0) : TB;
			const float *mt = m + t0;
			for (int j = 0; j < 6; j++)
				at4(sb[j], sb[6 + j], sb[12 + j], sb[18 + j], mt + j * MNT,
				    mt + (6 + j) * MNT, mt + (12 + j) * MNT, mt + (18 + j) * MNT,
				    mt + (24 + j) * MNT, mt + (30 + j) * MNT, len, 0.0f);
			for (int a = 0; a < 4; a++) {
				float *ya = y + (4 * a) * NT + t0;
				at4(ya, ya + NT, ya + 2 * NT, ya + 3 * NT, sb[6 * a], sb[6 * a + 1],
				    sb[6 * a + 2], sb[6 * a + 3], sb[6 * a + 4], sb[6 * a + 5], len,
				    bias);
			}
		}
		if (relu)
			for (size_t t = 0; t < 16 * NT; t++)
				y[t] = y[t] > 0.0f ? y[t] : 0.0f;
		for (int s = 0; s < n; s++) {
			float *plane = out + ((size_t)s * M + oc) * OH * OW;
			for (int ty = 0; ty < TH; ty++) {
				const size_t k = (size_t)s * T + (size_t)ty * TW;
				for (int a = 0; a < 4 && 4 * ty + a < OH; a++) {
					float *dst = plane + (size_t)(4 * ty + a) * OW;
					const float *e0 = y + (4 * a) * NT + k, *e1 = e0 + NT,
						    *e2 = e1 + NT, *e3 = e2 + NT;
					int tx = 0;
					if (TW == 4) { /* 13-16 wide: a 4x4 transpose */
						v4f d0 = ld4(e0), d1 = ld4(e1), d2 = ld4(e2),
						    d3 = ld4(e3);
						float last[4];
						tr4(&d0, &d1, &d2, &d3);
						st4(dst, d0);
						st4(dst + 4, d1);
						st4(dst + 8, d2);
						st4(last, d3);
						for (int x = 12; x < OW; x++)
							dst[x] = last[x - 12];
						continue;
					}
					for (; 4 * tx + 3 < OW; tx++) {
						dst[4 * tx] = e0[tx];
						dst[4 * tx + 1] = e1[tx];
						dst[4 * tx + 2] = e2[tx];
						dst[4 * tx + 3] = e3[tx];
					}
					if (4 * tx < OW) {
						const float *e[3] = {e0, e1, e2};
						for (int bx = 0; 4 * tx + bx < OW; bx++)
							dst[4 * tx + bx] = e[bx][tx];
					}
				}
			}
		}
	}
}

void hn_wino4_forward(float *out, float *V, float *ws, const float *in, const float *U,
		      const float *b, int n, const struct hn_layer *l, int relu)
{
	const int M = l->out_c, C = l->in_c;
	const int NT = (int)tiles(l, n);
	float *Mm = ws, *y = ws + 36 * (size_t)M * NT;

	input_transform(V, Mm, in, n, l); /* Mm's space: its zero row */
	hn_wino_gemms(36, 0, 0, M, NT, C, U, (size_t)M * C, C, V, (size_t)C * NT, NT, 0.0f, Mm,
		      (size_t)M * NT);
	output_transform(out, Mm, y, b, n, l, relu);
}

/* d0..d5 = A (p0..p3), the adjoint of at4, of len tiles (restrict parameters: vectorises) */
static inline void a6(float *restrict d0, float *restrict d1, float *restrict d2,
		      float *restrict d3, float *restrict d4, float *restrict d5,
		      const float *restrict p0, const float *restrict p1, const float *restrict p2,
		      const float *restrict p3, int len)
{
	for (int t = 0; t < len; t++) {
		float e = p0[t] + p2[t], o = p1[t] + p3[t];
		float f = p0[t] + 4.0f * p2[t], h = 2.0f * p1[t] + 8.0f * p3[t];
		d0[t] = p0[t];
		d1[t] = e + o;
		d2[t] = e - o;
		d3[t] = f + h;
		d4[t] = f - h;
		d5[t] = p3[t];
	}
}

/*
 * dM = A dY A^T of every tile, dY the output gradient (through the fused
 * ReLU's mask; 0 past the output's edge); the bias gradient on the way. Per
 * output channel, the 4x4 dY of all n * T tiles are gathered first into 16
 * arrays (g: 52 * n * T floats, the last 36 the channel's dM before it is
 * copied in 36 runs), then transformed across tiles, TB at a time.
 */
HN_HOT static void dout_transform(float *restrict dM, float *restrict g, float *db,
				  const float *restrict dout, const float *restrict out_relu, int n,
				  const struct hn_layer *l)
{
	const int M = l->out_c, OH = l->out_h, OW = l->out_w;
	const int TH = tiles_h(l), TW = tiles_w(l);
	const size_t T = (size_t)TH * TW, NT = (size_t)n * T, MNT = (size_t)M * NT;
	float row[4 * TW], rb[24][TB]; /* rb: A dY of a block, row i, column bx at 4 * i + bx */

	for (int x = OW; x < 4 * TW; x++)
		row[x] = 0.0f; /* past the output's edge */
	for (int oc = 0; oc < M; oc++) {
		double bsum = 0;
		for (int s = 0; s < n; s++) {
			const size_t po = ((size_t)s * M + oc) * OH * OW;
			for (int ty = 0; ty < TH; ty++) {
				const size_t k = (size_t)s * T + (size_t)ty * TW;
				for (int a = 0; a < 4; a++) {
					float *restrict e0 = g + (4 * a) * NT + k,
							*restrict e1 = e0 + NT,
							*restrict e2 = e1 + NT,
							*restrict e3 = e2 + NT;
					int oy = 4 * ty + a;
					if (oy >= OH) {
						for (int tx = 0; tx < TW; tx++)
							e0[tx] = e1[tx] = e2[tx] = e3[tx] = 0.0f;
						continue;
					}
					const float *restrict src = dout + po + (size_t)oy * OW;
					const float *restrict msk =
						out_relu ? out_relu + po + (size_t)oy * OW : NULL;
					float rs = 0.0f;
					if (msk)
						for (int x = 0; x < OW; x++) {
							float v = src[x]; /* always: vectorises */
							row[x] = msk[x] > 0.0f ? v : 0.0f;
						}
					else
						memcpy(row, src, sizeof(float) * OW);
					for (int x = 0; x < OW; x++)
						rs += row[x];
					bsum += rs;
					for (int tx = 0; tx < TW; tx++) {
						e0[tx] = row[4 * tx];
						e1[tx] = row[4 * tx + 1];
						e2[tx] = row[4 * tx + 2];
						e3[tx] = row[4 * tx + 3];
					}
				}
			}
		}
		if (db)
			db[oc] += (float)bsum;
		float *d = g + 16 * NT; /* this channel's [36][n * T], then 36 runs into dM */
		for (size_t t0 = 0; t0 < NT; t0 += TB) {
			int len = NT - t0 < TB ? (int)(NT - t0) : TB;
			const float *gt = g + t0;
			for (int bx = 0; bx < 4; bx++) /* A dY: down column bx */
				a6(rb[bx], rb[4 + bx], rb[8 + bx], rb[12 + bx], rb[16 + bx],
				   rb[20 + bx], gt + bx * NT, gt + (4 + bx) * NT,
				   gt + (8 + bx) * NT, gt + (12 + bx) * NT, len);
			for (int i = 0; i < 6; i++) { /* (A dY) A^T: across row i */
				float *di = d + (size_t)(6 * i) * NT + t0;
				a6(di, di + NT, di + 2 * NT, di + 3 * NT, di + 4 * NT, di + 5 * NT,
				   rb[4 * i], rb[4 * i + 1], rb[4 * i + 2], rb[4 * i + 3], len);
			}
		}
		for (int xi = 0; xi < 36; xi++)
			memcpy(dM + xi * MNT + (size_t)oc * NT, d + xi * NT, sizeof(float) * NT);
	}
}

/* o0..o5 = B (v0..v5), the adjoint of B^T */
static inline void b_adj(float o[6], float v0, float v1, float v2, float v3, float v4, float v5)
{
	o[0] = 4.0f * v0;
	o[1] = 4.0f * (v2 - v1 + v5) + 2.0f * (v4 - v3);
	o[2] = -5.0f * v0 - 4.0f * (v1 + v2) - (v3 + v4);
	o[3] = (v1 - v2) + 2.0f * (v3 - v4) - 5.0f * v5;
	o[4] = v0 + v1 + v2 + v3 + v4;
	o[5] = v5;
}

/* o0..o5 = B (v0..v5) of len tiles, vectorised across them (restrict parameters) */
static inline void b_tiles(float *restrict o0, float *restrict o1, float *restrict o2,
			   float *restrict o3, float *restrict o4, float *restrict o5,
			   const float *restrict v0, const float *restrict v1,
			   const float *restrict v2, const float *restrict v3,
			   const float *restrict v4, const float *restrict v5, size_t len)
{
	for (size_t t = 0; t < len; t++) {
		float e[6];
		b_adj(e, v0[t], v1[t], v2[t], v3[t], v4[t], v5[t]);
		o0[t] = e[0];
		o1[t] = e[1];
		o2[t] = e[2];
		o3[t] = e[3];
		o4[t] = e[4];
		o5[t] = e[5];
	}
}

/* dst[x] += (B (h0[x] .. h5[x]))[a], x in [0, len): one input row of a tile row */
static inline void b_row(float *restrict dst, const float *restrict h0, const float *restrict h1,
			 const float *restrict h2, const float *restrict h3,
			 const float *restrict h4, const float *restrict h5, int a, int len)
{
#define B_ROW(k)                                                                                   \
	for (int x = 0; x < len; x++) {                                                            \
		float o[6];                                                                        \
		b_adj(o, h0[x], h1[x], h2[x], h3[x], h4[x], h5[x]);                                \
		dst[x] += o[k];                                                                    \
	}                                                                                          \
	break
	switch (a) {
	case 0:
		B_ROW(0);
	case 1:
		B_ROW(1);
	case 2:
		B_ROW(2);
	case 3:
		B_ROW(3);
	case 4:
		B_ROW(4);
	default:
		B_ROW(5);
	}
#undef B_ROW
}

/*
 * din = sum over tiles of B dV B^T, the adjoint of input_transform: for a
 * channel, each of the six rows of dV is spread across its tile's columns
 * for all n * T tiles at once (b_tiles, vectorised across tiles, into buf:
 * 36 * n * T floats, row i's column a at 6 * i + a), then per tile row the
 * six spread rows are overlap-added into padded rows (tiles in order),
 * combined down the rows and added into the input rows they came from (tile
 * rows in order). The same sums in the same order as b_adj tile by tile.
 */
HN_HOT static void input_adjoint(float *restrict din, const float *restrict dV, float *restrict buf,
				 int n, const struct hn_layer *l)
{
	const int C = l->in_c, H = l->in_h, W = l->in_w, Pd = l->pad;
	const int TH = tiles_h(l), TW = tiles_w(l), WP = 4 * TW + 2;
	const size_t T = (size_t)TH * TW, NT = (size_t)n * T, CNT = (size_t)C * NT;
	const int x1 = W + Pd < WP ? W + Pd : WP;
	float h[6][WP];

	memset(din, 0, sizeof(float) * (size_t)n * C * H * W);
	for (int c = 0; c < C; c++) {
		for (int i = 0; i < 6; i++) {
			const float *v0 = dV + (size_t)(6 * i) * CNT + (size_t)c * NT;
			float *o0 = buf + (size_t)(6 * i) * NT;
			b_tiles(o0, o0 + NT, o0 + 2 * NT, o0 + 3 * NT, o0 + 4 * NT, o0 + 5 * NT, v0,
				v0 + CNT, v0 + 2 * CNT, v0 + 3 * CNT, v0 + 4 * CNT, v0 + 5 * CNT,
				NT);
		}
		for (int s = 0; s < n; s++) {
			float *plane = din + ((size_t)s * C + c) * H * W;
			const float *v = buf + (size_t)s * T;
			for (int ty = 0; ty < TH; ty++, v += TW) {
				for (int i = 0; i < 6; i++) {
					const float *o = v + (size_t)(6 * i) * NT;
					float *r = h[i];
					r[0] = r[1] = 0.0f;
					for (int tx = 0; tx < TW; tx++) {
						r[4 * tx] += o[tx];
						r[4 * tx + 1] += o[NT + tx];
						r[4 * tx + 2] = o[2 * NT + tx];
						r[4 * tx + 3] = o[3 * NT + tx];
						r[4 * tx + 4] = o[4 * NT + tx];
						r[4 * tx + 5] = o[5 * NT + tx];
					}
				}
				for (int a = 0; a < 6; a++) {
					int iy = 4 * ty - Pd + a;
					if (iy >= 0 && iy < H)
						b_row(plane + (size_t)iy * W, h[0] + Pd, h[1] + Pd,
						      h[2] + Pd, h[3] + Pd, h[4] + Pd, h[5] + Pd, a,
						      x1 - Pd);
				}
			}
		}
	}
}

void hn_wino4_backward(float *din, float *dU, float *db, float *V, float *ws, const float *dout,
		       const float *out_relu, const float *in, const float *U, int n,
		       const struct hn_layer *l, int v_valid)
{
	const int M = l->out_c, C = l->in_c;
	const int NT = (int)tiles(l, n);
	float *dM = ws, *dV = dM + 36 * (size_t)M * NT;

	dout_transform(dM, dV, db, dout, out_relu, n, l); /* dV's space: scratch until the sgemm */
	if (!v_valid)
		input_transform(V, dV, in, n, l);
	hn_wino_gemms(36, 0, 1, M, C, NT, dM, (size_t)M * NT, NT, V, (size_t)C * NT, NT, 1.0f, dU,
		      (size_t)M * C);
	if (din) { /* after dU's sgemms: dM's space is input_adjoint's buffer */
		hn_wino_gemms(36, 1, 0, C, NT, M, U, (size_t)M * C, C, dM, (size_t)M * NT, NT, 0.0f,
			      dV, (size_t)C * NT);
		input_adjoint(din, dV, dM, n, l);
	}
}
