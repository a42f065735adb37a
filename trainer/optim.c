/*
 * optim.c - parameter updates over the one parameter allocation.
 *
 * Because params, grads and state are each one contiguous buffer, an update
 * is one vectorizable loop over nparams, whatever the model. Semantics follow
 * PyTorch so that runs can be compared with the peer script:
 *   sgd:      g += wd*w; w -= lr*g
 *   momentum: g += wd*w; v = mu*v + g; w -= lr*v            (state: v)
 *   adam:     AdamW: w *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 *             w -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)   (state: m then v)
 * Gradients are zeroed here, after the update, ready for the next group.
 * s1/s2 are the state slices (v; or m and v) for exactly these parameters,
 * so the backend can hand each thread its own slice.
 */
#include <math.h>
#include <string.h>

#include "trainer/layers.h"

HN_HOT void hn_optim_update(const struct hn_optim *o, float *restrict params, float *restrict grads,
			    float *restrict s1, float *restrict s2, size_t nparams, float lr,
			    uint64_t t)
{
	const float wd = o->weight_decay;

	switch (o->kind) {
	case HN_OPT_SGD:
		for (size_t i = 0; i < nparams; i++)
			params[i] -= lr * (grads[i] + wd * params[i]);
		break;
	case HN_OPT_MOMENTUM: {
		const float mu = o->momentum;
		float *restrict v = s1;
		for (size_t i = 0; i < nparams; i++) {
			float g = grads[i] + wd * params[i];
			v[i] = mu * v[i] + g;
			params[i] -= lr * v[i];
		}
		break;
	}
	case HN_OPT_ADAM: {
		const float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
		const double tt = t ? (double)t : 1.0;
		const float c1 = (float)(1.0 / (1.0 - pow(b1, tt)));
		const float c2 = (float)(1.0 / (1.0 - pow(b2, tt)));
		const float decay = 1.0f - lr * wd;
		float *restrict m = s1, *restrict v = s2;
		for (size_t i = 0; i < nparams; i++) {
			float g = grads[i];
			m[i] = b1 * m[i] + (1.0f - b1) * g;
			v[i] = b2 * v[i] + (1.0f - b2) * g * g;
			params[i] = params[i] * decay - lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
		}
		break;
	}
	}
	memset(grads, 0, sizeof(float) * nparams);
}
