/*
 * kernels.cu - the kernels of the layers of the GPU backend (see kernels.h
 * for the contracts): input tiles to floats, bias, relu, maxpool, the
 * residual add, dropout, the softmax cross-entropy, batch normalisation and
 * global average pooling. The kernels of the training step (the amp loss
 * scale, the optimizers, mixed precision, the sum across ranks) are in
 * kernels_step.cu; what both use is in kernels_int.cuh.
 *
 * Kept deliberately plain: grid-stride loops over 64-bit indices, one
 * thread per output element, fixed 256-thread blocks, no atomics where a
 * deterministic gather is cheap. Convolutions and matrix products are not
 * here; they go to cuDNN and cuBLAS.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda/kernels.h"
#include "cuda/kernels_int.cuh"

/* ---- input ---- */

__global__ void k_tiles_to_chw(const uint8_t *tiles, float *x, size_t total, int h, int w, int c,
			       struct hn_k_norm norm)
{
	GRID_LOOP(i, total)
	{
		/* i indexes the output NCHW */
		size_t hw = (size_t)h * w;
		size_t chw = hw * c;
		size_t img = i / chw;
		size_t r = i % chw;
		size_t ch = r / hw;
		size_t p = r % hw; /* y * w + x */
		float v = (float)tiles[img * chw + p * c + ch] * (1.0f / 255.0f);
		if (norm.on && ch < 4)
			v = (v - norm.mean[ch]) * norm.inv[ch];
		x[i] = v;
	}
}

extern "C" cudaError_t hn_k_tiles_to_chw(const uint8_t *tiles, float *x, int n, int h, int w, int c,
					 struct hn_k_norm norm, cudaStream_t s)
{
	size_t total = (size_t)n * h * w * c;
	if (total == 0)
		return cudaSuccess;
	k_tiles_to_chw<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(tiles, x, total, h, w, c, norm);
	return cudaGetLastError();
}

/* ---- bias ---- */

__global__ void k_bias_add(float *y, const float *b, size_t total, int c, int hw)
{
	GRID_LOOP(i, total)
	{
		int ch = (int)((i / (size_t)hw) % (size_t)c);
		y[i] += b[ch];
	}
}

extern "C" cudaError_t hn_k_bias_add(float *y, const float *b, int n, int c, int hw, cudaStream_t s)
{
	size_t total = (size_t)n * c * hw;
	if (total == 0)
		return cudaSuccess;
	k_bias_add<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(y, b, total, c, hw);
	return cudaGetLastError();
}

/*
 * ---- per-channel sums over a batch (bias and batchnorm gradients, batch statistics) ----
 *
 * Block (ch, q) of k_chan_part sums channel ch over the images
 * [n*q/parts, n*(q+1)/parts): each thread a fixed set of elements in order,
 * then a fixed tree over the block; a finishing kernel adds a channel's parts
 * in order q = 0, 1, ... So the sums are deterministic, and parts (from n
 * and hw alone, chan_parts) spreads a large batch over the whole GPU: one
 * block per channel left the first conv's bias gradient of the cnn at batch
 * 512 on 32 blocks, 37% of the step's kernel time.
 */

enum { CH_BIAS, CH_BN_STATS, CH_BN_BWD };

static int chan_parts(int n, int hw)
{
	size_t p = (size_t)n * (size_t)hw / 16384; /* about 16k elements per block and more */
	if (p < 1)
		p = 1;
	if (p > HN_K_CHAN_PARTS)
		p = HN_K_CHAN_PARTS;
	if (p > (size_t)n)
		p = (size_t)n;
	return (int)p;
}

/* f(index) for each element of channel ch of images [i0, i1), this thread's share, in order. */
template <typename F> __device__ void chan_each(int i0, int i1, int c, int ch, int hw, F f)
{
	if (hw >= 32) {
		for (int img = i0; img < i1; img++) {
			size_t base = ((size_t)img * c + ch) * (size_t)hw;
			for (int p = threadIdx.x; p < hw; p += blockDim.x)
				f(base + (size_t)p);
		}
	} else { /* few positions per image: spread the images over the threads */
		unsigned cnt = (unsigned)(i1 - i0) * (unsigned)hw; /* < 32 * 2^24 */
		for (unsigned j = threadIdx.x; j < cnt; j += blockDim.x) {
			unsigned img = j / (unsigned)hw, p = j % (unsigned)hw;
			f(((size_t)(i0 + (int)img) * c + ch) * (size_t)hw + p);
		}
	}
}

/* part[0] = the sum of part[0..HN_K_THREADS) in a fixed tree (all threads call it). */
__device__ void block_sum2(double *a, double *b)
{
	__syncthreads();
	for (int stride = HN_K_THREADS / 2; stride > 0; stride >>= 1) {
		if ((int)threadIdx.x < stride) {
			a[threadIdx.x] += a[threadIdx.x + stride];
			b[threadIdx.x] += b[threadIdx.x + stride];
		}
		__syncthreads();
	}
}

/*
 * out[(ch * parts + q) * 2 + {0, 1}]: CH_BIAS sum a; CH_BN_STATS sum a and
 * a^2; CH_BN_BWD sum a (dy) and a * xhat (b = x, normalised with mean and
 * invstd).
 */
__global__ void k_chan_part(int mode, const float *a, const float *b, int n, int c, int hw,
			    int parts, const float *mean, const float *invstd, double *out)
{
	__shared__ double sa[HN_K_THREADS], sb[HN_K_THREADS];
	int ch = blockIdx.x, q = blockIdx.y;
	int i0 = (int)((long long)n * q / parts), i1 = (int)((long long)n * (q + 1) / parts);
	double ta = 0, tb = 0;
	if (mode == CH_BIAS) {
		float fa = 0.0f;
		chan_each(i0, i1, c, ch, hw, [&](size_t at) { fa += a[at]; });
		ta = fa;
	} else if (mode == CH_BN_STATS) {
		chan_each(i0, i1, c, ch, hw, [&](size_t at) {
			double v = a[at];
			ta += v;
			tb += v * v;
		});
	} else {
		float mu = mean[ch], is = invstd[ch];
		chan_each(i0, i1, c, ch, hw, [&](size_t at) {
			float g = a[at];
			ta += g;
			tb += (double)g * ((b[at] - mu) * is);
		});
	}
	sa[threadIdx.x] = ta;
	sb[threadIdx.x] = tb;
	block_sum2(sa, sb);
	if (threadIdx.x == 0) {
		out[((size_t)ch * parts + q) * 2] = sa[0];
		out[((size_t)ch * parts + q) * 2 + 1] = sb[0];
	}
}

/* Channel ch's two sums: its parts added in order. */
__device__ void chan_total(const double *part, int ch, int parts, double *a, double *b)
{
	double ta = 0, tb = 0;
	for (int q = 0; q < parts; q++) {
		ta += part[((size_t)ch * parts + q) * 2];
		tb += part[((size_t)ch * parts + q) * 2 + 1];
	}
	*a = ta;
	*b = tb;
}

static cudaError_t chan_sums(int mode, const float *a, const float *b, int n, int c, int hw,
			     const float *mean, const float *invstd, double *scratch, int *parts,
			     cudaStream_t s)
{
	*parts = chan_parts(n, hw);
	dim3 grid((unsigned)c, (unsigned)*parts);
	k_chan_part<<<grid, HN_K_THREADS, 0, s>>>(mode, a, b, n, c, hw, *parts, mean, invstd,
						  scratch);
	return cudaGetLastError();
}

__global__ void k_bias_fin(const double *part, int c, int parts, float *db)
{
	GRID_LOOP(ch, (size_t)c)
	{
		double a, b;
		chan_total(part, (int)ch, parts, &a, &b);
		db[ch] += (float)a;
	}
}

extern "C" cudaError_t hn_k_bias_grad(const float *dy, float *db, int n, int c, int hw,
				      double *scratch, cudaStream_t s)
{
	if (c <= 0 || n <= 0 || hw <= 0)
		return cudaSuccess;
	int parts;
	cudaError_t e = chan_sums(CH_BIAS, dy, NULL, n, c, hw, NULL, NULL, scratch, &parts, s);
	if (e != cudaSuccess)
		return e;
	k_bias_fin<<<hn_blocks((size_t)c), HN_K_THREADS, 0, s>>>(scratch, c, parts, db);
	return cudaGetLastError();
}

/* ---- relu ---- */

__global__ void k_relu_fwd(const float *x, float *y, size_t count)
{
	GRID_LOOP(i, count)
	{
		float v = x[i];
		y[i] = v > 0.0f ? v : 0.0f;
	}
}

__global__ void k_relu_bwd(const float *y, const float *dy, float *dx, size_t count)
{
	GRID_LOOP(i, count)
	{
		dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
	}
}

extern "C" cudaError_t hn_k_relu_fwd(const float *x, float *y, size_t count, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_relu_fwd<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(x, y, count);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_relu_bwd(const float *y, const float *dy, float *dx, size_t count,
				     cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_relu_bwd<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(y, dy, dx, count);
	return cudaGetLastError();
}

/* ---- maxpool ---- */

/*
 * Offset (within the channel plane) of the first maximum of output cell (oy, ox);
 * the window starts pad rows and columns before oy * stride, ox * stride, and
 * its padding never wins (2 * pad <= k leaves a cell of the plane in it).
 */
__device__ static int pool_argmax(const float *plane, int ih, int iw, int oy, int ox, int k,
				  int stride, int pad)
{
	int y0 = oy * stride - pad, x0 = ox * stride - pad;
	int ys = y0 > 0 ? y0 : 0, xs = x0 > 0 ? x0 : 0;
	int best = ys * iw + xs;
	float bv = plane[best];
	for (int dy = ys - y0; dy < k; dy++) {
		int yy = y0 + dy;
		if (yy >= ih)
			break;
		for (int dx = xs - x0; dx < k; dx++) {
			int xx = x0 + dx;
			if (xx >= iw)
				break;
			float v = plane[yy * iw + xx];
			if (v > bv) {
				bv = v;
				best = yy * iw + xx;
			}
		}
	}
	return best;
}

__global__ void k_maxpool_fwd(const float *x, float *y, int *idx, size_t total, int ih, int iw,
			      int oh, int ow, int k, int stride, int pad)
{
	GRID_LOOP(i, total)
	{
		size_t plane = i / ((size_t)oh * ow);
		int r = (int)(i % ((size_t)oh * ow));
		int oy = r / ow, ox = r % ow;
		const float *xp = x + plane * (size_t)ih * iw;
		int a = pool_argmax(xp, ih, iw, oy, ox, k, stride, pad);
		y[i] = xp[a];
		if (idx)
			idx[i] = a;
	}
}

__global__ void k_maxpool_bwd(const int *idx, const float *dy, float *dx, size_t total, int ih,
			      int iw, int oh, int ow, int k, int stride, int pad)
{
	GRID_LOOP(i, total)
	{
		size_t plane = i / ((size_t)ih * iw);
		int r = (int)(i % ((size_t)ih * iw));
		int yy = r / iw, xx = r % iw;
		const int *ip = idx + plane * (size_t)oh * ow;
		const float *dyp = dy + plane * (size_t)oh * ow;
		/* output cells whose window holds (yy, xx): o*stride <= yy + pad < o*stride + k */
		int py = yy + pad, px = xx + pad;
		int oy0 = py - k + 1 > 0 ? (py - k + 1 + stride - 1) / stride : 0;
		int oy1 = py / stride;
		int ox0 = px - k + 1 > 0 ? (px - k + 1 + stride - 1) / stride : 0;
		int ox1 = px / stride;
		if (oy1 > oh - 1)
			oy1 = oh - 1;
		if (ox1 > ow - 1)
			ox1 = ow - 1;
		float acc = 0.0f;
		for (int oy = oy0; oy <= oy1; oy++)
			for (int ox = ox0; ox <= ox1; ox++)
				if (ip[oy * ow + ox] == r)
					acc += dyp[oy * ow + ox];
		dx[i] = acc;
	}
}

extern "C" cudaError_t hn_k_maxpool_fwd(const float *x, float *y, int *idx, int n, int c, int ih,
					int iw, int oh, int ow, int k, int stride, int pad,
					cudaStream_t s)
{
	size_t total = (size_t)n * c * oh * ow;
	if (total == 0)
		return cudaSuccess;
	k_maxpool_fwd<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(x, y, idx, total, ih, iw, oh, ow, k,
								stride, pad);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_maxpool_bwd(const int *idx, const float *dy, float *dx, int n, int c,
					int ih, int iw, int oh, int ow, int k, int stride, int pad,
					cudaStream_t s)
{
	size_t total = (size_t)n * c * ih * iw;
	if (total == 0)
		return cudaSuccess;
	k_maxpool_bwd<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(idx, dy, dx, total, ih, iw, oh, ow,
								k, stride, pad);
	return cudaGetLastError();
}

/* ---- residual blocks ---- */

__global__ void k_add(const float *a, const float *b, float *y, size_t count)
{
	GRID_LOOP(i, count)
	y[i] = a[i] + b[i];
}

extern "C" cudaError_t hn_k_add(const float *a, const float *b, float *y, size_t count,
				cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_add<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(a, b, y, count);
	return cudaGetLastError();
}

/* ---- dropout ---- */

__device__ static uint64_t mix64(uint64_t z)
{
	/* splitmix64 finaliser */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

__device__ static float keep_scale(uint64_t key, size_t i, float p, float scale)
{
	uint64_t h = mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ULL);
	float u = (float)(h >> 40) * (1.0f / 16777216.0f); /* 24 bits -> [0, 1) */
	return u >= p ? scale : 0.0f;
}

static uint64_t dropout_key(uint64_t seed, uint64_t step, int layer)
{
	/* host-side: one key per (seed, step, layer); elements hashed from it in the kernel */
	uint64_t z = seed ^ 0x6a09e667f3bcc909ULL;
	z += step * 0x9e3779b97f4a7c15ULL;
	z ^= (uint64_t)(unsigned)layer << 48;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

__global__ void k_dropout(const float *in, float *out, size_t count, float p, float scale,
			  uint64_t key)
{
	GRID_LOOP(i, count)
	{
		out[i] = in[i] * keep_scale(key, i, p, scale);
	}
}

static cudaError_t dropout_launch(const float *in, float *out, size_t count, float p, uint64_t seed,
				  uint64_t step, int layer, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	/* p >= 1 drops everything: keep_scale never keeps (u < 1 <= p), scale unused */
	float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
	k_dropout<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(in, out, count, p, scale,
							    dropout_key(seed, step, layer));
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_dropout_fwd(const float *x, float *y, size_t count, float p,
					uint64_t seed, uint64_t step, int layer, cudaStream_t s)
{
	return dropout_launch(x, y, count, p, seed, step, layer, s);
}

extern "C" cudaError_t hn_k_dropout_bwd(const float *dy, float *dx, size_t count, float p,
					uint64_t seed, uint64_t step, int layer, cudaStream_t s)
{
	return dropout_launch(dy, dx, count, p, seed, step, layer, s);
}

/* ---- softmax cross-entropy ---- */

__global__ void k_softmax_xent(const float *logits, const uint16_t *labels, int n, int classes,
			       float grad_scale, const struct hn_k_amp *amp, float *dlogits,
			       float *loss_tmp, int *correct_tmp, int *bad)
{
	if (amp)
		grad_scale *= amp->scale; /* a power of 2: exact */
	GRID_LOOP(ii, (size_t)n)
	{
		int i = (int)ii;
		const float *z = logits + (size_t)i * classes;
		int label = labels[i];
		float mx = z[0];
		int arg = 0;
		for (int j = 1; j < classes; j++)
			if (z[j] > mx) {
				mx = z[j];
				arg = j;
			}
		double sum = 0.0;
		for (int j = 0; j < classes; j++)
			sum += exp((double)(z[j] - mx));
		double lse = (double)mx + log(sum);
		if (label >= classes) {
			*bad = 1;
			loss_tmp[i] = 0.0f;
			correct_tmp[i] = 0;
		} else {
			loss_tmp[i] = (float)(lse - (double)z[label]);
			correct_tmp[i] = arg == label;
		}
		if (dlogits) {
			float *d = dlogits + (size_t)i * classes;
			for (int j = 0; j < classes; j++) {
				float pj = (float)exp((double)z[j] - lse);
				d[j] = (pj - (j == label ? 1.0f : 0.0f)) * grad_scale;
			}
		}
	}
}

/* One block: fixed-order tree sum of the per-sample losses (in double). */
__global__ void k_reduce_result(const float *loss_tmp, const int *correct_tmp, int n,
				struct hn_k_result *res)
{
	__shared__ double ls[HN_K_THREADS];
	__shared__ int cs[HN_K_THREADS];
	double l = 0.0;
	int c = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		l += (double)loss_tmp[i];
		c += correct_tmp[i];
	}
	ls[threadIdx.x] = l;
	cs[threadIdx.x] = c;
	__syncthreads();
	for (int stride = HN_K_THREADS / 2; stride > 0; stride >>= 1) {
		if ((int)threadIdx.x < stride) {
			ls[threadIdx.x] += ls[threadIdx.x + stride];
			cs[threadIdx.x] += cs[threadIdx.x + stride];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		res->loss_sum = ls[0];
		res->correct = cs[0];
	}
}

extern "C" cudaError_t hn_k_softmax_xent(const float *logits, const uint16_t *labels, int n,
					 int classes, float grad_scale, const struct hn_k_amp *amp,
					 float *dlogits, float *loss_tmp, int *correct_tmp,
					 struct hn_k_result *res, cudaStream_t s)
{
	cudaError_t e = cudaMemsetAsync(res, 0, sizeof(*res), s);
	if (e != cudaSuccess || n <= 0)
		return e;
	k_softmax_xent<<<hn_blocks((size_t)n), HN_K_THREADS, 0, s>>>(
		logits, labels, n, classes, grad_scale, amp, dlogits, loss_tmp, correct_tmp,
		&res->bad_label);
	e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	k_reduce_result<<<1, HN_K_THREADS, 0, s>>>(loss_tmp, correct_tmp, n, res);
	return cudaGetLastError();
}

/* ---- batch normalisation, global average pooling ---- */

#define HN_BN_EPS 1e-5 /* trainer/backend.h's */

__global__ void k_bn_stats_fin(const double *part, int n, int c, int hw, int parts, float *mean,
			       float *invstd, float *run, float scale, const struct hn_k_amp *amp)
{
	GRID_LOOP(chs, (size_t)c)
	{
		int ch = (int)chs;
		double sa, sb;
		chan_total(part, ch, parts, &sa, &sb);
		double M = (double)n * hw, mu = sa / M, var = sb / M - mu * mu;
		if (var < 0)
			var = 0;
		mean[ch] = (float)mu;
		invstd[ch] = (float)(1.0 / sqrt(var + HN_BN_EPS));
		if (run) {
			float sc = scale * amp_scale(amp);
			double unbiased = M > 1 ? var * M / (M - 1) : var;
			run[ch] += (float)(mu * n) * sc;
			run[c + ch] += (float)(unbiased * n) * sc;
		}
	}
}

extern "C" cudaError_t hn_k_bn_stats(const float *x, int n, int c, int hw, float *mean,
				     float *invstd, float *run, float scale,
				     const struct hn_k_amp *amp, double *scratch, cudaStream_t s)
{
	if (c <= 0 || n <= 0 || hw <= 0)
		return cudaSuccess;
	int parts;
	cudaError_t e = chan_sums(CH_BN_STATS, x, NULL, n, c, hw, NULL, NULL, scratch, &parts, s);
	if (e != cudaSuccess)
		return e;
	k_bn_stats_fin<<<hn_blocks((size_t)c), HN_K_THREADS, 0, s>>>(scratch, n, c, hw, parts, mean,
								     invstd, run, scale, amp);
	return cudaGetLastError();
}

__global__ void k_bn_running(const float *run, int c, float *mean, float *invstd)
{
	GRID_LOOP(ch, (size_t)c)
	{
		mean[ch] = run[ch];
		invstd[ch] = 1.0f / sqrtf(fmaxf(run[c + ch], 0.0f) + (float)HN_BN_EPS);
	}
}

extern "C" cudaError_t hn_k_bn_running(const float *run, int c, float *mean, float *invstd,
				       cudaStream_t s)
{
	if (c <= 0)
		return cudaSuccess;
	k_bn_running<<<hn_blocks((size_t)c), HN_K_THREADS, 0, s>>>(run, c, mean, invstd);
	return cudaGetLastError();
}

__global__ void k_bn_apply(const float *x, float *y, size_t total, int c, int hw, const float *mean,
			   const float *invstd, const float *gamma, const float *beta)
{
	GRID_LOOP(i, total)
	{
		int ch = (int)((i / (size_t)hw) % (size_t)c);
		float a = gamma[ch] * invstd[ch], b = beta[ch] - mean[ch] * a;
		y[i] = x[i] * a + b;
	}
}

extern "C" cudaError_t hn_k_bn_apply(const float *x, float *y, int n, int c, int hw,
				     const float *mean, const float *invstd, const float *gamma,
				     const float *beta, cudaStream_t s)
{
	size_t total = (size_t)n * c * hw;
	if (total == 0)
		return cudaSuccess;
	k_bn_apply<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(x, y, total, c, hw, mean, invstd,
							     gamma, beta);
	return cudaGetLastError();
}

__global__ void k_bn_bwd_fin(const double *part, int n, int c, int hw, int parts, float *dgamma,
			     float *dbeta, float *mdy, float *mdyx)
{
	GRID_LOOP(chs, (size_t)c)
	{
		int ch = (int)chs;
		double sa, sb, per = (double)n * hw;
		chan_total(part, ch, parts, &sa, &sb);
		dbeta[ch] += (float)sa;
		dgamma[ch] += (float)sb;
		mdy[ch] = (float)(sa / per);
		mdyx[ch] = (float)(sb / per);
	}
}

extern "C" cudaError_t hn_k_bn_bwd_sums(const float *dy, const float *x, int n, int c, int hw,
					const float *mean, const float *invstd, float *dgamma,
					float *dbeta, float *mdy, float *mdyx, double *scratch,
					cudaStream_t s)
{
	if (c <= 0 || n <= 0 || hw <= 0)
		return cudaSuccess;
	int parts;
	cudaError_t e = chan_sums(CH_BN_BWD, dy, x, n, c, hw, mean, invstd, scratch, &parts, s);
	if (e != cudaSuccess)
		return e;
	k_bn_bwd_fin<<<hn_blocks((size_t)c), HN_K_THREADS, 0, s>>>(scratch, n, c, hw, parts, dgamma,
								   dbeta, mdy, mdyx);
	return cudaGetLastError();
}

__global__ void k_bn_bwd(const float *dy, const float *x, float *dx, size_t total, int c, int hw,
			 const float *mean, const float *invstd, const float *gamma,
			 const float *mdy, const float *mdyx)
{
	GRID_LOOP(i, total)
	{
		int ch = (int)((i / (size_t)hw) % (size_t)c);
		float is = invstd[ch], g = gamma[ch] * is;
		dx[i] = g * (dy[i] - mdy[ch] - (x[i] - mean[ch]) * is * mdyx[ch]);
	}
}

extern "C" cudaError_t hn_k_bn_bwd(const float *dy, const float *x, float *dx, int n, int c, int hw,
				   const float *mean, const float *invstd, const float *gamma,
				   const float *mdy, const float *mdyx, cudaStream_t s)
{
	size_t total = (size_t)n * c * hw;
	if (total == 0)
		return cudaSuccess;
	k_bn_bwd<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(dy, x, dx, total, c, hw, mean, invstd,
							   gamma, mdy, mdyx);
	return cudaGetLastError();
}

__global__ void k_avgpool_fwd(const float *x, float *y, size_t planes, int hw)
{
	GRID_LOOP(i, planes)
	{
		const float *p = x + i * (size_t)hw;
		float acc = 0.0f;
		for (int j = 0; j < hw; j++)
			acc += p[j];
		y[i] = acc * (1.0f / (float)hw);
	}
}

__global__ void k_avgpool_bwd(const float *dy, float *dx, size_t total, int hw)
{
	GRID_LOOP(i, total)
	{
		dx[i] = dy[i / (size_t)hw] * (1.0f / (float)hw);
	}
}

extern "C" cudaError_t hn_k_avgpool_fwd(const float *x, float *y, size_t planes, int hw,
					cudaStream_t s)
{
	if (planes == 0 || hw <= 0)
		return cudaSuccess;
	k_avgpool_fwd<<<hn_blocks(planes), HN_K_THREADS, 0, s>>>(x, y, planes, hw);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_avgpool_bwd(const float *dy, float *dx, size_t planes, int hw,
					cudaStream_t s)
{
	size_t total = planes * (size_t)(hw > 0 ? hw : 0);
	if (total == 0)
		return cudaSuccess;
	k_avgpool_bwd<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(dy, dx, total, hw);
	return cudaGetLastError();
}
