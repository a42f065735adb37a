/*
 * test_layers.c - the CPU layers' forward results against naive references,
 * plus the properties the backend relies on.
 *
 * References are the textbook loops in double (direct convolution, window
 * max, dot products, log-sum-exp), so a layout or index slip in im2col, the
 * GEMM reorder or the pooling fast path shows up as a mismatch. Also checked:
 * im2col/col2im are adjoint (<im2col x, y> = <x, col2im y>), the fused
 * bias+ReLU paths equal the unfused composition in forward and backward,
 * dropout's mask rate, scale and reproducibility, the input conversion, and
 * the model builder's shapes, parameter counts, spec errors and seeded init;
 * the Winograd convolutions (wino.c) against im2col's, forward and backward.
 * Exit 0 pass, 1 fail (each failure names the layer and configuration).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/perm.h"
#include "trainer/layers.h"
#include "trainer/model.h"
#include "trainer/wino4.h"
#include "tests/check.h"

static struct sprite_rng rng;

static float urand(float lo, float hi)
{
	return lo + (hi - lo) * sprite_rng_uniform(&rng);
}

static float *rand_floats(size_t n, float lo, float hi)
{
	float *p = malloc(sizeof(float) * (n ? n : 1));
	for (size_t i = 0; i < n; i++)
		p[i] = urand(lo, hi);
	return p;
}

/* Worst |a-b| / (1 + |b|) over n values. */
static double max_err(const float *a, const double *b, size_t n)
{
	double e = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));
		if (!(d <= e))
			e = d; /* also catches NaN */
	}
	return e;
}

static struct hn_layer conv_layer(int c, int h, int w, int oc, int k, int s, int p)
{
	struct hn_layer l = {.kind = HN_LAYER_CONV2D,
			     .in_c = c,
			     .in_h = h,
			     .in_w = w,
			     .out_c = oc,
			     .k = k,
			     .stride = s,
			     .pad = p};
	l.out_h = (h + 2 * p - k) / s + 1;
	l.out_w = (w + 2 * p - k) / s + 1;
	return l;
}

static void test_conv(int c, int h, int w, int oc, int k, int s, int p, int n)
{
	struct hn_layer l = conv_layer(c, h, w, oc, k, s, p);
	size_t in_n = (size_t)n * c * h * w, out_n = (size_t)n * oc * l.out_h * l.out_w;
	float *in = rand_floats(in_n, -1, 1), *wt = rand_floats((size_t)oc * c * k * k, -1, 1);
	float *b = rand_floats((size_t)oc, -1, 1);
	float *col = malloc(sizeof(float) * hn_conv2d_col_floats(&l, n));
	float *tmp = malloc(sizeof(float) * out_n), *out = malloc(sizeof(float) * out_n);
	double *ref = malloc(sizeof(double) * out_n);

	for (int sm = 0; sm < n; sm++)
		for (int o = 0; o < oc; o++)
			for (int y = 0; y < l.out_h; y++)
				for (int x = 0; x < l.out_w; x++) {
					double acc = b[o];
					for (int ci = 0; ci < c; ci++)
						for (int ki = 0; ki < k; ki++)
							for (int kj = 0; kj < k; kj++) {
								int iy = y * s + ki - p,
								    ix = x * s + kj - p;
								if (iy < 0 || iy >= h || ix < 0 ||
								    ix >= w)
									continue;
								acc += (double)wt[((o * c + ci) *
											   k +
										   ki) * k +
										  kj] *
								       in[(((size_t)sm * c + ci) *
										   h +
									   iy) * w +
									  ix];
							}
					ref[(((size_t)sm * oc + o) * l.out_h + y) * l.out_w + x] =
						acc;
				}
	hn_conv2d_forward(out, col, tmp, in, wt, b, n, &l, 0);
	double e = max_err(out, ref, out_n);
	if (e > 1e-4)
		FAIL("conv2d forward c%d %dx%d oc%d k%d s%d p%d n%d: error %g", c, h, w, oc, k, s,
		     p, n, e);
	/* fused ReLU = ReLU of the plain result */
	for (size_t i = 0; i < out_n; i++)
		ref[i] = ref[i] > 0 ? ref[i] : 0;
	hn_conv2d_forward(out, col, tmp, in, wt, b, n, &l, 1);
	e = max_err(out, ref, out_n);
	if (e > 1e-4)
		FAIL("conv2d forward+relu c%d %dx%d k%d s%d p%d: error %g", c, h, w, k, s, p, e);

	/* adjoint: <im2col(x), y> == <x, col2im(y)> */
	size_t cn = hn_conv2d_col_floats(&l, n);
	float *y = rand_floats(cn, -1, 1), *back = malloc(sizeof(float) * in_n);
	hn_im2col(col, in, n, &l);
	hn_col2im(back, y, n, &l);
	double lhs = 0, rhs = 0, mag = 0;
	for (size_t i = 0; i < cn; i++) {
		lhs += (double)col[i] * y[i];
		mag += fabs((double)col[i] * y[i]);
	}
	for (size_t i = 0; i < in_n; i++)
		rhs += (double)in[i] * back[i];
	if (fabs(lhs - rhs) > 1e-5 * (1 + mag))
		FAIL("im2col/col2im not adjoint for c%d %dx%d k%d s%d p%d: %g vs %g", c, h, w, k, s,
		     p, lhs, rhs);

	/* fused backward (dout gated by out>0) == plain backward on the gated dout */
	float *dout = rand_floats(out_n, -1, 1), *gated = malloc(sizeof(float) * out_n);
	float *dcol = malloc(sizeof(float) * cn);
	size_t wn = (size_t)oc * c * k * k;
	float *dw1 = calloc(wn, sizeof(float)), *dw2 = calloc(wn, sizeof(float));
	float *db1 = calloc((size_t)oc, sizeof(float)), *db2 = calloc((size_t)oc, sizeof(float));
	float *din1 = malloc(sizeof(float) * in_n), *din2 = malloc(sizeof(float) * in_n);
	for (size_t i = 0; i < out_n; i++)
		gated[i] = out[i] > 0 ? dout[i] : 0;
	hn_conv2d_backward(din1, dw1, db1, col, tmp, dcol, dout, out, in, wt, n, &l, 0);
	hn_conv2d_backward(din2, dw2, db2, col, tmp, dcol, gated, NULL, in, wt, n, &l, 1);
	if (memcmp(dw1, dw2, sizeof(float) * wn) || memcmp(db1, db2, sizeof(float) * oc) ||
	    memcmp(din1, din2, sizeof(float) * in_n))
		FAIL("conv2d fused-relu backward differs from gated plain backward (k%d s%d p%d)",
		     k, s, p);
	free(dout), free(gated), free(dcol), free(dw1), free(dw2), free(db1), free(db2);
	free(din1), free(din2), free(y), free(back);
	free(in), free(wt), free(b), free(col), free(tmp), free(out), free(ref);
}

/* Worst |a-b| / (1 + |b|) of two float tensors. */
static double max_err_f(const float *a, const float *b, size_t n)
{
	double e = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
		if (!(d <= e))
			e = d;
	}
	return e;
}

/*
 * Winograd F(2x2, 3x3) (wino.c) and F(4x4, 3x3) (wino4.c) against im2col's
 * conv2d, which test_conv holds to the direct loops: forward (plain and fused
 * ReLU) and backward (input, filter and bias gradients) within fp32 rounding
 * (F(4x4)'s forward within 1e-4: its transforms' larger entries round about
 * ten times more, measured 1e-5 to 5e-5 here), and the fused-ReLU
 * backward equal to the plain one on the gated gradient, bit for bit.
 */
static void test_wino(int c, int h, int w, int oc, int p, int n)
{
	struct hn_layer l = conv_layer(c, h, w, oc, 3, 1, p);
	const char *e2 = getenv("HN_CPU_WINOGRAD");
	int f2 = e2 && !strcmp(e2, "2"); /* F(2x2) alone */
	if (!hn_wino_fits(&l)) {
		FAIL("Winograd does not take c%d %dx%d oc%d p%d", c, h, w, oc, p);
		return;
	}
	size_t in_n = (size_t)n * c * h * w, out_n = (size_t)n * oc * l.out_h * l.out_w;
	size_t wn = (size_t)oc * c * 9, cn = hn_conv2d_col_floats(&l, n), un = hn_wino_u_floats(&l);
	float *in = rand_floats(in_n, -1, 1), *wt = rand_floats(wn, -1, 1);
	float *b = rand_floats((size_t)oc, -1, 1), *dout = rand_floats(out_n, -1, 1);
	float *col = malloc(sizeof(float) * cn), *dcol = malloc(sizeof(float) * cn);
	float *tmp = malloc(sizeof(float) * out_n), *ref = malloc(sizeof(float) * out_n);
	float *out = malloc(sizeof(float) * out_n), *gated = malloc(sizeof(float) * out_n);
	float *U = malloc(sizeof(float) * un), *dU = calloc(un, sizeof(float));
	float *ws = malloc(sizeof(float) * hn_wino_ws_floats(&l, n));
	float *din[3], *dw[3], *db[3];
	for (int k = 0; k < 3; k++) {
		din[k] = malloc(sizeof(float) * in_n);
		dw[k] = calloc(wn, sizeof(float));
		db[k] = calloc((size_t)oc, sizeof(float));
	}
	if (hn_wino_v_floats(&l, n) > cn)
		FAIL("Winograd c%d %dx%d: V takes more than im2col's matrix", c, h, w);
	hn_wino_filters(U, wt, &l, 0, oc / 2);
	hn_wino_filters(U, wt, &l, oc / 2, oc); /* in two parts, as the team makes it */
	for (int relu = 0; relu < 2; relu++) {
		hn_conv2d_forward(ref, col, tmp, in, wt, b, n, &l, relu);
		hn_wino_forward(out, col, ws, in, U, b, n, &l, relu);
		double e = max_err_f(out, ref, out_n);
		if (e > (hn_wino4_pays(&l) && !f2 ? 1e-4 : 1e-5))
			FAIL("Winograd forward%s c%d %dx%d oc%d p%d n%d: error %g",
			     relu ? "+relu" : "", c, h, w, oc, p, n, e);
	}
	/* out holds the fused-ReLU output: backward through its mask, three ways */
	for (size_t i = 0; i < out_n; i++)
		gated[i] = out[i] > 0 ? dout[i] : 0;
	hn_conv2d_backward(din[0], dw[0], db[0], col, tmp, dcol, gated, NULL, in, wt, n, &l, 0);
	hn_wino_backward(din[1], dU, db[1], col, ws, dout, out, in, U, n, &l, 0);
	hn_wino_dfilters(dw[1], dU, &l);
	memset(dU, 0, sizeof(float) * un);
	hn_wino_backward(din[2], dU, db[2], col, ws, gated, NULL, in, U, n, &l, 1);
	hn_wino_dfilters(dw[2], dU, &l);
	double e = fmax(fmax(max_err_f(din[1], din[0], in_n), max_err_f(dw[1], dw[0], wn)),
			max_err_f(db[1], db[0], (size_t)oc));
	if (e > 1e-4)
		FAIL("Winograd backward c%d %dx%d oc%d p%d n%d: error %g", c, h, w, oc, p, n, e);
	if (memcmp(din[1], din[2], sizeof(float) * in_n) ||
	    memcmp(dw[1], dw[2], sizeof(float) * wn) || memcmp(db[1], db[2], sizeof(float) * oc))
		FAIL("Winograd fused-relu backward differs from gated plain backward (c%d p%d)", c,
		     p);
	for (int k = 0; k < 3; k++)
		free(din[k]), free(dw[k]), free(db[k]);
	free(in), free(wt), free(b), free(dout), free(col), free(dcol), free(tmp), free(ref);
	free(out), free(gated), free(U), free(dU), free(ws);
}

static void test_pool(int c, int h, int w, int k, int s, int n)
{
	struct hn_layer l = {.kind = HN_LAYER_MAXPOOL,
			     .in_c = c,
			     .in_h = h,
			     .in_w = w,
			     .out_c = c,
			     .k = k,
			     .stride = s};
	l.out_h = (h - k) / s + 1;
	l.out_w = (w - k) / s + 1;
	size_t in_n = (size_t)n * c * h * w, out_n = (size_t)n * c * l.out_h * l.out_w;
	float *in = rand_floats(in_n, -1, 1), *out = malloc(sizeof(float) * out_n);
	int32_t *idx = malloc(sizeof(int32_t) * out_n);
	double *ref = malloc(sizeof(double) * out_n);
	/* a few ties: the first in row-major order must win */
	for (size_t i = 0; i + 1 < in_n; i += 7)
		in[i + 1] = in[i];
	for (size_t pl = 0; pl < (size_t)n * c; pl++)
		for (int y = 0; y < l.out_h; y++)
			for (int x = 0; x < l.out_w; x++) {
				double m = -INFINITY;
				for (int ki = 0; ki < k; ki++)
					for (int kj = 0; kj < k; kj++)
						m = fmax(m,
							 in[pl * h * w + (size_t)(y * s + ki) * w +
							    x * s + kj]);
				ref[(pl * l.out_h + y) * l.out_w + x] = m;
			}
	hn_maxpool_forward(out, idx, in, n, &l);
	double e = max_err(out, ref, out_n);
	if (e != 0)
		FAIL("maxpool forward c%d %dx%d k%d s%d: error %g", c, h, w, k, s, e);
	for (size_t o = 0; o < out_n; o++) {
		size_t pl = o / ((size_t)l.out_h * l.out_w);
		if (idx[o] < 0 || idx[o] >= h * w || in[pl * h * w + idx[o]] != out[o]) {
			FAIL("maxpool k%d s%d: argmax %d does not hold the max", k, s, idx[o]);
			break;
		}
	}
	free(in), free(out), free(idx), free(ref);
}

static void test_dense(int in_f, int out_f, int n)
{
	struct hn_layer l = {.kind = HN_LAYER_DENSE,
			     .in_c = in_f,
			     .in_h = 1,
			     .in_w = 1,
			     .out_c = out_f,
			     .out_h = 1,
			     .out_w = 1};
	float *in = rand_floats((size_t)n * in_f, -1, 1);
	float *w = rand_floats((size_t)in_f * out_f, -1, 1), *b = rand_floats(out_f, -1, 1);
	float *out = malloc(sizeof(float) * n * out_f);
	double *ref = malloc(sizeof(double) * n * out_f);
	for (int s = 0; s < n; s++)
		for (int o = 0; o < out_f; o++) {
			double acc = b[o];
			for (int i = 0; i < in_f; i++)
				acc += (double)w[(size_t)o * in_f + i] * in[(size_t)s * in_f + i];
			ref[(size_t)s * out_f + o] = acc;
		}
	hn_dense_forward(out, in, w, b, n, &l, 0);
	double e = max_err(out, ref, (size_t)n * out_f);
	if (e > 1e-4) /* float sums of up to 1600 products */
		FAIL("dense forward %d->%d n%d: error %g", in_f, out_f, n, e);
	for (int i = 0; i < n * out_f; i++)
		ref[i] = ref[i] > 0 ? ref[i] : 0;
	hn_dense_forward(out, in, w, b, n, &l, 1);
	e = max_err(out, ref, (size_t)n * out_f);
	if (e > 1e-4)
		FAIL("dense forward+relu %d->%d: error %g", in_f, out_f, e);

	size_t on = (size_t)n * out_f, wn = (size_t)in_f * out_f;
	float *dout = rand_floats(on, -1, 1), *gated = malloc(sizeof(float) * on);
	float *tmp = malloc(sizeof(float) * on);
	float *dw1 = calloc(wn, 4), *dw2 = calloc(wn, 4), *db1 = calloc(out_f, 4),
	      *db2 = calloc(out_f, 4);
	float *din1 = malloc(sizeof(float) * n * in_f), *din2 = malloc(sizeof(float) * n * in_f);
	for (size_t i = 0; i < on; i++)
		gated[i] = out[i] > 0 ? dout[i] : 0;
	hn_dense_backward(din1, dw1, db1, tmp, dout, out, in, w, n, &l);
	hn_dense_backward(din2, dw2, db2, tmp, gated, NULL, in, w, n, &l);
	if (memcmp(dw1, dw2, sizeof(float) * wn) || memcmp(db1, db2, sizeof(float) * out_f) ||
	    memcmp(din1, din2, sizeof(float) * n * in_f))
		FAIL("dense fused-relu backward differs from gated plain backward (%d->%d)", in_f,
		     out_f);
	free(dout), free(gated), free(tmp), free(dw1), free(dw2), free(db1), free(db2);
	free(din1), free(din2);
	free(in), free(w), free(b), free(out), free(ref);
}

static void test_softmax(int n, int k, float spread)
{
	float *z = rand_floats((size_t)n * k, -spread, spread), *p = malloc(sizeof(float) * n * k);
	uint16_t *lab = malloc(sizeof(uint16_t) * n);
	double ref = 0;
	int hits = 0, correct = -1;
	for (int s = 0; s < n; s++) {
		lab[s] = (uint16_t)sprite_rng_below(&rng, (uint64_t)k);
		const float *r = z + (size_t)s * k;
		long double mx = r[0], sum = 0;
		int arg = 0;
		for (int j = 1; j < k; j++)
			if (r[j] > r[arg])
				arg = j;
		mx = r[arg];
		for (int j = 0; j < k; j++)
			sum += expl((long double)r[j] - mx);
		ref += (double)(logl(sum) + mx - r[lab[s]]);
		hits += arg == lab[s];
	}
	double loss = hn_softmax_ce_forward(p, z, lab, n, k, &correct);
	if (!(fabs(loss - ref) <= 1e-5 * (1 + fabs(ref))) || correct != hits)
		FAIL("softmax CE n%d k%d spread %g: loss %g vs %g, correct %d vs %d", n, k, spread,
		     loss, ref, correct, hits);
	for (int s = 0; s < n; s++) {
		double sum = 0;
		for (int j = 0; j < k; j++)
			sum += p[(size_t)s * k + j];
		if (fabs(sum - 1) > 1e-5) {
			FAIL("softmax probabilities of sample %d sum to %g", s, sum);
			break;
		}
	}
	free(z), free(p), free(lab);
}

static void test_dropout(void)
{
	const size_t n = 100000;
	const float p = 0.3f;
	float *m1 = malloc(sizeof(float) * n), *m2 = malloc(sizeof(float) * n);
	hn_dropout_mask(m1, n, p, 42, 7);
	hn_dropout_mask(m2, n, p, 42, 7);
	if (memcmp(m1, m2, sizeof(float) * n))
		FAIL("dropout mask not reproducible for the same (seed, step)");
	size_t zeros = 0, bad = 0;
	for (size_t i = 0; i < n; i++) {
		if (m1[i] == 0)
			zeros++;
		else if (fabsf(m1[i] - 1 / (1 - p)) > 1e-6f)
			bad++;
	}
	if (bad || fabs((double)zeros / n - p) > 0.01)
		FAIL("dropout mask: %zu bad scales, drop rate %g (want %g)", bad, (double)zeros / n,
		     p);
	hn_dropout_mask(m2, n, p, 42, 8);
	if (!memcmp(m1, m2, sizeof(float) * n))
		FAIL("dropout mask identical for different steps");
	float in[4] = {1, 2, 3, 4}, out[4], mk[4] = {0, 2, 2, 0};
	hn_dropout_forward(out, in, mk, 4);
	if (out[0] != 0 || out[1] != 4 || out[2] != 6 || out[3] != 0)
		FAIL("dropout forward does not multiply by the mask");
	free(m1), free(m2);
}

static void test_input(void)
{
	uint8_t t[2 * 2 * 3 * 2]; /* n=2, h=2, w=3, c=2 (HWC) */
	float out[24];
	for (int i = 0; i < 24; i++)
		t[i] = (uint8_t)(i * 11);
	hn_input_forward(out, t, 2, 2, 2, 3, NULL, NULL);
	for (int s = 0; s < 2; s++)
		for (int c = 0; c < 2; c++)
			for (int y = 0; y < 2; y++)
				for (int x = 0; x < 3; x++) {
					float want = t[s * 12 + (y * 3 + x) * 2 + c] / 255.0f;
					float got = out[s * 12 + c * 6 + y * 3 + x];
					if (fabsf(got - want) > 1e-7f) {
						FAIL("input HWC->CHW at s%d c%d y%d x%d: %g vs %g",
						     s, c, y, x, got, want);
						return;
					}
				}
}

static void test_models(void)
{
	static const struct {
		const char *name;
		int c, h, w;
		size_t nparams;
		int nlayers;
	} want[] = {
		{"cnn", 1, 28, 28, 225034, 9},
		{"mlp", 1, 28, 28, 235146, 5},
		{"lenet5", 1, 28, 28, 61706, 11},
		{"c8k3p1-m2-x0.25", 3, 16, 16, 8 * 27 + 8 + 8 * 64 * 10 + 10, 4},
		{"c4k3s2p1-r-m3s2-d10", 2, 9, 9, 4 * 18 + 4 + 4 * 2 * 2 * 10 + 10, 4},
	};
	char err[HN_ERR_MAX];
	struct hn_model m;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = hn_model_build(want[i].name, want[i].c, want[i].h, want[i].w, 10, &m, err);
		if (rc) {
			FAIL("model '%s' did not build: %s", want[i].name, err);
			continue;
		}
		if (m.nparams != want[i].nparams || m.nlayers != want[i].nlayers)
			FAIL("model '%s': %zu params, %d layers (want %zu, %d)", want[i].name,
			     m.nparams, m.nlayers, want[i].nparams, want[i].nlayers);
	}
	if (!hn_model_build("cnn", 1, 28, 28, 10, &m, err)) {
		static const int hw[] = {26, 26, 13, 11, 11, 5};
		for (int i = 0; i < 6; i++)
			if (m.layers[i].out_h != hw[i])
				FAIL("cnn layer %d: out %d (want %d)", i, m.layers[i].out_h, hw[i]);
		if (m.layers[6].in_c * m.layers[6].in_h * m.layers[6].in_w != 1600)
			FAIL("cnn dense sees %d inputs", m.layers[6].in_c);
		char buf[2048];
		hn_model_describe(&m, buf, sizeof buf);
		if (!strstr(buf, "conv2d") || !strstr(buf, "225034"))
			FAIL("describe lacks layers or the total:\n%s", buf);
		if (hn_model_activation_floats(&m) !=
		    784 + 2 * 21632 + 5408 + 2 * 7744 + 1600 + 2 * 128 + 10)
			FAIL("cnn activation floats %llu",
			     (unsigned long long)hn_model_activation_floats(&m));
		/*
		 * FLOPs of a training sample, by hand: conv1 1->32 k3 26x26 forward and
		 * weight gradient (no input gradient: nothing below has parameters),
		 * conv2 32->64 k3 11x11, dense 1600->128 and 128->10 with all three.
		 */
		double flops = 2.0 * 32 * 26 * 26 * 9 * 2 + 2.0 * 64 * 11 * 11 * 32 * 9 * 3 +
			       2.0 * 128 * 1600 * 3 + 2.0 * 10 * 128 * 3;
		if (hn_model_train_flops(&m) != flops || flops != 15396864.0)
			FAIL("cnn training FLOPs %.0f, by hand %.0f", hn_model_train_flops(&m),
			     flops);
		/* seeded init: reproducible, seed-dependent, He-bounded, zero bias */
		float *a = malloc(sizeof(float) * m.nparams),
		      *b = malloc(sizeof(float) * m.nparams);
		hn_model_init_params(&m, 5, a);
		hn_model_init_params(&m, 5, b);
		if (memcmp(a, b, sizeof(float) * m.nparams))
			FAIL("init not reproducible");
		hn_model_init_params(&m, 6, b);
		if (!memcmp(a, b, sizeof(float) * m.nparams))
			FAIL("init ignores the seed");
		float bound = sqrtf(6.0f / 9.0f), mx = 0;
		for (int i = 0; i < 288; i++)
			mx = fmaxf(mx, fabsf(a[i]));
		if (mx > bound || mx < 0.8f * bound || a[288] != 0 || a[319] != 0)
			FAIL("conv1 init: max |w| %g (bound %g), bias %g", mx, bound, a[288]);
		free(a), free(b);
	}
	static const char *bad[] = {"c32k", "q3",    "m40",    "c0k3", "d",	      "c8k3p3",
				    "x1.5", "c8k3-", "c8k3s0", "d-5",  "c99999999k3", ""};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = 0;
		int rc = hn_model_build(bad[i], 1, 28, 28, 10, &m, err);
		/* "c8k3-" has an empty trailing token: strtok skips it, so it builds */
		if (!strcmp(bad[i], "c8k3-"))
			continue;
		if (rc != -22 || !err[0])
			FAIL("spec '%s' accepted (rc %d) or no message", bad[i], rc);
	}
}

int main(void)
{
	sprite_rng_init(&rng, 1234, 0);
	/* c, h, w, oc, k, stride, pad, n */
	test_conv(1, 28, 28, 32, 3, 1, 0, 2);
	test_conv(32, 13, 13, 64, 3, 1, 0, 3);
	test_conv(3, 8, 6, 4, 3, 2, 1, 2);
	test_conv(2, 9, 9, 5, 5, 1, 2, 2);
	test_conv(2, 6, 7, 3, 1, 1, 0, 2);
	test_conv(3, 10, 10, 4, 4, 3, 1, 2);
	test_conv(1, 5, 5, 2, 5, 1, 0, 1);
	/* c, h, w, oc, pad, n: Winograd, even and odd sizes, pad 0-2, resnet's 4x4 */
	test_wino(16, 14, 14, 32, 1, 3);
	test_wino(32, 13, 13, 64, 0, 2);
	test_wino(16, 7, 9, 5, 2, 2);
	test_wino(64, 4, 4, 64, 1, 4);
	test_wino(16, 3, 2, 3, 1, 1);
	/* F(4x4, 3x3) (64 or more input channels), then the same on F(2x2, 3x3) alone */
	for (int k = 0; k < 2; k++) {
		if (k)
			setenv("HN_CPU_WINOGRAD", "2", 1);
		struct hn_layer l4 = conv_layer(64, 14, 14, 32, 3, 1, 1);
		if (!k && !hn_wino4_pays(&l4))
			FAIL("F(4x4, 3x3) does not take c64 14x14");
		test_wino(64, 14, 14, 32, 1, 3);
		test_wino(64, 13, 11, 16, 0, 2);
		test_wino(96, 7, 9, 5, 2, 2);
		test_wino(128, 4, 4, 64, 1, 2);
	}
	unsetenv("HN_CPU_WINOGRAD");
	/* c, h, w, k, stride, n */
	test_pool(3, 26, 26, 2, 2, 2);
	test_pool(2, 11, 11, 2, 2, 2);
	test_pool(2, 9, 9, 3, 2, 2);
	test_pool(1, 7, 8, 3, 3, 3);
	test_dense(1600, 128, 5);
	test_dense(7, 3, 1);
	test_dense(784, 256, 64);
	test_softmax(16, 10, 3);
	test_softmax(8, 10, 80); /* large logits: exp would overflow without the max shift */
	test_softmax(4, 1, 1);
	test_dropout();
	test_input();
	test_models();
	/* stride 2 by column phases (conv.c): odd and even sizes, pads 0-3, 1x1 to 7x7 (last: the
	   random draws of the cases above stay as they were) */
	test_conv(4, 7, 7, 6, 3, 2, 1, 2);
	test_conv(3, 14, 14, 5, 3, 2, 1, 3);
	test_conv(2, 9, 8, 3, 3, 2, 0, 2);
	test_conv(2, 7, 7, 3, 1, 2, 0, 2);
	test_conv(1, 11, 9, 2, 7, 2, 3, 1);
	if (failures) {
		fprintf(stderr, "test_layers: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_layers: all passed\n");
	return 0;
}
