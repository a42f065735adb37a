/*
 * loss.c - softmax cross-entropy over class logits, numerically stable.
 *
 * The row maximum is subtracted before exp and the loss is computed as
 * log-sum-exp minus the label's logit (in double), so large logits neither
 * overflow nor lose the label's term to rounding. Probabilities are kept for
 * the backward pass, whose gradient is simply (p - onehot) scaled by the
 * caller's 1/group_size.
 */
#include <math.h>

#include "trainer/layers.h"

double hn_softmax_ce_forward(float *probs, const float *logits, const uint16_t *labels, int n,
			     int k, int *correct)
{
	double loss = 0.0;
	int hits = 0;

	for (int s = 0; s < n; s++) {
		const float *z = logits + (size_t)s * k;
		float *p = probs + (size_t)s * k;
		int arg = 0;
		for (int j = 1; j < k; j++)
			if (z[j] > z[arg])
				arg = j;
		const float zmax = z[arg];
		double sum = 0.0;
		for (int j = 0; j < k; j++) {
			p[j] = expf(z[j] - zmax);
			sum += p[j];
		}
		const float inv = (float)(1.0 / sum);
		for (int j = 0; j < k; j++)
			p[j] *= inv;
		loss += log(sum) - ((double)z[labels[s]] - zmax);
		hits += arg == labels[s];
	}
	if (correct)
		*correct = hits;
	return loss;
}

void hn_softmax_ce_backward(float *dlogits, const float *probs, const uint16_t *labels, int n,
			    int k, float scale)
{
	for (int s = 0; s < n; s++) {
		const float *p = probs + (size_t)s * k;
		float *d = dlogits + (size_t)s * k;
		for (int j = 0; j < k; j++)
			d[j] = p[j] * scale;
		d[labels[s]] -= scale;
	}
}
