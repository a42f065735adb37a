/*
 * layers.c - the layers of the GPU plugin and the passes through them:
 * convolutions through cuDNN (descriptors, the choice of algorithms,
 * deterministic by default, cuda/algo.h, timed with --fast, and the one
 * workspace they share), dense layers through cuBLAS, each in fp32 or, with
 * --amp, fp16 on tensor cores; pooling, activations, dropout, batch
 * normalisation and the loss are kernels.cu's. A ReLU after a batchnorm or
 * an add runs inside their kernels, forward and backward (cu_plan_fusion);
 * under amp each conv keeps its 16-bit input from the forward for the
 * backward. Residual blocks: a save's output is its input's buffer
 * (act_at), the gradients have a slot each, the add is a kernel, and a
 * save's shortcut reader (the add, or a projection conv reading the save's
 * output) writes the gradient of X into the save's input slot, to which the
 * save's backward adds the main path's (its output slot's). At the end, the
 * check of a model description the plugin is handed (cu_check_model).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cuda/algo.h"
#include "cuda/cuda_int.h"
#include "trainer/model_check.h"

int cu_ws_reserve(struct hn_cuda *st, size_t need)
{
	if (need <= st->ws_bytes)
		return 0;
	CU(cudaStreamSynchronize(st->stream), st->err); /* the old workspace may be in use */
	if (st->ws) {
		CU(cudaFree(st->ws), st->err);
		st->ws = NULL;
		st->bytes -= st->ws_bytes;
		st->ws_bytes = 0;
	}
	TRY(cu_dev_alloc(st, &st->ws, need, "the convolution workspace"));
	st->ws_bytes = need;
	return 0;
}

/* First usable entry of an algorithm list: it ran (or would run) and its workspace is sane. */
/* hn_algo_pick over a cudnn*AlgoPerf_t array; deterministic unless --fast. */
#define PICK(st, perf, cnt)                                                                        \
	({                                                                                         \
		struct hn_algo_cand c_[16];                                                        \
		int n_ = (cnt) < 16 ? (cnt) : 16;                                                  \
		for (int k_ = 0; k_ < n_; k_++)                                                    \
			c_[k_] = (struct hn_algo_cand){                                            \
				.algo = (int)(perf)[k_].algo,                                      \
				.ok = (perf)[k_].status == CUDNN_STATUS_SUCCESS,                   \
				.memory = (perf)[k_].memory,                                       \
				.deterministic = (perf)[k_].determinism == CUDNN_DETERMINISTIC,    \
			};                                                                         \
		hn_algo_pick(c_, n_, HN_WS_LIMIT, !(st)->cfg.fast);                                \
	})

/*
 * Index into perf (N entries) of the algorithm to use for one direction of
 * a conv, or -1: find_fn times them when find is set (cudnnFind*), get_fn's
 * heuristic ranking (cudnnGet*_v7) is the fallback; PICK takes the first
 * usable one. The trailing arguments are the direction's descriptors.
 */
#define CHOOSE(st, find, perf, N, find_fn, get_fn, ...)                                            \
	({                                                                                         \
		int cnt_ = 0, i_ = -1;                                                             \
		if ((find) &&                                                                      \
		    find_fn((st)->dnn, __VA_ARGS__, N, &cnt_, perf) == CUDNN_STATUS_SUCCESS)       \
			i_ = PICK(st, perf, cnt_);                                                 \
		if (i_ < 0) {                                                                      \
			cnt_ = 0;                                                                  \
			DNN(get_fn((st)->dnn, __VA_ARGS__, N, &cnt_, perf), (st)->err);            \
			i_ = PICK(st, perf, cnt_);                                                 \
		}                                                                                  \
		i_;                                                                                \
	})

/* -EIO, err naming the direction (what) that has no algorithm we may use. */
static int no_algo(struct hn_cuda *st, const char *what)
{
	snprintf(st->err, sizeof(st->err), "gpu: cuDNN has no %s%s algorithm for a conv%s",
		 st->cfg.fast ? "" : "deterministic ", what,
		 st->cfg.fast ? "" : " (--fast allows the others)");
	return -EIO;
}

/*
 * Choose the three algorithms of one conv for the descriptors as they are
 * now: benchmarked (cudnnFind*) when find is set, with the heuristics
 * (Get*_v7) as fallback and for other batch sizes. The workspace grows to
 * the largest need. fp32 keeps FMA math (no TF32) unless --tf32; amp and
 * --tf32 adopt the math type the chosen algorithm was timed with.
 */
static int cu_conv_pick(struct hn_cuda *st, struct hn_conv *c, int find, int first_layer)
{
	const int tensor = st->amp || st->cfg.tf32;
	cudnnMathType_t want = tensor ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
	find = find && st->cfg.fast; /* timings differ run to run: only with --fast */
	int i;
	size_t need = 0, sz = 0;

	/* forward */
	cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	DNN(cudnnSetConvolutionMathType(c->cf, want), st->err);
	i = CHOOSE(st, find, pf, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
		   cudnnFindConvolutionForwardAlgorithm, cudnnGetConvolutionForwardAlgorithm_v7,
		   c->x, c->w, c->cf, c->y);
	if (i < 0)
		return no_algo(st, "forward");
	c->fa = pf[i].algo;
	if (tensor)
		DNN(cudnnSetConvolutionMathType(c->cf, pf[i].mathType), st->err);
	DNN(cudnnGetConvolutionForwardWorkspaceSize(st->dnn, c->x, c->w, c->cf, c->y, c->fa, &sz),
	    st->err);
	need = sz > need ? sz : need;

	/* backward filter */
	cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	DNN(cudnnSetConvolutionMathType(c->cw, want), st->err);
	i = CHOOSE(st, find, pw, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
		   cudnnFindConvolutionBackwardFilterAlgorithm,
		   cudnnGetConvolutionBackwardFilterAlgorithm_v7, c->x, c->y, c->cw, c->w);
	if (i < 0)
		return no_algo(st, "backward-filter");
	c->wa = pw[i].algo;
	if (tensor)
		DNN(cudnnSetConvolutionMathType(c->cw, pw[i].mathType), st->err);
	DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(st->dnn, c->x, c->y, c->cw, c->w, c->wa,
							   &sz),
	    st->err);
	need = sz > need ? sz : need;

	/* backward data: the first layer's input gradient is never needed */
	if (!first_layer) {
		cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
		DNN(cudnnSetConvolutionMathType(c->cd, want), st->err);
		i = CHOOSE(st, find, pd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
			   cudnnFindConvolutionBackwardDataAlgorithm,
			   cudnnGetConvolutionBackwardDataAlgorithm_v7, c->w, c->y, c->cd, c->x);
		if (i < 0)
			return no_algo(st, "backward-data");
		c->da = pd[i].algo;
		if (tensor)
			DNN(cudnnSetConvolutionMathType(c->cd, pd[i].mathType), st->err);
		DNN(cudnnGetConvolutionBackwardDataWorkspaceSize(st->dnn, c->w, c->y, c->cd, c->x,
								 c->da, &sz),
		    st->err);
		need = sz > need ? sz : need;
	}
	return cu_ws_reserve(st, need);
}

/* Make choice ch conv c's algorithms, with their math types on the descriptors. */
static int conv_use(struct hn_cuda *st, struct hn_conv *c, const struct hn_conv_choice *ch)
{
	c->fa = ch->fa;
	c->da = ch->da;
	c->wa = ch->wa;
	DNN(cudnnSetConvolutionMathType(c->cf, ch->fm), st->err);
	DNN(cudnnSetConvolutionMathType(c->cd, ch->dm), st->err);
	DNN(cudnnSetConvolutionMathType(c->cw, ch->wm), st->err);
	return 0;
}

/* What conv c uses now, as a choice for batch size n. */
static int conv_current(struct hn_cuda *st, const struct hn_conv *c, int n,
			struct hn_conv_choice *ch)
{
	*ch = (struct hn_conv_choice){.n = n, .fa = c->fa, .da = c->da, .wa = c->wa};
	DNN(cudnnGetConvolutionMathType(c->cf, &ch->fm), st->err);
	DNN(cudnnGetConvolutionMathType(c->cd, &ch->dm), st->err);
	DNN(cudnnGetConvolutionMathType(c->cw, &ch->wm), st->err);
	return 0;
}

/*
 * The workspace conv c's current algorithms need at the descriptors' batch
 * size in *need: 0, or -1 where cuDNN does not take one of them at that size.
 */
static int conv_ws_need(struct hn_cuda *st, const struct hn_conv *c, int first_layer, size_t *need)
{
	size_t sz = 0;
	*need = 0;
	if (cudnnGetConvolutionForwardWorkspaceSize(st->dnn, c->x, c->w, c->cf, c->y, c->fa, &sz) !=
	    CUDNN_STATUS_SUCCESS)
		return -1;
	*need = sz;
	if (cudnnGetConvolutionBackwardFilterWorkspaceSize(st->dnn, c->x, c->y, c->cw, c->w, c->wa,
							   &sz) != CUDNN_STATUS_SUCCESS)
		return -1;
	*need = sz > *need ? sz : *need;
	if (!first_layer) {
		if (cudnnGetConvolutionBackwardDataWorkspaceSize(
			    st->dnn, c->w, c->y, c->cd, c->x, c->da, &sz) != CUDNN_STATUS_SUCCESS)
			return -1;
		*need = sz > *need ? sz : *need;
	}
	return 0;
}

/*
 * Point every conv descriptor at batch size n and make sure the algorithms
 * suit it. The algorithms chosen at create for max_batch (find) serve every
 * batch size cuDNN takes them for; only where it refuses one are the
 * heuristics asked. Either way the choice is kept per batch size
 * (choice[]), because asking again is slow: about a second per new size
 * with fp16 and bf16 tensors, measured on an H200 with cuDNN 9.19, paid at
 * the last batch of every epoch and at the test split.
 */
int cu_conv_set_n(struct hn_cuda *st, int n, int find)
{
	if (n == st->cur_n)
		return 0;
	st->cur_n = 0; /* invalid until done */
	for (int i = 0; i < st->m.nlayers; i++) {
		const struct hn_layer *l = &st->m.layers[i];
		struct hn_conv *c = &st->conv[i];
		if (l->kind != HN_LAYER_CONV2D)
			continue;
		DNN(cudnnSetTensor4dDescriptor(c->x, CUDNN_TENSOR_NCHW, st->dt, n, l->in_c, l->in_h,
					       l->in_w),
		    st->err);
		DNN(cudnnSetTensor4dDescriptor(c->y, CUDNN_TENSOR_NCHW, st->dt, n, l->out_c,
					       l->out_h, l->out_w),
		    st->err);
		int on, oc, oh, ow;
		DNN(cudnnGetConvolution2dForwardOutputDim(c->cf, c->x, c->w, &on, &oc, &oh, &ow),
		    st->err);
		if (on != n || oc != l->out_c || oh != l->out_h || ow != l->out_w) {
			snprintf(st->err, sizeof(st->err),
				 "gpu: layer %d: cuDNN computes output %dx%dx%d, model says "
				 "%dx%dx%d",
				 i, oc, oh, ow, l->out_c, l->out_h, l->out_w);
			return -EINVAL;
		}
		if (find) {
			TRY(cu_conv_pick(st, c, 1, i == 0));
			TRY(conv_current(st, c, n, &c->choice[0]));
			continue;
		}
		int k = 0;
		while (k < HN_CONV_CHOICES && c->choice[k].n && c->choice[k].n != n)
			k++;
		if (k < HN_CONV_CHOICES && c->choice[k].n == n) {
			TRY(conv_use(st, c, &c->choice[k])); /* its workspace is reserved */
			continue;
		}
		size_t need;
		TRY(conv_use(st, c, &c->choice[0]));
		if (conv_ws_need(st, c, i == 0, &need) == 0)
			TRY(cu_ws_reserve(st, need));
		else
			TRY(cu_conv_pick(st, c, 0, i == 0));
		if (k < HN_CONV_CHOICES) /* else asked again next time */
			TRY(conv_current(st, c, n, &c->choice[k]));
	}
	st->cur_n = n;
	return 0;
}

int cu_conv_create(struct hn_cuda *st, int i)
{
	const struct hn_layer *l = &st->m.layers[i];
	struct hn_conv *c = &st->conv[i];
	DNN(cudnnCreateTensorDescriptor(&c->x), st->err);
	DNN(cudnnCreateTensorDescriptor(&c->y), st->err);
	DNN(cudnnCreateFilterDescriptor(&c->w), st->err);
	DNN(cudnnSetFilter4dDescriptor(c->w, st->dt, CUDNN_TENSOR_NCHW, l->out_c, l->in_c, l->k,
				       l->k),
	    st->err);
	cudnnConvolutionDescriptor_t *cds[3] = {&c->cf, &c->cd, &c->cw};
	for (int j = 0; j < 3; j++) {
		DNN(cudnnCreateConvolutionDescriptor(cds[j]), st->err);
		/* fp32 accumulation in both modes (fp16 data, fp32 compute under amp) */
		DNN(cudnnSetConvolution2dDescriptor(*cds[j], l->pad, l->pad, l->stride, l->stride,
						    1, 1, CUDNN_CROSS_CORRELATION,
						    CUDNN_DATA_FLOAT),
		    st->err);
	}
	return 0;
}

void cu_conv_destroy(struct hn_conv *c)
{
	if (c->x)
		cudnnDestroyTensorDescriptor(c->x);
	if (c->y)
		cudnnDestroyTensorDescriptor(c->y);
	if (c->w)
		cudnnDestroyFilterDescriptor(c->w);
	if (c->cf)
		cudnnDestroyConvolutionDescriptor(c->cf);
	if (c->cd)
		cudnnDestroyConvolutionDescriptor(c->cd);
	if (c->cw)
		cudnnDestroyConvolutionDescriptor(c->cw);
	memset(c, 0, sizeof(*c));
}

int cu_conv_forward(struct hn_cuda *st, int i, int n)
{
	const struct hn_layer *l = &st->m.layers[i];
	struct hn_conv *c = &st->conv[i];
	const float one = 1.0f, zero = 0.0f;
	float *x = cu_act(st, l->from ? l->from : i), *y = cu_act(st, i + 1);
	if (!st->amp) {
		DNN(cudnnConvolutionForward(st->dnn, &one, c->x, x, c->w, st->params + l->w_off,
					    c->cf, c->fa, st->ws, st->ws_bytes, &zero, c->y, y),
		    st->err);
	} else {
		void *x16 = cu_half_at(st, st->cx16_off[i]);
		void *y16 = cu_half_at(st, st->half_out[i] ? st->co16_off[i] : st->y16_off);
		CU(hn_k_f32_to_half(x, x16, (size_t)n * cu_layer_in(l), cu_bf16(st), st->stream),
		   st->err);
		DNN(cudnnConvolutionForward(st->dnn, &one, c->x, x16, c->w, cu_w16(st, l->w_off),
					    c->cf, c->fa, st->ws, st->ws_bytes, &zero, c->y, y16),
		    st->err);
		if (!st->half_out[i]) /* else the batchnorm reads y16 */
			CU(hn_k_half_to_f32(y16, y, (size_t)n * cu_layer_out(l), cu_bf16(st),
					    st->stream),
			   st->err);
	}
	if (l->b_len)
		CU(hn_k_bias_add(y, st->params + l->b_off, n, l->out_c, l->out_h * l->out_w,
				 st->stream),
		   st->err);
	return 0;
}

int cu_conv_backward(struct hn_cuda *st, int i, int n)
{
	const struct hn_layer *l = &st->m.layers[i];
	struct hn_conv *c = &st->conv[i];
	const float one = 1.0f, zero = 0.0f;
	/*
	 * A projection (from: a save's output slot) reads the block's input X and
	 * gives its gradient to the save's input slot, which the save's backward
	 * then adds the main path's gradient to (cu_backward).
	 */
	float *x = cu_act(st, l->from ? l->from : i), *dy = cu_dact(st, i + 1);
	float *dx = cu_dact(st, l->from ? l->from - 1 : i);
	const int want_dx = i > 0 || l->from;
	if (l->b_len)
		CU(hn_k_bias_grad(dy, st->grads + l->b_off, n, l->out_c, l->out_h * l->out_w,
				  st->chan_scratch, st->stream),
		   st->err);
	if (!st->amp) {
		DNN(cudnnConvolutionBackwardFilter(st->dnn, &one, c->x, x, c->y, dy, c->cw, c->wa,
						   st->ws, st->ws_bytes, &one, c->w,
						   st->grads + l->w_off),
		    st->err);
		if (want_dx)
			DNN(cudnnConvolutionBackwardData(st->dnn, &one, c->w, st->params + l->w_off,
							 c->y, dy, c->cd, c->da, st->ws,
							 st->ws_bytes, &zero, c->x, dx),
			    st->err);
		return 0;
	}
	/* x16: the input as the forward cast it (x is still what it read) */
	void *x16 = cu_half_at(st, st->cx16_off[i]), *dy16 = cu_half_at(st, st->y16_off);
	void *dx16 = cu_half_at(st, st->dx16_off), *dw16 = cu_half_at(st, st->w16_off);
	if (!st->half_out[i]) /* else the batchnorm's backward wrote dy16 */
		CU(hn_k_f32_to_half(dy, dy16, (size_t)n * cu_layer_out(l), cu_bf16(st), st->stream),
		   st->err);
	DNN(cudnnConvolutionBackwardFilter(st->dnn, &one, c->x, x16, c->y, dy16, c->cw, c->wa,
					   st->ws, st->ws_bytes, &zero, c->w, dw16),
	    st->err);
	CU(hn_k_half_accumulate(dw16, st->grads + l->w_off, l->w_len, cu_bf16(st), st->stream),
	   st->err);
	if (want_dx) {
		DNN(cudnnConvolutionBackwardData(st->dnn, &one, c->w, cu_w16(st, l->w_off), c->y,
						 dy16, c->cd, c->da, st->ws, st->ws_bytes, &zero,
						 c->x, dx16),
		    st->err);
		CU(hn_k_half_to_f32(dx16, dx, (size_t)n * cu_layer_in(l), cu_bf16(st), st->stream),
		   st->err);
	}
	return 0;
}

/* ---- dense layers (cuBLAS) ---- */

/*
 * cuBLAS is column-major. Row-major X[n][in] is the column-major in x n
 * matrix X^T (ld in); W[out][in] is W^T (in x out, ld in); Y[n][out] is
 * Y^T (out x n, ld out). So:
 *   forward  Y^T  = W X^T       : gemm(T, N, out, n, in,  W, in, X, in,  Y, out)
 *   dX       dX^T = W^T dY^T    : gemm(N, N, in, n, out,  W, in, dY, out, dX, in)
 *   dW       dW^T = X^T dY      : gemm(N, T, in, out, n,  X, in, dY, out, dW, in), beta 1
 */
static int dense_gemm(struct hn_cuda *st, cublasOperation_t ta, cublasOperation_t tb, int mm,
		      int nn, int kk, const void *a, int lda, const void *b, int ldb, float beta,
		      float *cmat, int ldc)
{
	const float one = 1.0f;
	if (!st->amp)
		BLAS(cublasSgemm(st->blas, ta, tb, mm, nn, kk, &one, a, lda, b, ldb, &beta, cmat,
				 ldc),
		     st->err);
	else
		BLAS(cublasGemmEx(st->blas, ta, tb, mm, nn, kk, &one, a, st->ht, lda, b, st->ht,
				  ldb, &beta, cmat, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
				  CUBLAS_GEMM_DEFAULT),
		     st->err);
	return 0;
}

static int dense_forward(struct hn_cuda *st, int i, int n)
{
	const struct hn_layer *l = &st->m.layers[i];
	int in = (int)cu_layer_in(l), out = (int)cu_layer_out(l);
	float *x = cu_act(st, i), *y = cu_act(st, i + 1);
	if (!st->amp) {
		TRY(dense_gemm(st, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, st->params + l->w_off, in,
			       x, in, 0.0f, y, out));
	} else {
		void *x16 = cu_half_at(st, st->x16_off);
		CU(hn_k_f32_to_half(x, x16, (size_t)n * in, cu_bf16(st), st->stream), st->err);
		TRY(dense_gemm(st, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, cu_w16(st, l->w_off), in,
			       x16, in, 0.0f, y, out));
	}
	if (l->b_len)
		CU(hn_k_bias_add(y, st->params + l->b_off, n, out, 1, st->stream), st->err);
	return 0;
}

static int dense_backward(struct hn_cuda *st, int i, int n)
{
	const struct hn_layer *l = &st->m.layers[i];
	int in = (int)cu_layer_in(l), out = (int)cu_layer_out(l);
	float *x = cu_act(st, i), *dy = cu_dact(st, i + 1), *dx = cu_dact(st, i);
	if (l->b_len)
		CU(hn_k_bias_grad(dy, st->grads + l->b_off, n, out, 1, st->chan_scratch,
				  st->stream),
		   st->err);
	const void *xa = x, *dya = dy, *wa = st->params + l->w_off;
	if (st->amp) {
		void *x16 = cu_half_at(st, st->x16_off), *dy16 = cu_half_at(st, st->y16_off);
		CU(hn_k_f32_to_half(x, x16, (size_t)n * in, cu_bf16(st), st->stream), st->err);
		CU(hn_k_f32_to_half(dy, dy16, (size_t)n * out, cu_bf16(st), st->stream), st->err);
		xa = x16;
		dya = dy16;
		wa = cu_w16(st, l->w_off);
	}
	TRY(dense_gemm(st, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, xa, in, dya, out, 1.0f,
		       st->grads + l->w_off, in));
	if (i > 0)
		TRY(dense_gemm(st, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, wa, in, dya, out, 0.0f, dx,
			       in));
	return 0;
}

/* Batchnorm layer i's input: the conv before it's 16-bit output (half_out), else its slot. */
static const void *bn_input(struct hn_cuda *st, int i, int *xt)
{
	if (i > 0 && st->half_out[i - 1]) {
		*xt = cu_bf16(st) ? HN_K_X_BF16 : HN_K_X_F16;
		return cu_half_at(st, st->co16_off[i - 1]);
	}
	*xt = HN_K_X_F32;
	return cu_act(st, i);
}

/* Slot s is read by a layer other than layer s (a projection's from, an add's shortcut). */
static int slot_read_elsewhere(const struct hn_model *m, int s)
{
	for (int j = 0; j < m->nlayers; j++)
		if (m->layers[j].from == s ||
		    (m->layers[j].kind == HN_LAYER_ADD && m->layers[j].shortcut == s))
			return 1;
	return 0;
}

void cu_plan_fusion(struct hn_cuda *st)
{
	const struct hn_model *m = &st->m;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		st->relu_fused[i] = 0;
		if ((l->kind != HN_LAYER_BATCHNORM && l->kind != HN_LAYER_ADD) ||
		    i + 1 >= m->nlayers || m->layers[i + 1].kind != HN_LAYER_RELU)
			continue;
		st->relu_fused[i] = !slot_read_elsewhere(m, i + 1);
	}
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		st->half_out[i] = st->amp && l->kind == HN_LAYER_CONV2D && !l->b_len &&
				  i + 1 < m->nlayers &&
				  m->layers[i + 1].kind == HN_LAYER_BATCHNORM &&
				  !slot_read_elsewhere(m, i + 1);
	}
}

int cu_forward(struct hn_cuda *st, int n, int train, uint64_t step)
{
	for (int i = 0; i < st->m.nlayers; i++) {
		const struct hn_layer *l = &st->m.layers[i];
		float *x = cu_act(st, i), *y = cu_act(st, i + 1);
		size_t cnt = (size_t)n * cu_layer_out(l);
		if (train)
			TRY(cu_lprof_mark(st, 0, i));
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			TRY(cu_conv_forward(st, i, n));
			break;
		case HN_LAYER_DENSE:
			TRY(dense_forward(st, i, n));
			break;
		case HN_LAYER_MAXPOOL:
			CU(hn_k_maxpool_fwd(x, y, train ? cu_pool_idx(st, i) : NULL, n, l->in_c,
					    l->in_h, l->in_w, l->out_h, l->out_w, l->k, l->stride,
					    l->pad, st->stream),
			   st->err);
			break;
		case HN_LAYER_RELU:
			CU(hn_k_relu_fwd(x, y, cnt, st->stream), st->err);
			break;
		case HN_LAYER_DROPOUT:
			if (train && l->p > 0.0f)
				CU(hn_k_dropout_fwd(x, y, cnt, l->p, st->cfg.seed, step, i,
						    st->stream),
				   st->err);
			else
				CU(cudaMemcpyAsync(y, x, cnt * sizeof(float),
						   cudaMemcpyDeviceToDevice, st->stream),
				   st->err);
			break;
		case HN_LAYER_BATCHNORM: {
			const int C = l->in_c, hw = l->in_h * l->in_w;
			float *mean = cu_bn(st, i, 0), *invstd = cu_bn(st, i, 1);
			int xt;
			const void *bx = bn_input(st, i, &xt);
			if (train) /* the batch's statistics, and their share of the running ones */
				CU(hn_k_bn_stats(bx, xt, n, C, hw, mean, invstd,
						 st->grads + l->s_off, st->step_scale, cu_amp(st),
						 st->chan_scratch, st->stream),
				   st->err);
			else
				CU(hn_k_bn_running(st->params + l->s_off, C, mean, invstd,
						   st->stream),
				   st->err);
			const int fuse = st->relu_fused[i];
			CU(hn_k_bn_apply(bx, xt, fuse ? cu_act(st, i + 2) : y, n, C, hw, mean,
					 invstd, st->params + l->w_off, st->params + l->b_off, fuse,
					 st->stream),
			   st->err);
			if (fuse && train) /* the ReLU's share of the profile is in this one */
				TRY(cu_lprof_mark(st, 0, i + 1));
			i += fuse;
			break;
		}
		case HN_LAYER_AVGPOOL:
			CU(hn_k_avgpool_fwd(x, y, (size_t)n * l->in_c, l->in_h * l->in_w,
					    st->stream),
			   st->err);
			break;
		case HN_LAYER_SAVE: /* nothing: its output is its input (act_at) */
			break;
		case HN_LAYER_ADD: {
			const int fuse = st->relu_fused[i];
			CU(hn_k_add(x, cu_act(st, l->shortcut), fuse ? cu_act(st, i + 2) : y, cnt,
				    fuse, st->stream),
			   st->err);
			if (fuse && train)
				TRY(cu_lprof_mark(st, 0, i + 1));
			i += fuse;
			break;
		}
		}
	}
	return train ? cu_lprof_mark(st, 0, st->m.nlayers) : 0;
}

int cu_backward(struct hn_cuda *st, int n, uint64_t step)
{
	for (int i = st->m.nlayers - 1; i >= 0; i--) {
		const struct hn_layer *l = &st->m.layers[i];
		float *y = cu_act(st, i + 1);
		float *dy = cu_dact(st, i + 1), *dx = cu_dact(st, i);
		size_t cnt = (size_t)n * cu_layer_out(l);
		TRY(cu_lprof_mark(st, 1, i + 1));
		if (l->kind == HN_LAYER_RELU && i > 0 && st->relu_fused[i - 1])
			continue; /* in the backward of the layer it is fused into */
		/* a fused ReLU: its output masks its gradient, read in its place */
		const float *ry = NULL;
		if (st->relu_fused[i]) {
			ry = cu_act(st, i + 2);
			dy = cu_dact(st, i + 2);
		}
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			TRY(cu_conv_backward(st, i, n));
			break;
		case HN_LAYER_DENSE:
			TRY(dense_backward(st, i, n));
			break;
		case HN_LAYER_MAXPOOL:
			if (i > 0)
				CU(hn_k_maxpool_bwd(cu_pool_idx(st, i), dy, dx, n, l->in_c, l->in_h,
						    l->in_w, l->out_h, l->out_w, l->k, l->stride,
						    l->pad, st->stream),
				   st->err);
			break;
		case HN_LAYER_RELU:
			if (i > 0)
				CU(hn_k_relu_bwd(y, dy, dx, cnt, st->stream), st->err);
			break;
		case HN_LAYER_DROPOUT:
			if (i == 0)
				break;
			if (l->p > 0.0f)
				CU(hn_k_dropout_bwd(dy, dx, cnt, l->p, st->cfg.seed, step, i,
						    st->stream),
				   st->err);
			else
				CU(cudaMemcpyAsync(dx, dy, cnt * sizeof(float),
						   cudaMemcpyDeviceToDevice, st->stream),
				   st->err);
			break;
		case HN_LAYER_BATCHNORM: {
			const int C = l->in_c, hw = l->in_h * l->in_w;
			float *mean = cu_bn(st, i, 0), *invstd = cu_bn(st, i, 1);
			float *mdy = cu_bn(st, i, 2), *mdyx = cu_bn(st, i, 3);
			int xt;
			const void *bx = bn_input(st, i, &xt);
			CU(hn_k_bn_bwd_sums(dy, bx, xt, ry, n, C, hw, mean, invstd,
					    st->grads + l->w_off, st->grads + l->b_off, mdy, mdyx,
					    st->chan_scratch, st->stream),
			   st->err);
			/* to a half_out conv: its dy16, as its backward would have cast it */
			void *bdx = xt == HN_K_X_F32 ? (void *)dx : cu_half_at(st, st->y16_off);
			if (i > 0)
				CU(hn_k_bn_bwd(dy, bx, xt, ry, bdx, n, C, hw, mean, invstd,
					       st->params + l->w_off, mdy, mdyx, st->stream),
				   st->err);
			break;
		}
		case HN_LAYER_AVGPOOL:
			if (i > 0)
				CU(hn_k_avgpool_bwd(dy, dx, (size_t)n * l->in_c, l->in_h * l->in_w,
						    st->stream),
				   st->err);
			break;
		case HN_LAYER_SAVE: /* the skip reader wrote dx already: add the main path's */
			CU(hn_k_add(dx, dy, dx, cnt, 0, st->stream), st->err);
			break;
		case HN_LAYER_ADD: {
			/* a save's output: to the save's input slot (see the save); else the slot
			 */
			int j = l->shortcut;
			float *ds =
				cu_dact(st, st->m.layers[j - 1].kind == HN_LAYER_SAVE ? j - 1 : j);
			if (ry) { /* the fused ReLU's backward, into both */
				CU(hn_k_relu_bwd2(ry, dy, dx, ds, cnt, st->stream), st->err);
				break;
			}
			CU(cudaMemcpyAsync(ds, dy, cnt * sizeof(float), cudaMemcpyDeviceToDevice,
					   st->stream),
			   st->err);
			CU(cudaMemcpyAsync(dx, dy, cnt * sizeof(float), cudaMemcpyDeviceToDevice,
					   st->stream),
			   st->err);
			break;
		}
		}
	}
	TRY(cu_lprof_mark(st, 1, 0));
	return cu_lprof_collect(st);
}

/* ---- model checks ---- */

/*
 * The shared check (trainer/model_check.c) trusts nothing in m; on top of it,
 * what this backend's libraries take (cuBLAS's int dimensions for the dense
 * products) and what its residual wiring assumes (no save right after a save).
 */
int cu_check_model(const struct hn_model *m, char *err)
{
	int r = hn_model_check(m, err);
	if (r < 0)
		return r;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		/*
		 * A save's shortcut gradient goes to the save's input slot, which
		 * must have no other reader than the save: not a save's output.
		 */
		if (l->kind == HN_LAYER_SAVE && i > 0 && m->layers[i - 1].kind == HN_LAYER_SAVE) {
			snprintf(err, HN_ERR_MAX,
				 "gpu: layer %d: a shortcut save right after another is not "
				 "supported by the gpu backend",
				 i);
			return -ENOTSUP;
		}
		if (l->kind == HN_LAYER_DENSE &&
		    (cu_layer_in(l) > INT32_MAX || cu_layer_out(l) > INT32_MAX)) {
			snprintf(err, HN_ERR_MAX, "gpu: layer %d: dense layer too wide for cuBLAS",
				 i);
			return -EINVAL;
		}
	}
	return 0;
}
