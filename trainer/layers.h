/*
 * layers.h - the CPU layers behind backend_cpu.c (private to trainer/).
 *
 * Each layer is a <layer>_forward / <layer>_backward pair with the same
 * argument order, as in llm.c: outputs first, then inputs, then parameters,
 * then sizes. Activations are NCHW float32, batch-major (n samples of one
 * struct hn_layer shape each). Backward functions ADD parameter gradients
 * into dw/db (accumulation over micro-batches is the caller's business) and
 * OVERWRITE the input gradient din; din may be NULL when the layer below
 * needs no gradient (the first layer), which skips that work.
 *
 * Scratch buffers are passed in, never allocated here: the backend sizes
 * them once for its max batch (no malloc per step).
 */
#ifndef HN_LAYERS_H
#define HN_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/backend.h"

/*
 * HN_HOT: the elementwise and copy loops get an AVX2/FMA clone (x86-64-v3)
 * beside the baseline one, picked at load time, so one binary runs on any
 * x86-64 and still uses 256-bit vectors where they exist. Not under
 * ThreadSanitizer: the clone resolvers run before it is set up.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 &&           \
	!defined(__SANITIZE_THREAD__)
#define HN_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HN_HOT
#endif

/*
 * Input tile: n HWC uint8 tiles -> n CHW float tiles, byte / 255, then
 * (x - mean[c]) / std[c] when mean and std are given (NULL: no shift).
 */
void hn_input_forward(float *restrict out, const uint8_t *restrict tiles, int n, int c, int h,
		      int w, const float *mean, const float *std);

/*
 * conv2d (im2col over the n samples given + one sgemm). b and db may be
 * NULL: a conv without bias.
 * col:  scratch, hn_conv2d_col_floats(l, n) floats: the im2col matrix
 *       [in_c*k*k][n*out_h*out_w]; forward leaves it filled, and backward
 *       may reuse it (col_valid = 1) instead of rebuilding it from in.
 * tmp:  scratch, n*out_c*out_h*out_w floats (the GEMM's [out_c][n*P] result).
 * relu: fuse a following ReLU into the forward (out = max(0, conv + b)).
 * dcol: scratch like col, used only when din != NULL.
 * out_relu: the output whose > 0 mask gates dout (a fused ReLU), or NULL.
 */
size_t hn_conv2d_col_floats(const struct hn_layer *l, int n);
void hn_conv2d_forward(float *out, float *col, float *tmp, const float *in, const float *w,
		       const float *b, int n, const struct hn_layer *l, int relu);
void hn_conv2d_backward(float *din, float *dw, float *db, float *col, float *tmp, float *dcol,
			const float *dout, const float *out_relu, const float *in, const float *w,
			int n, const struct hn_layer *l, int col_valid);
void hn_im2col(float *restrict col, const float *restrict in, int n, const struct hn_layer *l);
void hn_col2im(float *restrict din, const float *restrict dcol, int n, const struct hn_layer *l);

/*
 * conv2d by Winograd's F(2x2, 3x3) (wino.c), for the layers hn_wino_fits
 * takes: 3x3, stride 1, 16 or more input channels, an output of at least 2x2
 * (HN_CPU_WINOGRAD=0 takes none); by F(4x4, 3x3) (wino4.c) where that pays,
 * 64 or more input channels (HN_CPU_WINOGRAD=2: F(2x2) for all). Same
 * arguments as hn_conv2d_*, but:
 * V:  the transformed input, hn_wino_v_floats(l, n) floats, no more than
 *     hn_conv2d_col_floats(l, n); forward leaves it for backward (v_valid).
 * ws: scratch, hn_wino_ws_floats(l, n) floats.
 * U:  the transformed filters, hn_wino_u_floats(l) (16 or 36 * out_c * in_c), in place of w:
 *     hn_wino_filters makes those of output channels [oc0, oc1) from w.
 * dU: in place of dw, as many floats as U: backward ADDS the filters'
 *     gradient in the transformed domain; hn_wino_dfilters adds it into dw.
 */
int hn_wino_fits(const struct hn_layer *l);
size_t hn_wino_v_floats(const struct hn_layer *l, int n);
size_t hn_wino_u_floats(const struct hn_layer *l);
size_t hn_wino_ws_floats(const struct hn_layer *l, int n);
void hn_wino_filters(float *U, const float *w, const struct hn_layer *l, int oc0, int oc1);
void hn_wino_dfilters(float *dw, const float *dU, const struct hn_layer *l);
void hn_wino_forward(float *out, float *V, float *ws, const float *in, const float *U,
		     const float *b, int n, const struct hn_layer *l, int relu);
void hn_wino_backward(float *din, float *dU, float *db, float *V, float *ws, const float *dout,
		      const float *out_relu, const float *in, const float *U, int n,
		      const struct hn_layer *l, int v_valid);

/*
 * maxpool: idx (n*out floats' worth of int32) records the argmax within each
 * sample's input; padding (2 * pad <= k) never wins, as PyTorch's -inf.
 */
void hn_maxpool_forward(float *out, int32_t *idx, const float *in, int n, const struct hn_layer *l);
void hn_maxpool_backward(float *din, const float *dout, const int32_t *idx, int n,
			 const struct hn_layer *l);

/* relu: may run in place (out == in); backward reads the output mask. */
void hn_relu_forward(float *out, const float *in, size_t count);
void hn_relu_backward(float *din, const float *dout, const float *out, size_t count);

/* dense: out[n][o] = in[n][i] . w[o][i] + b[o] (+ fused ReLU). */
void hn_dense_forward(float *out, const float *in, const float *w, const float *b, int n,
		      const struct hn_layer *l, int relu);
void hn_dense_backward(float *din, float *dw, float *db, float *tmp, const float *dout,
		       const float *out_relu, const float *in, const float *w, int n,
		       const struct hn_layer *l);

/*
 * residual blocks (act.c): the add, out = x + y (+ fused ReLU); its backward
 * gives dout (masked by out_relu > 0 when given) to dy and, unless NULL, dx;
 * a save's backward: dx = dout + dskip (its two readers' gradients).
 */
void hn_add_forward(float *out, const float *x, const float *y, size_t count, int relu);
void hn_add_backward(float *dx, float *dy, const float *dout, const float *out_relu, size_t count);
void hn_save_backward(float *dx, const float *dout, const float *dskip, size_t count);

/*
 * dropout (inverted): mask[i] = 0 or 1/(1-p), drawn from sprite_rng seeded
 * by (seed, step) so a step's mask is reproducible; out = in * mask.
 */
void hn_dropout_mask(float *mask, size_t count, float p, uint64_t seed, uint64_t step);
void hn_dropout_forward(float *out, const float *in, const float *mask, size_t count);
void hn_dropout_backward(float *din, const float *dout, const float *mask, size_t count);

/*
 * batch normalisation (norm.c), in passes the backend joins over the batch:
 * sums: sum[c] += sum of x, sumsq[c] += sum of x^2 over n samples (double);
 * forward: out = gamma * (in - mean) * invstd + beta, per channel (then a
 *   following ReLU when relu, fused: one pass);
 * backward_sums: sdy[c] += sum of dout, sdyx[c] += sum of dout * xhat (these
 *   are dbeta and dgamma); backward: din from the batch means of those two
 *   sums, mdy = sdy / M and mdyx = sdyx / M (M = batch x H x W). With a
 *   fused ReLU, out_relu (its output) gates dout in both, as its backward
 *   would; else NULL.
 * Forward and backward may run in chunks once the batch's sums are known.
 */
void hn_batchnorm_sums(double *sum, double *sumsq, const float *in, int n,
		       const struct hn_layer *l);
void hn_batchnorm_forward(float *out, const float *in, const float *mean, const float *invstd,
			  const float *gamma, const float *beta, int n, const struct hn_layer *l,
			  int relu);
void hn_batchnorm_backward_sums(double *sdy, double *sdyx, const float *dout, const float *out_relu,
				const float *in, const float *mean, const float *invstd, int n,
				const struct hn_layer *l);
void hn_batchnorm_backward(float *din, const float *dout, const float *out_relu, const float *in,
			   const float *mean, const float *invstd, const float *gamma,
			   const float *mdy, const float *mdyx, int n, const struct hn_layer *l);

/* global average pooling (norm.c): out[s][c] = mean of in[s][c][.][.]. */
void hn_avgpool_forward(float *out, const float *in, int n, const struct hn_layer *l);
void hn_avgpool_backward(float *din, const float *dout, int n, const struct hn_layer *l);

/*
 * softmax cross-entropy, numerically stable (max subtracted, log-sum-exp).
 * forward: probs (n*k), returns the loss summed over the batch; *correct
 * gets the argmax hits. backward: dlogits = (probs - onehot) * scale.
 */
double hn_softmax_ce_forward(float *probs, const float *logits, const uint16_t *labels, int n,
			     int k, int *correct);
void hn_softmax_ce_backward(float *dlogits, const float *probs, const uint16_t *labels, int n,
			    int k, float scale);

/*
 * Optimizer update of nparams parameters (optim.c); t = step count after this
 * update. State: s1 = momentum's v or Adam's m, s2 = Adam's v (NULL if unused).
 * Zeroes grads.
 */
void hn_optim_update(const struct hn_optim *o, float *params, float *grads, float *s1, float *s2,
		     size_t nparams, float lr, uint64_t t);

#endif
