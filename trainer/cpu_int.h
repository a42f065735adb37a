/*
 * cpu_int.h - the cpu backend's state, shared by backend_cpu.c (set-up,
 * updates, the ops table) and cpu_pass.c (the passes of a step over the
 * network). Private to those two files.
 */
#ifndef HN_CPU_INT_H
#define HN_CPU_INT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/backend.h"
#include "trainer/layers.h"
#include "trainer/team.h"

/* What one team member owns: its scratch, its chunk-sized gradients, its weight gradients. */
struct member_buf {
	float *tmp, *dcol, *col;	/* col: shared im2col when not kept per layer */
	float *ws;			/* Winograd convolutions' scratch, or NULL */
	float *du[HN_MAX_LAYERS];	/* Winograd conv i: its filters' gradient, transformed */
	float *dact[HN_MAX_LAYERS + 1]; /* gradients w.r.t. act (dact[0] unused) */
	float *grads;			/* member 0: the state's grads; others: own */
	double *bnp[HN_MAX_LAYERS];	/* batchnorm i: this member's 2 x C partial sums */
	float *dskip[HN_MAX_LAYERS];	/* save i: the gradient its shortcut reader gives X
					   (the member's rows) */
	double loss;
	int correct;
};

struct cpu_state {
	struct hn_model m;
	struct hn_optim o;
	struct hn_backend_config cfg;
	int max_batch;
	int micro;  /* micro-batches since the last apply: keeps dropout masks distinct */
	int folded; /* cpu_grads handed the group's gradients out: the next apply takes them */
	hn_team *team;
	int nthreads;

	float *params, *grads, *opt;
	size_t nopt;
	void *arena;
	size_t arena_bytes;

	float *act[HN_MAX_LAYERS + 1]; /* act[0] input, act[i+1] output of layer i (batch) */
	float *col[HN_MAX_LAYERS];     /* kept im2col (Winograd: V) matrices, or NULL */
	int32_t *idx[HN_MAX_LAYERS];   /* maxpool argmax */
	float *mask[HN_MAX_LAYERS];    /* dropout */
	float *probs;
	struct member_buf mb[HN_TEAM_MAX];
	int fused[HN_MAX_LAYERS];     /* layer i (conv/dense) carries the ReLU i+1 */
	int wino[HN_MAX_LAYERS];      /* conv i runs by Winograd (wino.c) */
	float *wu[HN_MAX_LAYERS];     /* its transformed filters, made from params */
	int wu_stale;		      /* params changed since wu was made */
	int du_dirty;		      /* members' du hold gradients not yet in their grads */
	int dfull[HN_MAX_LAYERS + 1]; /* dact[i] holds the member's rows (else one chunk) */
	int need_din[HN_MAX_LAYERS];  /* some layer below i has parameters */
	int keep_col;
	int stage; /* layers [0, stage) are per-sample spatial layers, run in chunks */
	int chunk; /* samples per chunk in that stage */
	int rows;  /* most samples one member takes from a max_batch batch */
	/* batch normalisation: the layers, in order, and per layer the batch's numbers */
	int nbn, bn_at[HN_MAX_LAYERS];
	float *bn_mean[HN_MAX_LAYERS], *bn_invstd[HN_MAX_LAYERS]; /* C each */
	float *bn_mdy[HN_MAX_LAYERS], *bn_mdyx[HN_MAX_LAYERS];	  /* backward: batch means */
	/* parameter spans the optimizer treats apart, in offset order (see update_slice) */
	int nspans;
	struct span {
		size_t off, len;
		int stats; /* 1: running statistics; 0: trained without weight decay */
	} spans[2 * HN_MAX_LAYERS];
	const float *in_mean, *in_std; /* input normalisation, or NULL */
	char desc[320];
};

/*
 * One dispatch of a step to the team. Without batch normalisation a step is
 * one dispatch: forward [fa, fb), the loss, backward [ba, bb). Each
 * batchnorm layer cuts it where the whole batch must meet: the dispatch
 * before it ends by summing the layer's input (bn_fwd) or output gradient
 * (bn_bwd) over each member's rows, and the main thread joins the sums
 * before the next dispatch goes on from the layer.
 */
struct step_job {
	struct cpu_state *st;
	const uint8_t *tiles;
	const uint16_t *labels;
	int n, train;
	float scale; /* 1 / group_size */
	float lr;
	uint64_t t;
	int input;	    /* first convert the tiles (the step's first dispatch) */
	int fa, fb;	    /* forward through layers [fa, fb) */
	int loss;	    /* then the loss (and, training, its gradient) */
	int ba, bb;	    /* then backward through layers [ba, bb) */
	int bn_fwd, bn_bwd; /* then the partial sums of this batchnorm layer, or -1 */
};

static inline size_t out_floats(const struct hn_layer *l)
{
	return (size_t)l->out_c * l->out_h * l->out_w;
}

static inline size_t in_floats(const struct hn_layer *l)
{
	return (size_t)l->in_c * l->in_h * l->in_w;
}

/* Member tid's samples of an n-sample batch: whole chunks, split as evenly as possible. */
static inline void member_rows(const struct cpu_state *st, int n, int tid, int *s0, int *s1)
{
	long nchunks = (n + st->chunk - 1) / st->chunk, c0, c1;
	hn_team_split(nchunks, tid, st->nthreads, &c0, &c1);
	*s0 = (int)(c0 * st->chunk);
	*s1 = (int)(c1 * st->chunk < n ? c1 * st->chunk : n);
	if (*s0 > n)
		*s0 = n;
}

static inline float *act_at(struct cpu_state *st, int i, int s0)
{
	const struct hn_model *m = &st->m;
	size_t per = i ? out_floats(&m->layers[i - 1]) : (size_t)m->in_c * m->in_h * m->in_w;
	return st->act[i] + (size_t)s0 * per;
}

/* Member gradients: full-size ones are indexed from the member's first row r0. */
static inline float *dact_at(struct cpu_state *st, int tid, int i, int s0, int r0)
{
	const struct hn_model *m = &st->m;
	float *d = st->mb[tid].dact[i];
	if (!d)
		return NULL;
	size_t per = out_floats(&m->layers[i - 1]);
	return st->dfull[i] ? d + (size_t)(s0 - r0) * per : d;
}

/* Save layer i's shortcut gradient for samples [s0, ...) of member tid's rows from r0. */
static inline float *dskip_at(struct cpu_state *st, int tid, int i, int s0, int r0)
{
	return st->mb[tid].dskip[i] + (size_t)(s0 - r0) * out_floats(&st->m.layers[i]);
}

/* Where the gradient of slot j from a skip reader (a projection, an add) goes. */
static inline float *dslot_at(struct cpu_state *st, int tid, int j, int s0, int r0)
{
	return st->m.layers[j - 1].kind == HN_LAYER_SAVE ? dskip_at(st, tid, j - 1, s0, r0)
							 : dact_at(st, tid, j, s0, r0);
}

/* What conv i keeps from forward for backward, n samples: im2col's matrix or Winograd's V. */
static inline size_t kept_floats(const struct cpu_state *st, int i, int n)
{
	const struct hn_layer *l = &st->m.layers[i];
	return st->wino[i] ? hn_wino_v_floats(l, n) : hn_conv2d_col_floats(l, n);
}

static inline float *col_at(struct cpu_state *st, int tid, int i, int s0)
{
	return st->keep_col ? st->col[i] + (size_t)s0 * kept_floats(st, i, 1) : st->mb[tid].col;
}

/*
 * A whole forward (and, training, backward) pass over the batch of j: one
 * team dispatch, or one per batchnorm cut and direction (cpu_pass.c).
 */
void hn_cpu_run_step(struct cpu_state *st, struct step_job *j);

#endif
