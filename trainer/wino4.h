/*
 * wino4.h - Winograd F(4x4, 3x3) (wino4.c), which wino.c's hn_wino_* hand a
 * layer to when hn_wino4_pays: same arguments and contracts as those
 * (trainer/layers.h), with 36 frequencies instead of 16.
 */
#ifndef HN_WINO4_H
#define HN_WINO4_H

#include <stddef.h>

#include "trainer/layers.h"

/* The NF sgemms of one Winograd step, C[xi] = op(A[xi]) op(B[xi]) (+ C[xi]
 * when beta is 1), xi < NF: 16 for F(2x2), 36 for F(4x4) (wino.c). */
void hn_wino_gemms(int nf, int ta, int tb, int m, int nn, int k, const float *A, size_t sa, int lda,
		   const float *B, size_t sb, int ldb, float beta, float *Cm, size_t sc);

int hn_wino4_pays(const struct hn_layer *l);
size_t hn_wino4_v_floats(const struct hn_layer *l, int n);
size_t hn_wino4_u_floats(const struct hn_layer *l);
size_t hn_wino4_ws_floats(const struct hn_layer *l, int n);
void hn_wino4_filters(float *U, const float *w, const struct hn_layer *l, int oc0, int oc1);
void hn_wino4_dfilters(float *dw, const float *dU, const struct hn_layer *l);
void hn_wino4_forward(float *out, float *V, float *ws, const float *in, const float *U,
		      const float *b, int n, const struct hn_layer *l, int relu);
void hn_wino4_backward(float *din, float *dU, float *db, float *V, float *ws, const float *dout,
		       const float *out_relu, const float *in, const float *U, int n,
		       const struct hn_layer *l, int v_valid);

#endif
