/*
 * cpu_pass.c - the passes of one cpu backend step over the network.
 *
 * Each member of the team runs its rows through the layers (forward_range,
 * backward_range), the spatial stage chunk by chunk and the dense stage on
 * all its rows (forward_rows, backward_rows). A batchnorm layer needs the
 * statistics of the whole batch, so hn_cpu_run_step cuts the step there
 * into several dispatches and joins the members' sums in between
 * (join_sums), in member order, so that a thread count always does the
 * same arithmetic. A residual block's shortcut reads an earlier slot,
 * whose activations hold the whole batch; its gradient goes to the save's
 * own buffer (member rows), added in when the backward pass reaches the
 * save.
 */
#include <math.h>
#include <string.h>

#include "trainer/cpu_int.h"

/* Layers [a, b) forward on samples [s0, s0 + n), by member tid. Dropout masks are drawn. */
static void forward_range(struct cpu_state *st, int tid, int a, int b, int s0, int n, int train)
{
	const struct hn_model *m = &st->m;
	for (int i = a; i < b; i++) {
		const struct hn_layer *l = &m->layers[i];
		const float *in = act_at(st, l->from ? l->from : i, s0);
		float *out = act_at(st, i + 1, s0);
		size_t of = out_floats(l), count = (size_t)n * of;
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			if (st->wino[i]) {
				hn_wino_forward(out, col_at(st, tid, i, s0), st->mb[tid].ws, in,
						st->wu[i], l->b_len ? st->params + l->b_off : NULL,
						n, l, st->fused[i]);
				break;
			}
			hn_conv2d_forward(out, col_at(st, tid, i, s0), st->mb[tid].tmp, in,
					  st->params + l->w_off,
					  l->b_len ? st->params + l->b_off : NULL, n, l,
					  st->fused[i]);
			break;
		case HN_LAYER_DENSE:
			hn_dense_forward(out, in, st->params + l->w_off, st->params + l->b_off, n,
					 l, st->fused[i]);
			break;
		case HN_LAYER_MAXPOOL:
			hn_maxpool_forward(out, st->idx[i] + (size_t)s0 * of, in, n, l);
			break;
		case HN_LAYER_RELU:
			if (!(i > 0 && st->fused[i - 1]))
				hn_relu_forward(out, in, count);
			break;
		case HN_LAYER_DROPOUT:
			if (train && l->p > 0.0f)
				hn_dropout_forward(out, in, st->mask[i] + (size_t)s0 * of, count);
			else
				memcpy(out, in, sizeof(float) * count);
			break;
		case HN_LAYER_BATCHNORM:
			hn_batchnorm_forward(out, in, st->bn_mean[i], st->bn_invstd[i],
					     st->params + l->w_off, st->params + l->b_off, n, l,
					     st->fused[i]);
			break;
		case HN_LAYER_AVGPOOL:
			hn_avgpool_forward(out, in, n, l);
			break;
		case HN_LAYER_SAVE: /* its output is its input's buffer */
			break;
		case HN_LAYER_ADD:
			hn_add_forward(out, in, act_at(st, l->shortcut, s0), count, st->fused[i]);
			break;
		}
	}
}

/* Layers [a, b) backward (b-1 down to a) on samples [s0, s0 + n) of member tid's rows from r0. */
static void backward_range(struct cpu_state *st, int tid, int a, int b, int s0, int n, int r0)
{
	const struct hn_model *m = &st->m;
	float *grads = st->mb[tid].grads;
	for (int i = b - 1; i >= a; i--) {
		const struct hn_layer *l = &m->layers[i];
		const int src = l->from ? l->from : i; /* the input's slot */
		float *din = !st->need_din[i] ? NULL
			     : l->from	      ? dslot_at(st, tid, l->from, s0, r0)
					      : dact_at(st, tid, i, s0, r0);
		const float *dout = dact_at(st, tid, i + 1, s0, r0);
		size_t of = out_floats(l), count = (size_t)n * of;
		float *relu_out = st->fused[i] ? act_at(st, i + 1, s0) : NULL;
		switch (l->kind) {
		case HN_LAYER_CONV2D:
			if (st->wino[i]) {
				hn_wino_backward(
					din, st->mb[tid].du[i], l->b_len ? grads + l->b_off : NULL,
					col_at(st, tid, i, s0), st->mb[tid].ws, dout, relu_out,
					act_at(st, src, s0), st->wu[i], n, l, st->keep_col);
				break;
			}
			hn_conv2d_backward(din, grads + l->w_off,
					   l->b_len ? grads + l->b_off : NULL,
					   col_at(st, tid, i, s0), st->mb[tid].tmp,
					   st->mb[tid].dcol, dout, relu_out, act_at(st, src, s0),
					   st->params + l->w_off, n, l, st->keep_col);
			break;
		case HN_LAYER_DENSE:
			hn_dense_backward(din, grads + l->w_off, grads + l->b_off, st->mb[tid].tmp,
					  dout, relu_out, act_at(st, i, s0), st->params + l->w_off,
					  n, l);
			break;
		case HN_LAYER_MAXPOOL:
			if (din)
				hn_maxpool_backward(din, dout, st->idx[i] + (size_t)s0 * of, n, l);
			break;
		case HN_LAYER_RELU:
			if (din && !(i > 0 && st->fused[i - 1]))
				hn_relu_backward(din, dout, act_at(st, i + 1, s0), count);
			break;
		case HN_LAYER_DROPOUT:
			if (din) {
				if (l->p > 0.0f)
					hn_dropout_backward(din, dout,
							    st->mask[i] + (size_t)s0 * of, count);
				else
					memcpy(din, dout, sizeof(float) * count);
			}
			break;
		case HN_LAYER_BATCHNORM:
			if (din)
				hn_batchnorm_backward(din, dout, relu_out, act_at(st, i, s0),
						      st->bn_mean[i], st->bn_invstd[i],
						      st->params + l->w_off, st->bn_mdy[i],
						      st->bn_mdyx[i], n, l);
			break;
		case HN_LAYER_AVGPOOL:
			if (din)
				hn_avgpool_backward(din, dout, n, l);
			break;
		case HN_LAYER_SAVE:
			if (din)
				hn_save_backward(din, dout, dskip_at(st, tid, i, s0, r0), count);
			break;
		case HN_LAYER_ADD:
			hn_add_backward(din, dslot_at(st, tid, l->shortcut, s0, r0), dout, relu_out,
					count);
			break;
		}
	}
}

/*
 * Layers [a, b) forward on rows [r0, r1): the spatial ones chunk by chunk
 * (after the tiles' conversion when j->input), then the rest.
 */
static void forward_rows(struct cpu_state *st, struct step_job *j, int tid, int a, int b, int r0,
			 int r1)
{
	const struct hn_model *m = &st->m;
	const size_t tile = (size_t)m->in_c * m->in_h * m->in_w;
	const int sb = b < st->stage ? b : st->stage;
	if (j->input || a < sb)
		for (int s0 = r0; s0 < r1; s0 += st->chunk) {
			int cn = r1 - s0 < st->chunk ? r1 - s0 : st->chunk;
			if (j->input)
				hn_input_forward(act_at(st, 0, s0), j->tiles + (size_t)s0 * tile,
						 cn, m->in_c, m->in_h, m->in_w, st->in_mean,
						 st->in_std);
			forward_range(st, tid, a, sb, s0, cn, j->train);
		}
	if (b > st->stage)
		forward_range(st, tid, a > st->stage ? a : st->stage, b, r0, r1 - r0, j->train);
}

/* Layers [a, b) backward on rows [r0, r1): the dense ones on all rows, then the spatial ones. */
static void backward_rows(struct cpu_state *st, int tid, int a, int b, int r0, int r1)
{
	if (b > st->stage)
		backward_range(st, tid, a > st->stage ? a : st->stage, b, r0, r1 - r0, r0);
	const int sb = b < st->stage ? b : st->stage;
	if (a < sb)
		for (int s0 = r0; s0 < r1; s0 += st->chunk) {
			int cn = r1 - s0 < st->chunk ? r1 - s0 : st->chunk;
			backward_range(st, tid, a, sb, s0, cn, r0);
		}
}

/*
 * One member's share of a dispatch: its samples through the job's forward
 * layers, the loss, and (training) backward in the reverse order, weight
 * gradients into its own buffer; then its batchnorm partial sums.
 */
static void step_member(void *arg, int tid, int nthreads)
{
	struct step_job *j = arg;
	struct cpu_state *st = j->st;
	const struct hn_model *m = &st->m;
	struct member_buf *mb = &st->mb[tid];
	const int L = m->nlayers, K = m->nclasses;
	int r0, r1;

	(void)nthreads;
	member_rows(st, j->n, tid, &r0, &r1);
	if (j->loss) {
		mb->loss = 0;
		mb->correct = 0;
	}
	int bn = j->bn_fwd >= 0 ? j->bn_fwd : j->bn_bwd;
	if (bn >= 0)
		memset(mb->bnp[bn], 0, 2 * sizeof(double) * m->layers[bn].in_c);
	if (r1 <= r0)
		return;
	forward_rows(st, j, tid, j->fa, j->fb, r0, r1);
	if (j->loss) {
		float *probs = st->probs + (size_t)r0 * K;
		mb->loss = hn_softmax_ce_forward(probs, act_at(st, L, r0), j->labels + r0, r1 - r0,
						 K, &mb->correct);
		if (j->train)
			hn_softmax_ce_backward(dact_at(st, tid, L, r0, r0), probs, j->labels + r0,
					       r1 - r0, K, j->scale);
	}
	backward_rows(st, tid, j->ba, j->bb, r0, r1);
	if (bn < 0)
		return;
	const struct hn_layer *l = &m->layers[bn];
	double *p = mb->bnp[bn];
	if (j->bn_fwd >= 0)
		hn_batchnorm_sums(p, p + l->in_c, act_at(st, bn, r0), r1 - r0, l);
	else
		hn_batchnorm_backward_sums(p, p + l->in_c, dact_at(st, tid, bn + 1, r0, r0),
					   st->fused[bn] ? act_at(st, bn + 1, r0) : NULL,
					   act_at(st, bn, r0), st->bn_mean[bn], st->bn_invstd[bn],
					   r1 - r0, l);
}

/*
 * Join the members' sums of batchnorm layer i (in member order) over the n
 * samples of the step. Forward: the batch mean and 1/std the layer
 * normalises with, and the batch's mean and unbiased variance added into
 * the running statistics' gradient slots, weighted like a gradient (n *
 * scale), so that the group (and, summed over ranks, the global batch)
 * leaves its average there for update_slice. Backward: sum(dy) and
 * sum(dy * xhat) are dbeta and dgamma, and their batch means go to the
 * input gradient.
 */
static void join_sums(struct cpu_state *st, int i, int fwd, int n, float scale)
{
	const struct hn_layer *l = &st->m.layers[i];
	const int C = l->in_c;
	const double M = (double)n * l->in_h * l->in_w;
	for (int c = 0; c < C; c++) {
		double a = 0, b = 0;
		for (int t = 0; t < st->nthreads; t++) {
			a += st->mb[t].bnp[i][c];
			b += st->mb[t].bnp[i][C + c];
		}
		if (fwd) {
			double mean = a / M, var = b / M - mean * mean;
			if (var < 0)
				var = 0;
			st->bn_mean[i][c] = (float)mean;
			st->bn_invstd[i][c] = (float)(1.0 / sqrt(var + HN_BN_EPS));
			double unbiased = M > 1 ? var * M / (M - 1) : var;
			st->grads[l->s_off + c] += (float)(mean * n) * scale;
			st->grads[l->s_off + C + c] += (float)(unbiased * n) * scale;
		} else {
			st->grads[l->b_off + c] += (float)a;
			st->grads[l->w_off + c] += (float)b;
			st->bn_mdy[i][c] = (float)(a / M);
			st->bn_mdyx[i][c] = (float)(b / M);
		}
	}
}

/* Winograd layers' transformed filters from the parameters, output channels split by member. */
static void filters_member(void *arg, int tid, int nthreads)
{
	struct cpu_state *st = arg;
	for (int i = 0; i < st->m.nlayers; i++) {
		const struct hn_layer *l = &st->m.layers[i];
		long oc0, oc1;
		if (!st->wino[i])
			continue;
		hn_team_split(l->out_c, tid, nthreads, &oc0, &oc1);
		hn_wino_filters(st->wu[i], st->params + l->w_off, l, (int)oc0, (int)oc1);
	}
}

/*
 * A whole forward (and, training, backward) pass over the batch of j: one
 * dispatch, or one per batchnorm cut and direction (see struct step_job),
 * after one that transforms the Winograd layers' filters when the weights
 * changed.
 */
void hn_cpu_run_step(struct cpu_state *st, struct step_job *j)
{
	const int L = st->m.nlayers, nbn = j->train ? st->nbn : 0;
	if (st->wu_stale) {
		hn_team_run(st->team, filters_member, st);
		st->wu_stale = 0;
	}
	j->loss = 0;
	j->ba = j->bb = 0;
	j->bn_bwd = -1;
	j->input = 1;
	int a = 0;
	for (int k = 0; k < nbn; k++) { /* forward up to each batchnorm, then its sums */
		j->fa = a;
		j->fb = st->bn_at[k];
		j->bn_fwd = st->bn_at[k];
		hn_team_run(st->team, step_member, j);
		j->input = 0;
		join_sums(st, st->bn_at[k], 1, j->n, j->scale);
		a = st->bn_at[k];
	}
	j->fa = a;
	j->fb = L;
	j->bn_fwd = -1;
	j->loss = 1;
	if (j->train) {
		j->ba = nbn ? st->bn_at[nbn - 1] + 1 : 0;
		j->bb = L;
		j->bn_bwd = nbn ? st->bn_at[nbn - 1] : -1;
	}
	hn_team_run(st->team, step_member, j);
	j->input = 0;
	j->loss = 0;
	j->fa = j->fb = 0;
	for (int k = nbn - 1; k >= 0; k--) { /* each batchnorm's input gradient, and down */
		join_sums(st, st->bn_at[k], 0, j->n, j->scale);
		j->ba = k ? st->bn_at[k - 1] + 1 : 0;
		j->bb = st->bn_at[k] + 1;
		j->bn_bwd = k ? st->bn_at[k - 1] : -1;
		hn_team_run(st->team, step_member, j);
	}
}
