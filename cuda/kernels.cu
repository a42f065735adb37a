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
 * deterministic gather is cheap; an element's channel or plane comes from
 * fastdiv.h's divisions, not 64-bit ones. A ReLU can ride in the batchnorm
 * and add kernels (relu flags, ry masks), and batchnorm reads a conv's
 * 16-bit output as it is (xt). Convolutions and matrix products are not
 * here; they go to cuDNN and cuBLAS.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda/fastdiv.h"
#include "cuda/kernels.h"
#include "cuda/kernels_int.cuh"

/*
 * The channel of element i of an n x c x hw tensor, (i / hw) % c. Where the
 * tensor has at most INT32_MAX elements (every one a batch of 256 ImageNet
 * tiles makes) the divisions are fastdiv.h's multiply-highs: as 64-bit
 * divisions they cost more than the element's memory traffic.
 */
struct chan_ix {
	struct hn_divu hw, c;
	int fast;
};

static struct chan_ix chan_ix_make(size_t total, int c, int hw)
{
	struct chan_ix x;
	x.hw = hn_divu_make((uint32_t)hw);
	x.c = hn_divu_make((uint32_t)c);
	x.fast = total <= (size_t)INT32_MAX;
	return x;
}

__device__ __forceinline__ static int chan_of(const struct chan_ix &x, size_t i)
{
	if (x.fast) {
		uint32_t q = hn_divu_div(&x.hw, (uint32_t)i);
		return (int)(q - hn_divu_div(&x.c, q) * x.c.d);
	}
	return (int)((i / x.hw.d) % x.c.d);
}

/* q = i / v and r = i % v, as chan_of decides between the two divisions. */
__device__ __forceinline__ static void div_rem(const struct hn_divu &v, int fast, size_t i,
					       size_t *q, uint32_t *r)
{
	if (fast) {
		uint32_t qq = hn_divu_div(&v, (uint32_t)i);
		*q = qq;
		*r = (uint32_t)i - qq * v.d;
	} else {
		*q = i / v.d;
		*r = (uint32_t)(i % v.d);
	}
}

/* ---- input ---- */

__global__ void k_tiles_to_chw(const uint8_t *tiles, float *x, size_t total, int h, int w, int c,
			       struct hn_k_norm norm, struct hn_divu dchw, struct hn_divu dhw,
			       int fast)
{
	GRID_LOOP(i, total)
	{
		/* i indexes the output NCHW */
		size_t chw = (size_t)h * w * c;
		size_t img, ch;
		uint32_t r, p; /* p: y * w + x */
		div_rem(dchw, fast, i, &img, &r);
		div_rem(dhw, 1, r, &ch, &p); /* r < chw, whose check is the caller's */
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
	size_t chw = (size_t)h * w * c;
	if (chw > (size_t)INT32_MAX)
		return cudaErrorInvalidValue; /* a tile of over 2^31 values */
	k_tiles_to_chw<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(
		tiles, x, total, h, w, c, norm, hn_divu_make((uint32_t)chw),
		hn_divu_make((uint32_t)h * (uint32_t)w), total <= (size_t)INT32_MAX);
	return cudaGetLastError();
}

/* ---- bias ---- */

__global__ void k_bias_add(float *y, const float *b, size_t total, struct chan_ix cx)
{
	GRID_LOOP(i, total)
	{
		y[i] += b[chan_of(cx, i)];
	}
}

extern "C" cudaError_t hn_k_bias_add(float *y, const float *b, int n, int c, int hw, cudaStream_t s)
{
	size_t total = (size_t)n * c * hw;
	if (total == 0)
		return cudaSuccess;
	k_bias_add<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(y, b, total,
							     chan_ix_make(total, c, hw));
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
 * invstd), where a is first masked by a fused ReLU's output ry when ry is
 * not NULL (relu_bwd's value: ry > 0 ? a : 0).
 */
template <typename X>
__global__ void k_chan_part(int mode, const float *a, const X *b, const float *ry, int n, int c,
			    int hw, int parts, const float *mean, const float *invstd, double *out)
{
	__shared__ double sa[HN_K_THREADS], sb[HN_K_THREADS];
	int ch = blockIdx.x, q = blockIdx.y;
	int i0 = (int)((long long)n * q / parts), i1 = (int)((long long)n * (q + 1) / parts);
	double ta = 0, tb = 0;
	if (mode == CH_BIAS) {
		float fa = 0.0f;
		chan_each(i0, i1, c, ch, hw, [&](size_t at) { fa += a[at]; });
		ta = fa;
	} else if (mode == CH_BN_STATS) { /* of b */
		chan_each(i0, i1, c, ch, hw, [&](size_t at) {
			double v = from_h(b[at]);
			ta += v;
			tb += v * v;
		});
	} else {
		float mu = mean[ch], is = invstd[ch];
		chan_each(i0, i1, c, ch, hw, [&](size_t at) {
			float g = a[at];
			if (ry)
				g = ry[at] > 0.0f ? g : 0.0f;
			ta += g;
			tb += (double)g * ((from_h(b[at]) - mu) * is);
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

template <typename X>
static cudaError_t chan_sums(int mode, const float *a, const X *b, const float *ry, int n, int c,
			     int hw, const float *mean, const float *invstd, double *scratch,
			     int *parts, cudaStream_t s)
{
	*parts = chan_parts(n, hw);
	dim3 grid((unsigned)c, (unsigned)*parts);
	k_chan_part<<<grid, HN_K_THREADS, 0, s>>>(mode, a, b, ry, n, c, hw, *parts, mean, invstd,
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
	cudaError_t e = chan_sums(CH_BIAS, dy, (const float *)NULL, NULL, n, c, hw, NULL, NULL,
				  scratch, &parts, s);
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

/* relu_bwd into two outputs (an add's two inputs; dx2 NULL: one) */
__global__ void k_relu_bwd2(const float *y, const float *dy, float *dx, float *dx2, size_t count)
{
	GRID_LOOP(i, count)
	{
		float v = y[i] > 0.0f ? dy[i] : 0.0f;
		dx[i] = v;
		if (dx2)
			dx2[i] = v;
	}
}

extern "C" cudaError_t hn_k_relu_fwd(const float *x, float *y, size_t count, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_relu_fwd<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(x, y, count);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_relu_bwd2(const float *y, const float *dy, float *dx, float *dx2,
				      size_t count, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_relu_bwd2<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(y, dy, dx, dx2, count);
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

/* The plane of element i and its offset in it, and the offset's row and column. */
struct plane_ix {
	struct hn_divu plane, row; /* by the plane's size, by its width */
	int fast;
};

static struct plane_ix plane_ix_make(size_t total, int h, int w)
{
	struct plane_ix x;
	x.plane = hn_divu_make((uint32_t)h * (uint32_t)w); /* hn_k_maxpool_*: h * w < 2^31 */
	x.row = hn_divu_make((uint32_t)w);
	x.fast = total <= (size_t)INT32_MAX;
	return x;
}

__device__ __forceinline__ static void plane_of(const struct plane_ix &x, size_t i, size_t *plane,
						int *r, int *row, int *col)
{
	uint32_t rr;
	div_rem(x.plane, x.fast, i, plane, &rr);
	uint32_t q = hn_divu_div(&x.row, rr);
	*r = (int)rr;
	*row = (int)q;
	*col = (int)(rr - q * x.row.d);
}

__global__ void k_maxpool_fwd(const float *x, float *y, int *idx, size_t total, int ih, int iw,
			      int oh, int ow, int k, int stride, int pad, struct plane_ix px)
{
	GRID_LOOP(i, total)
	{
		size_t plane;
		int r, oy, ox;
		plane_of(px, i, &plane, &r, &oy, &ox);
		const float *xp = x + plane * (size_t)ih * iw;
		int a = pool_argmax(xp, ih, iw, oy, ox, k, stride, pad);
		y[i] = xp[a];
		if (idx)
			idx[i] = a;
	}
}

__global__ void k_maxpool_bwd(const int *idx, const float *dy, float *dx, size_t total, int ih,
			      int iw, int oh, int ow, int k, int stride, int pad,
			      struct plane_ix px)
{
	GRID_LOOP(i, total)
	{
		size_t plane;
		int r, yy, xx;
		plane_of(px, i, &plane, &r, &yy, &xx);
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
	if ((size_t)ih * iw > (size_t)INT32_MAX)
		return cudaErrorInvalidValue; /* idx holds int offsets in the plane */
	k_maxpool_fwd<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(
		x, y, idx, total, ih, iw, oh, ow, k, stride, pad, plane_ix_make(total, oh, ow));
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_maxpool_bwd(const int *idx, const float *dy, float *dx, int n, int c,
					int ih, int iw, int oh, int ow, int k, int stride, int pad,
					cudaStream_t s)
{
	size_t total = (size_t)n * c * ih * iw;
	if (total == 0)
		return cudaSuccess;
	if ((size_t)ih * iw > (size_t)INT32_MAX)
		return cudaErrorInvalidValue;
	k_maxpool_bwd<<<hn_blocks(total), HN_K_THREADS, 0, s>>>(
		idx, dy, dx, total, ih, iw, oh, ow, k, stride, pad, plane_ix_make(total, ih, iw));
	return cudaGetLastError();
}

/* ---- residual blocks ---- */

template <bool RELU> __global__ void k_add(const float *a, const float *b, float *y, size_t count)
{
	GRID_LOOP(i, count)
	{
		float v = a[i] + b[i];
		y[i] = RELU ? (v > 0.0f ? v : 0.0f) : v;
	}
}

extern "C" cudaError_t hn_k_add(const float *a, const float *b, float *y, size_t count, int relu,
				cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	if (relu)
		k_add<true><<<hn_blocks(count), HN_K_THREADS, 0, s>>>(a, b, y, count);
	else
		k_add<false><<<hn_blocks(count), HN_K_THREADS, 0, s>>>(a, b, y, count);
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

extern "C" cudaError_t hn_k_bn_stats(const void *x, int xt, int n, int c, int hw, float *mean,
				     float *invstd, float *run, float scale,
				     const struct hn_k_amp *amp, double *scratch, cudaStream_t s)
{
	if (c <= 0 || n <= 0 || hw <= 0)
		return cudaSuccess;
	int parts;
	cudaError_t e;
	if (xt == HN_K_X_F16)
		e = chan_sums(CH_BN_STATS, NULL, (const __half *)x, NULL, n, c, hw, NULL, NULL,
			      scratch, &parts, s);
	else if (xt == HN_K_X_BF16)
		e = chan_sums(CH_BN_STATS, NULL, (const __nv_bfloat16 *)x, NULL, n, c, hw, NULL,
			      NULL, scratch, &parts, s);
	else
		e = chan_sums(CH_BN_STATS, NULL, (const float *)x, NULL, n, c, hw, NULL, NULL,
			      scratch, &parts, s);
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

template <bool RELU, typename X>
__global__ void k_bn_apply(const X *x, float *y, size_t total, struct chan_ix cx, const float *mean,
			   const float *invstd, const float *gamma, const float *beta)
{
	GRID_LOOP(i, total)
	{
		int ch = chan_of(cx, i);
		float a = gamma[ch] * invstd[ch], b = beta[ch] - mean[ch] * a;
		float v = from_h(x[i]) * a + b;
		y[i] = RELU ? (v > 0.0f ? v : 0.0f) : v; /* k_relu_fwd's, the same bits */
	}
}

template <typename X>
static void bn_apply(const X *x, float *y, size_t total, struct chan_ix cx, const float *mean,
		     const float *invstd, const float *gamma, const float *beta, int relu,
		     cudaStream_t s)
{
	if (relu)
		k_bn_apply<true><<<hn_blocks(total), HN_K_THREADS, 0, s>>>(x, y, total, cx, mean,
									   invstd, gamma, beta);
	else
		k_bn_apply<false><<<hn_blocks(total), HN_K_THREADS, 0, s>>>(x, y, total, cx, mean,
									    invstd, gamma, beta);
}

extern "C" cudaError_t hn_k_bn_apply(const void *x, int xt, float *y, int n, int c, int hw,
				     const float *mean, const float *invstd, const float *gamma,
				     const float *beta, int relu, cudaStream_t s)
{
	size_t total = (size_t)n * c * hw;
	if (total == 0)
		return cudaSuccess;
	struct chan_ix cx = chan_ix_make(total, c, hw);
	if (xt == HN_K_X_F16)
		bn_apply((const __half *)x, y, total, cx, mean, invstd, gamma, beta, relu, s);
	else if (xt == HN_K_X_BF16)
		bn_apply((const __nv_bfloat16 *)x, y, total, cx, mean, invstd, gamma, beta, relu,
			 s);
	else
		bn_apply((const float *)x, y, total, cx, mean, invstd, gamma, beta, relu, s);
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

extern "C" cudaError_t hn_k_bn_bwd_sums(const float *dy, const void *x, int xt, const float *ry,
					int n, int c, int hw, const float *mean,
					const float *invstd, float *dgamma, float *dbeta,
					float *mdy, float *mdyx, double *scratch, cudaStream_t s)
{
	if (c <= 0 || n <= 0 || hw <= 0)
		return cudaSuccess;
	int parts;
	cudaError_t e;
	if (xt == HN_K_X_F16)
		e = chan_sums(CH_BN_BWD, dy, (const __half *)x, ry, n, c, hw, mean, invstd, scratch,
			      &parts, s);
	else if (xt == HN_K_X_BF16)
		e = chan_sums(CH_BN_BWD, dy, (const __nv_bfloat16 *)x, ry, n, c, hw, mean, invstd,
			      scratch, &parts, s);
	else
		e = chan_sums(CH_BN_BWD, dy, (const float *)x, ry, n, c, hw, mean, invstd, scratch,
			      &parts, s);
	if (e != cudaSuccess)
		return e;
	k_bn_bwd_fin<<<hn_blocks((size_t)c), HN_K_THREADS, 0, s>>>(scratch, n, c, hw, parts, dgamma,
								   dbeta, mdy, mdyx);
	return cudaGetLastError();
}

template <bool RELU, typename X>
__global__ void k_bn_bwd(const float *dy, const X *x, const float *ry, X *dx, size_t total,
			 struct chan_ix cx, const float *mean, const float *invstd,
			 const float *gamma, const float *mdy, const float *mdyx)
{
	GRID_LOOP(i, total)
	{
		int ch = chan_of(cx, i);
		float is = invstd[ch], g = gamma[ch] * is;
		float d = dy[i];
		if (RELU)
			d = ry[i] > 0.0f ? d : 0.0f;
		to_h(g * (d - mdy[ch] - (from_h(x[i]) - mean[ch]) * is * mdyx[ch]), dx + i);
	}
}

template <typename X>
static void bn_bwd(const float *dy, const X *x, const float *ry, X *dx, size_t total,
		   struct chan_ix cx, const float *mean, const float *invstd, const float *gamma,
		   const float *mdy, const float *mdyx, cudaStream_t s)
{
	if (ry)
		k_bn_bwd<true><<<hn_blocks(total), HN_K_THREADS, 0, s>>>(
			dy, x, ry, dx, total, cx, mean, invstd, gamma, mdy, mdyx);
	else
		k_bn_bwd<false><<<hn_blocks(total), HN_K_THREADS, 0, s>>>(
			dy, x, ry, dx, total, cx, mean, invstd, gamma, mdy, mdyx);
}

extern "C" cudaError_t hn_k_bn_bwd(const float *dy, const void *x, int xt, const float *ry,
				   void *dx, int n, int c, int hw, const float *mean,
				   const float *invstd, const float *gamma, const float *mdy,
				   const float *mdyx, cudaStream_t s)
{
	size_t total = (size_t)n * c * hw;
	if (total == 0)
		return cudaSuccess;
	struct chan_ix cx = chan_ix_make(total, c, hw);
	if (xt == HN_K_X_F16)
		bn_bwd(dy, (const __half *)x, ry, (__half *)dx, total, cx, mean, invstd, gamma, mdy,
		       mdyx, s);
	else if (xt == HN_K_X_BF16)
		bn_bwd(dy, (const __nv_bfloat16 *)x, ry, (__nv_bfloat16 *)dx, total, cx, mean,
		       invstd, gamma, mdy, mdyx, s);
	else
		bn_bwd(dy, (const float *)x, ry, (float *)dx, total, cx, mean, invstd, gamma, mdy,
		       mdyx, s);
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
