/*
 * wino.c - 3x3 stride-1 convolutions by Winograd's F(2x2, 3x3) on the CPU.
 *
 * Why: im2col + sgemm (conv.c) spends 9 multiply-adds per output, input
 * channel and filter; F(2x2, 3x3) makes a 2x2 output tile from a 4x4 input
 * tile with 16, 2.25x fewer, and turns the rest into additions. In
 * resnet18/resnet-fm nearly all multiply-adds are 3x3 stride-1 convolutions
 * already at the sgemm's peak, so this is the one way to cut their time.
 *
 * The transforms (Lavin and Gray, 2015), per tile and channel pair:
 *   U = G g G^T (filter, 4x4 from 3x3), V = B^T d B (input, 4x4 from 4x4),
 *   M = sum over input channels of U (.) V,  Y = A^T M A (output, 2x2).
 * With U as 16 matrices [out_c][in_c] and V as 16 matrices [in_c][tiles],
 * the channel sum is 16 sgemms ([out_c][tiles] each). Backward is the exact
 * adjoint of that forward, so the gradients are those of what forward
 * computed (test_gradcheck checks them by finite differences):
 *   dM = A dY A^T;  dV = U^T dM (16 sgemms), din = sum over tiles of B dV B^T
 *   (overlapping tiles added in a fixed order);  dU = dM V^T (16 sgemms),
 *   dw += G^T dU G.
 * The arithmetic differs from im2col's (the sums are regrouped), within fp32
 * rounding of the direct result; it depends only on the layer's shape and the
 * samples handed in, so weights stay bit-identical run to run.
 *
 * Layouts: V is [16][in_c][n * T] with T = ceil(out_h/2) * ceil(out_w/2)
 * tiles per sample (tile t = ty * TW + tx); the backend keeps it where it
 * keeps conv.c's im2col matrix (hn_wino_fits makes sure it is no larger).
 * U, [16][out_c][in_c], is made once per weights (hn_wino_filters; the
 * backend keeps it per layer until the next update). Backward adds the
 * filters' gradient in that domain, dU, over the chunks and micro-batches of
 * a step; hn_wino_dfilters turns it into dw once, before the update. The
 * scratch ws holds the sgemms' results [16][out_c][n * T] and the input
 * gradient's [16][in_c][n * T].
 *
 * Layers with 32 or more input channels whose output F(4x4, 3x3)'s tiles
 * cover with fewer products go to wino4.c instead (hn_wino4_pays), through
 * the same hn_wino_* calls; HN_CPU_WINOGRAD=2 keeps them all here.
 */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trainer/layers.h"
#include "trainer/wino4.h"

#define WINO_MIN_IN 16 /* fewer input channels: the sgemms are too thin (the stem) */

static int tiles_h(const struct hn_layer *l)
{
	return (l->out_h + 1) / 2;
}

static int tiles_w(const struct hn_layer *l)
{
	return (l->out_w + 1) / 2;
}

static size_t tiles(const struct hn_layer *l, int n)
{
	return (size_t)n * tiles_h(l) * tiles_w(l);
}

int hn_wino_fits(const struct hn_layer *l)
{
	const char *off = getenv("HN_CPU_WINOGRAD");
	return !(off && !strcmp(off, "0")) && l->kind == HN_LAYER_CONV2D && l->k == 3 &&
	       l->stride == 1 && l->pad <= 2 && l->in_c >= WINO_MIN_IN && l->out_h >= 2 &&
	       l->out_w >= 2 && 16 * tiles(l, 1) <= 9 * (size_t)l->out_h * l->out_w;
}

/* F(4x4, 3x3) (wino4.c) where it pays; HN_CPU_WINOGRAD=2 keeps every layer on F(2x2). */
static int by4(const struct hn_layer *l)
{
	const char *e = getenv("HN_CPU_WINOGRAD");
	return !(e && !strcmp(e, "2")) && hn_wino4_pays(l);
}

size_t hn_wino_v_floats(const struct hn_layer *l, int n)
{
	if (by4(l))
		return hn_wino4_v_floats(l, n);
	return 16 * (size_t)l->in_c * tiles(l, n);
}

size_t hn_wino_u_floats(const struct hn_layer *l)
{
	if (by4(l))
		return hn_wino4_u_floats(l);
	return 16 * (size_t)l->out_c * l->in_c;
}

size_t hn_wino_ws_floats(const struct hn_layer *l, int n)
{
	if (by4(l))
		return hn_wino4_ws_floats(l, n);
	return 16 * tiles(l, n) * ((size_t)l->out_c + l->in_c);
}

/* U[xi][oc][c] = (G g G^T)[xi] for the filters g = w[oc][c] of oc in [oc0, oc1). */
HN_HOT void hn_wino_filters(float *restrict U, const float *restrict w, const struct hn_layer *l,
			    int oc0, int oc1)
{
	const int C = l->in_c;
	const size_t MC = (size_t)l->out_c * C;
	if (by4(l)) {
		hn_wino4_filters(U, w, l, oc0, oc1);
		return;
	}
	for (size_t f = (size_t)oc0 * C; f < (size_t)oc1 * C; f++) {
		const float *g = w + 9 * f;
		float r[4][3];
		for (int b = 0; b < 3; b++) {
			r[0][b] = g[b];
			r[1][b] = 0.5f * (g[b] + g[3 + b] + g[6 + b]);
			r[2][b] = 0.5f * (g[b] - g[3 + b] + g[6 + b]);
			r[3][b] = g[6 + b];
		}
		for (int i = 0; i < 4; i++) {
			U[(4 * i + 0) * MC + f] = r[i][0];
			U[(4 * i + 1) * MC + f] = 0.5f * (r[i][0] + r[i][1] + r[i][2]);
			U[(4 * i + 2) * MC + f] = 0.5f * (r[i][0] - r[i][1] + r[i][2]);
			U[(4 * i + 3) * MC + f] = r[i][2];
		}
	}
}

/* dw[oc][c] += G^T dU[oc][c] G, the adjoint of hn_wino_filters. */
HN_HOT void hn_wino_dfilters(float *restrict dw, const float *restrict dU, const struct hn_layer *l)
{
	const size_t MC = (size_t)l->out_c * l->in_c;
	if (by4(l)) {
		hn_wino4_dfilters(dw, dU, l);
		return;
	}
	for (size_t f = 0; f < MC; f++) {
		float u[16], r[3][4];
		for (int xi = 0; xi < 16; xi++)
			u[xi] = dU[xi * MC + f];
		for (int j = 0; j < 4; j++) {
			r[0][j] = u[j] + 0.5f * (u[4 + j] + u[8 + j]);
			r[1][j] = 0.5f * (u[4 + j] - u[8 + j]);
			r[2][j] = 0.5f * (u[4 + j] + u[8 + j]) + u[12 + j];
		}
		float *g = dw + 9 * f;
		for (int a = 0; a < 3; a++) {
			g[3 * a + 0] += r[a][0] + 0.5f * (r[a][1] + r[a][2]);
			g[3 * a + 1] += 0.5f * (r[a][1] - r[a][2]);
			g[3 * a + 2] += 0.5f * (r[a][1] + r[a][2]) + r[a][3];
		}
	}
}

/*
 * V = B^T d B of every tile: per tile row, its four input rows (a row of
 * zeros, the first W floats of the scratch zr, where they fall outside the
 * input) are combined down the rows into rows of 2 * TW + 2 columns, zero
 * in the padding, then across each tile's four columns.
 */
HN_HOT static void input_transform(float *restrict V, float *restrict zr, const float *restrict in,
				   int n, const struct hn_layer *l)
{
	const int C = l->in_c, H = l->in_h, W = l->in_w, Pd = l->pad;
	const int TH = tiles_h(l), TW = tiles_w(l), WP = 2 * TW + 2;
	const size_t T = (size_t)TH * TW, NT = (size_t)n * T, CNT = (size_t)C * NT;
	float q[4][WP];

	memset(zr, 0, sizeof(float) * W);
	for (int i = 0; i < 4; i++)
		for (int x = 0; x < WP; x++)
			q[i][x] = 0.0f; /* the padding columns stay 0 */
	for (int c = 0; c < C; c++)
		for (int s = 0; s < n; s++) {
			const float *plane = in + ((size_t)s * C + c) * H * W;
			float *v = V + (size_t)c * NT + (size_t)s * T;
			for (int ty = 0; ty < TH; ty++, v += TW) {
				const float *r[4];
				for (int i = 0; i < 4; i++) {
					int iy = 2 * ty - Pd + i;
					r[i] = iy >= 0 && iy < H ? plane + (size_t)iy * W : zr;
				}
				const float *restrict r0 = r[0], *restrict r1 = r[1],
						      *restrict r2 = r[2], *restrict r3 = r[3];
				float *restrict q0 = q[0] + Pd, *restrict q1 = q[1] + Pd,
						*restrict q2 = q[2] + Pd, *restrict q3 = q[3] + Pd;
				for (int x = 0; x < W; x++) {
					q0[x] = r0[x] - r2[x];
					q1[x] = r1[x] + r2[x];
					q2[x] = r2[x] - r1[x];
					q3[x] = r1[x] - r3[x];
				}
				for (int i = 0; i < 4; i++) {
					float *v0 = v + (size_t)(4 * i) * CNT, *v1 = v0 + CNT,
					      *v2 = v1 + CNT, *v3 = v2 + CNT;
					const float *rr = q[i];
					for (int tx = 0; tx < TW; tx++) {
						float a = rr[2 * tx], b = rr[2 * tx + 1],
						      cc = rr[2 * tx + 2], d = rr[2 * tx + 3];
						v0[tx] = a - cc;
						v1[tx] = b + cc;
						v2[tx] = cc - b;
						v3[tx] = b - d;
					}
				}
			}
		}
}

/*
 * out = A^T M A of every tile (+ bias, ReLU when asked), the part inside the
 * output: per output channel, the four outputs of all n * T tiles first
 * (vectorised across tiles), then laid into the planes. y: 4 * n * T floats.
 */
HN_HOT static void output_transform(float *restrict out, const float *restrict Mm,
				    float *restrict y, const float *b, int n,
				    const struct hn_layer *l, int relu)
{
	const int M = l->out_c, OH = l->out_h, OW = l->out_w;
	const int TH = tiles_h(l), TW = tiles_w(l);
	const size_t T = (size_t)TH * TW, NT = (size_t)n * T, MNT = (size_t)M * NT;
	float *restrict y00 = y, *restrict y01 = y + NT, *restrict y10 = y + 2 * NT,
			*restrict y11 = y + 3 * NT;

	for (int oc = 0; oc < M; oc++) {
		const float bias = b ? b[oc] : 0.0f;
		const float *restrict m = Mm + (size_t)oc * NT;
		for (size_t t = 0; t < NT; t++) {
			float t0[4], t1[4];
			for (int j = 0; j < 4; j++) {
				float m0 = m[(size_t)j * MNT + t],
				      m1 = m[(size_t)(4 + j) * MNT + t],
				      m2 = m[(size_t)(8 + j) * MNT + t],
				      m3 = m[(size_t)(12 + j) * MNT + t];
				t0[j] = m0 + m1 + m2;
				t1[j] = m1 - m2 - m3;
			}
			y00[t] = t0[0] + t0[1] + t0[2] + bias;
			y01[t] = t0[1] - t0[2] - t0[3] + bias;
			y10[t] = t1[0] + t1[1] + t1[2] + bias;
			y11[t] = t1[1] - t1[2] - t1[3] + bias;
		}
		if (relu)
			for (size_t t = 0; t < 4 * NT; t++)
				y[t] = y[t] > 0.0f ? y[t] : 0.0f;
		for (int s = 0; s < n; s++) {
			float *plane = out + ((size_t)s * M + oc) * OH * OW;
			for (int ty = 0; ty < TH; ty++) {
				const size_t k = (size_t)s * T + (size_t)ty * TW;
				for (int a = 0; a < 2 && 2 * ty + a < OH; a++) {
					float *dst = plane + (size_t)(2 * ty + a) * OW;
					const float *e = (a ? y10 : y00) + k,
						    *o = (a ? y11 : y01) + k;
					int tx = 0;
					for (; 2 * tx + 1 < OW; tx++) {
						dst[2 * tx] = e[tx];
						dst[2 * tx + 1] = o[tx];
					}
					if (2 * tx < OW)
						dst[2 * tx] = e[tx];
				}
			}
		}
	}
}

void hn_wino_gemms(int nf, int ta, int tb, int m, int nn, int k, const float *A, size_t sa, int lda,
		   const float *B, size_t sb, int ldb, float beta, float *Cm, size_t sc)
{
	for (int xi = 0; xi < nf; xi++)
		cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
			    tb ? CblasTrans : CblasNoTrans, m, nn, k, 1.0f, A + xi * sa, lda,
			    B + xi * sb, ldb, beta, Cm + xi * sc, nn);
}

void hn_wino_forward(float *out, float *V, float *ws, const float *in, const float *U,
		     const float *b, int n, const struct hn_layer *l, int relu)
{
	const int M = l->out_c, C = l->in_c;
	const int NT = (int)tiles(l, n);
	float *Mm = ws, *y = ws + 16 * (size_t)M * NT;

	if (by4(l)) {
		hn_wino4_forward(out, V, ws, in, U, b, n, l, relu);
		return;
	}
	input_transform(V, Mm, in, n, l); /* Mm's space: its zero row */
	hn_wino_gemms(16, 0, 0, M, NT, C, U, (size_t)M * C, C, V, (size_t)C * NT, NT, 0.0f, Mm,
		      (size_t)M * NT);
	output_transform(out, Mm, y, b, n, l, relu);
}

/* Row i of A dY for NT tiles (p, q), spread across as p, p+q, p-q, -q into d, d+st, ... */
HN_HOT static void rows_out(float *d, size_t st, const float *restrict e0, const float *restrict o0,
			    const float *restrict e1, const float *restrict o1, int i, size_t NT)
{
	float *restrict d0 = d, *restrict d1 = d + st, *restrict d2 = d + 2 * st,
			*restrict d3 = d + 3 * st;
	for (size_t t = 0; t < NT; t++) {
		float p, q;
		if (i == 0)
			p = e0[t], q = o0[t];
		else if (i == 1)
			p = e0[t] + e1[t], q = o0[t] + o1[t];
		else if (i == 2)
			p = e0[t] - e1[t], q = o0[t] - o1[t];
		else
			p = -e1[t], q = -o1[t];
		d0[t] = p;
		d1[t] = p + q;
		d2[t] = p - q;
		d3[t] = -q;
	}
}

/*
 * dM = A dY A^T of every tile, dY the output gradient (through the fused
 * ReLU's mask; 0 past the output's edge); the bias gradient on the way. Per
 * output channel, the 2x2 dY of all n * T tiles are gathered first into
 * four arrays (g: 4 * n * T floats), then transformed across tiles.
 */
HN_HOT static void dout_transform(float *restrict dM, float *restrict g, float *db,
				  const float *restrict dout, const float *restrict out_relu, int n,
				  const struct hn_layer *l)
{
	const int M = l->out_c, OH = l->out_h, OW = l->out_w;
	const int TH = tiles_h(l), TW = tiles_w(l);
	const size_t T = (size_t)TH * TW, NT = (size_t)n * T, MNT = (size_t)M * NT;
	float *restrict e0 = g, *restrict o0 = g + NT, *restrict e1 = g + 2 * NT,
			*restrict o1 = g + 3 * NT;

	for (int oc = 0; oc < M; oc++) {
		double bsum = 0;
		for (int s = 0; s < n; s++) {
			const size_t po = ((size_t)s * M + oc) * OH * OW;
			for (int ty = 0; ty < TH; ty++) {
				const size_t k = (size_t)s * T + (size_t)ty * TW;
				for (int a = 0; a < 2; a++) {
					float *restrict e = (a ? e1 : e0) + k, *restrict o =
										       (a ? o1
											  : o0) +
										       k;
					int oy = 2 * ty + a, tx = 0;
					if (oy >= OH) {
						for (; tx < TW; tx++)
							e[tx] = o[tx] = 0.0f;
						continue;
					}
					const float *restrict src = dout + po + (size_t)oy * OW;
					const float *restrict msk =
						out_relu ? out_relu + po + (size_t)oy * OW : NULL;
					if (msk)
						for (; 2 * tx + 1 < OW; tx++) {
							float x0 = src[2 * tx],
							      x1 = src[2 * tx + 1];
							e[tx] = msk[2 * tx] > 0.0f ? x0 : 0.0f;
							o[tx] = msk[2 * tx + 1] > 0.0f ? x1 : 0.0f;
						}
					else
						for (; 2 * tx + 1 < OW; tx++) {
							e[tx] = src[2 * tx];
							o[tx] = src[2 * tx + 1];
						}
					if (tx < TW) {
						float x0 = src[2 * tx];
						e[tx] = msk && !(msk[2 * tx] > 0.0f) ? 0.0f : x0;
						o[tx] = 0.0f;
					}
					if (db) {
						float rs = 0.0f;
						for (int x = 0; x < TW; x++)
							rs += e[x] + o[x];
						bsum += rs;
					}
				}
			}
		}
		if (db)
			db[oc] += (float)bsum;
		float *restrict d = dM + (size_t)oc * NT;
		/* rows of A dY: dY0, dY0 + dY1, dY0 - dY1, -dY1; each (p, q) -> p, p+q, p-q, -q */
		for (int i = 0; i < 4; i++)
			rows_out(d + (size_t)(4 * i) * MNT, MNT, e0, o0, e1, o1, i, NT);
	}
}

/*
 * din = sum over tiles of B dV B^T, the adjoint of input_transform: per tile
 * row, each of the four rows of dV is spread across its tile's columns into
 * a padded row (tiles in order), the four are combined down the rows and
 * added into the input rows they came from (tile rows in order).
 */
HN_HOT static void input_adjoint(float *restrict din, const float *restrict dV, int n,
				 const struct hn_layer *l)
{
	const int C = l->in_c, H = l->in_h, W = l->in_w, Pd = l->pad;
	const int TH = tiles_h(l), TW = tiles_w(l), WP = 2 * TW + 2;
	const size_t T = (size_t)TH * TW, NT = (size_t)n * T, CNT = (size_t)C * NT;
	float h[4][WP], c0[TW], c1[TW], c2[TW], c3[TW];

	memset(din, 0, sizeof(float) * (size_t)n * C * H * W);
	for (int c = 0; c < C; c++)
		for (int s = 0; s < n; s++) {
			float *plane = din + ((size_t)s * C + c) * H * W;
			const float *v = dV + (size_t)c * NT + (size_t)s * T;
			for (int ty = 0; ty < TH; ty++, v += TW) {
				for (int i = 0; i < 4; i++) {
					const float *v0 = v + (size_t)(4 * i) * CNT, *v1 = v0 + CNT,
						    *v2 = v1 + CNT, *v3 = v2 + CNT;
					float *r = h[i];
					/* tile tx's four columns 2tx.. get c0, c1, c2, c3:
					 * overlap-add */
					for (int tx = 0; tx < TW; tx++) {
						c0[tx] = v0[tx];
						c1[tx] = v1[tx] - v2[tx] + v3[tx];
						c2[tx] = -v0[tx] + v1[tx] + v2[tx];
						c3[tx] = -v3[tx];
					}
					r[0] = c0[0];
					r[1] = c1[0];
					for (int tx = 1; tx < TW; tx++) {
						r[2 * tx] = c0[tx] + c2[tx - 1];
						r[2 * tx + 1] = c1[tx] + c3[tx - 1];
					}
					r[2 * TW] = c2[TW - 1];
					r[2 * TW + 1] = c3[TW - 1];
				}
				for (int a = 0; a < 4; a++) {
					int iy = 2 * ty - Pd + a;
					if (iy < 0 || iy >= H)
						continue;
					float *dst = plane + (size_t)iy * W;
					int x0 = Pd, x1 = W + Pd < WP ? W + Pd : WP;
					/* rows of B dV: dV0, dV1 - dV2 + dV3, -dV0 + dV1 + dV2,
					 * -dV3 */
					if (a == 0)
						for (int x = x0; x < x1; x++)
							dst[x - Pd] += h[0][x];
					else if (a == 1)
						for (int x = x0; x < x1; x++)
							dst[x - Pd] += h[1][x] - h[2][x] + h[3][x];
					else if (a == 2)
						for (int x = x0; x < x1; x++)
							dst[x - Pd] += -h[0][x] + h[1][x] + h[2][x];
					else
						for (int x = x0; x < x1; x++)
							dst[x - Pd] += -h[3][x];
				}
			}
		}
}

void hn_wino_backward(float *din, float *dU, float *db, float *V, float *ws, const float *dout,
		      const float *out_relu, const float *in, const float *U, int n,
		      const struct hn_layer *l, int v_valid)
{
	const int M = l->out_c, C = l->in_c;
	const int NT = (int)tiles(l, n);
	float *dM = ws, *dV = dM + 16 * (size_t)M * NT;

	if (by4(l)) {
		hn_wino4_backward(din, dU, db, V, ws, dout, out_relu, in, U, n, l, v_valid);
		return;
	}
	dout_transform(dM, dV, db, dout, out_relu, n, l); /* dV's space: scratch until the sgemm */
	if (!v_valid)
		input_transform(V, dV, in, n, l);
	if (din) {
		hn_wino_gemms(16, 1, 0, C, NT, M, U, (size_t)M * C, C, dM, (size_t)M * NT, NT, 0.0f,
			      dV, (size_t)C * NT);
		input_adjoint(din, dV, n, l);
	}
	hn_wino_gemms(16, 0, 1, M, C, NT, dM, (size_t)M * NT, NT, V, (size_t)C * NT, NT, 1.0f, dU,
		      (size_t)M * C);
}
