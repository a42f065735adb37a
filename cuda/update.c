/*
 * update.c - the GPU backend's optimizer step (cuda_int.h: cu_apply_update):
 * SGD, momentum or Adam over the one parameter block, the batchnorm layers'
 * running statistics, and with fp16 amp the overflow check and the loss
 * scale's move. Its kernels are kernels_step.cu's; backend_cuda.c calls it
 * from the train step. Apart from there because it is the one place that
 * knows the optimizers, as trainer/optim.c is on the CPU.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda_int.h"
#include "cuda/kernels.h"

/* The optimizer step over parameters [p0, p1) with weight decay wd. */
static int optim_range(struct hn_cuda *st, size_t p0, size_t p1, float wd, float lr, uint64_t step)
{
	const struct hn_optim *o = &st->o;
	const size_t np = st->m.nparams, cnt = p1 > p0 ? p1 - p0 : 0;
	if (!cnt)
		return 0;
	float *w = st->params + p0, *g = st->grads + p0;
	switch (o->kind) {
	case HN_OPT_SGD:
		CU(hn_k_sgd(w, g, cnt, lr, wd, cu_amp(st), st->stream), st->err);
		break;
	case HN_OPT_MOMENTUM:
		CU(hn_k_momentum(w, g, st->opt + p0, cnt, lr, o->momentum, wd, cu_amp(st),
				 st->stream),
		   st->err);
		break;
	case HN_OPT_ADAM: {
		double t = step ? (double)step : 1.0;
		/* as trainer/optim.c computes them, for equal rounding */
		float c1 = (float)(1.0 / (1.0 - pow((double)o->beta1, t)));
		float c2 = (float)(1.0 / (1.0 - pow((double)o->beta2, t)));
		CU(hn_k_adam(w, g, st->opt + p0, st->opt + np + p0, cnt, lr, o->beta1, o->beta2,
			     o->eps, wd, c1, c2, cu_amp(st), st->stream),
		   st->err);
		break;
	}
	default:
		snprintf(st->err, sizeof(st->err), "gpu: unknown optimizer %d", (int)o->kind);
		return -EINVAL;
	}
	return 0;
}

int cu_apply_update(struct hn_cuda *st, float lr, uint64_t step)
{
	size_t np = st->m.nparams;
	struct hn_k_amp *amp = st->amp == HN_AMP_FP16 ? &st->d_small->amp : NULL;
	if (np == 0)
		return 0;
	if (amp) {
		CU(cudaMemsetAsync(&amp->overflow, 0, sizeof(int), st->stream), st->err);
		CU(hn_k_check_finite(st->grads, np, &amp->overflow, st->stream), st->err);
	}
	/*
	 * The optimizer over the parameter block, except on batchnorm layers:
	 * gamma and beta without weight decay, and the running statistics moved
	 * towards the batch statistics their gradient slots hold (as the cpu
	 * backend's update_slice).
	 */
	size_t p = 0;
	for (int i = 0; i < st->m.nlayers; i++) {
		const struct hn_layer *l = &st->m.layers[i];
		if (l->kind != HN_LAYER_BATCHNORM)
			continue;
		TRY(optim_range(st, p, l->w_off, st->o.weight_decay, lr, step));
		TRY(optim_range(st, l->w_off, l->s_off, 0.0f, lr, step));
		CU(hn_k_running(st->params + l->s_off, st->grads + l->s_off, l->s_len,
				HN_BN_MOMENTUM, amp, st->stream),
		   st->err);
		p = l->s_off + l->s_len;
	}
	TRY(optim_range(st, p, np, st->o.weight_decay, lr, step));
	CU(cudaMemsetAsync(st->grads, 0, np * sizeof(float), st->stream), st->err);
	TRY(cu_refresh_params16(st));
	if (amp) {
		CU(hn_k_amp_update(amp, HN_AMP_GROWTH, HN_AMP_MIN_SCALE, HN_AMP_MAX_SCALE,
				   st->stream),
		   st->err);
		CU(cudaMemcpyAsync(&st->h_small->amp, amp, sizeof(*amp), cudaMemcpyDeviceToHost,
				   st->stream),
		   st->err);
	}
	return 0;
}

int cu_update_skipped(const struct hn_cuda *st)
{
	return st->amp == HN_AMP_FP16 && st->h_small->amp.overflow;
}
