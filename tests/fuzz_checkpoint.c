/*
 * fuzz_checkpoint.c - fuzz target: hntrain checkpoints (trainer/checkpoint.c),
 * read by --resume. Against its valid seed, a damaged checkpoint is refused
 * or loads the seed's very parameters and optimizer state (the file is
 * checksummed whole). Each input is also tried resealed (its checksum
 * computed again, as an attacker or a buggy writer would), which reaches the
 * field checks behind the checksum: whatever loads then has every count in
 * range and consistent, and every float finite.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/fuzz.h"
#include "trainer/checkpoint.h"

struct loaded {
	int ok;
	uint64_t nparams, params_hash, opt_hash;
};

/* What hntrain relies on in a checkpoint that loaded (it divides by accum, sizes by batch). */
static void check_loaded(const struct hn_checkpoint *c)
{
	const char *bad = NULL;
	uint64_t nopt = c->nparams * (uint64_t)hn_optim_state_per_param(c->optim.kind);
	uint64_t gb = (uint64_t)c->batch * c->nranks;
	if (c->accum < 1 || c->batch < 1 || c->nranks < 1 || c->train_count < 1)
		bad = "a zero count";
	else if (c->in_c < 1 || c->in_h < 1 || c->in_w < 1 || c->nclasses < 1)
		bad = "a zero shape";
	else if (c->batch_in_epoch > (c->train_count + gb - 1) / gb)
		bad = "a position beyond the epoch";
	else if (c->ep_correct > c->ep_seen || !isfinite(c->ep_loss))
		bad = "bad epoch sums";
	else if (!isfinite(c->optim.momentum) || !isfinite(c->optim.beta2) ||
		 !isfinite(c->optim.weight_decay) || !isfinite(c->optim.eps))
		bad = "a non-finite optimizer constant";
	for (uint64_t i = 0; !bad && i < c->nparams; i++)
		if (!isfinite(c->params[i]))
			bad = "a non-finite weight";
	for (uint64_t i = 0; !bad && i < nopt; i++)
		if (!isfinite(c->opt[i]))
			bad = "a non-finite optimizer value";
	if (bad) {
		fprintf(stderr, "fuzz_checkpoint: a checkpoint with %s loaded\n", bad);
		abort();
	}
}

static void load(const uint8_t *data, size_t size, struct loaded *l)
{
	memset(l, 0, sizeof *l);
	const char *path = fuzz_path(data, size);
	struct hn_checkpoint c;
	char err[HN_ERR_MAX] = "";
	if (!path)
		return;
	if (hn_checkpoint_load(path, &c, err) < 0) {
		if (!err[0]) {
			fprintf(stderr, "fuzz_checkpoint: refused without a message\n");
			abort();
		}
		return;
	}
	l->ok = 1;
	fuzz_accepted++;
	check_loaded(&c);
	l->nparams = c.nparams;
	l->params_hash = sprite_checksum(c.params, c.nparams * sizeof(float));
	l->opt_hash = sprite_checksum(
		c.opt, c.nparams * (size_t)hn_optim_state_per_param(c.optim.kind) * sizeof(float));
	hn_checkpoint_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loaded l;
	load(data, size, &l);
	if (size >= 16) { /* resealed: the trailing checksum made to match again */
		uint8_t *r = malloc(size);
		if (r) {
			memcpy(r, data, size);
			uint64_t sum = sprite_checksum(r, size - 8);
			memcpy(r + size - 8, &sum, 8);
			load(r, size, &l);
			free(r);
		}
	}
	return 0;
}

static int check(const struct fuzz_buf *seed, const uint8_t *data, size_t len, char *msg,
		 size_t cap)
{
	struct loaded a, b;
	load(seed->data, seed->len, &a);
	load(data, len, &b);
	if (!a.ok) {
		snprintf(msg, cap, "the seed does not load");
		return -1;
	}
	if (b.ok && (b.nparams != a.nparams || b.params_hash != a.params_hash ||
		     b.opt_hash != a.opt_hash)) {
		snprintf(msg, cap, "a damaged checkpoint loaded other weights");
		return -1;
	}
	return 0;
}

static int one(struct fuzz_buf *b, const char *name, enum hn_optim_kind kind, uint64_t np,
	       uint64_t batch_in_epoch, char *err)
{
	float *params = malloc(np * sizeof(float)), *opt = malloc(2 * np * sizeof(float));
	char path[] = "/tmp/fuzz_checkpoint.XXXXXX";
	int fd = mkstemp(path), rc = -1;
	if (fd >= 0)
		close(fd);
	if (params && opt && fd >= 0) {
		for (uint64_t i = 0; i < 2 * np; i++)
			opt[i] = (float)i / 3;
		for (uint64_t i = 0; i < np; i++)
			params[i] = (float)i - 5;
		struct hn_checkpoint c = {
			.in_c = 1,
			.in_h = 8,
			.in_w = 8,
			.nclasses = 3,
			.nparams = np,
			.optim = {.kind = kind, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f},
			.epoch = 1,
			.step = 10 + batch_in_epoch, /* 160 samples / 16 = 10 steps per epoch */
			.batch_in_epoch = batch_in_epoch,
			.ep_seen = batch_in_epoch * 16,
			.ep_correct = batch_in_epoch * 5,
			.ep_loss = 1.5 * (double)batch_in_epoch,
			.reason = batch_in_epoch ? HN_CKPT_SIGNAL : HN_CKPT_EPOCH_END,
			.seed = 3,
			.batch = 16,
			.accum = 1,
			.train_count = 160,
			.has_schedule = 1,
			.sched = 2,
			.lr = 0.05,
			.gamma = 0.1,
			.step_epochs = 5,
			.epochs = 4,
			.params = params,
			.opt = opt,
		};
		snprintf(c.spec, sizeof c.spec, "mlp");
		rc = hn_checkpoint_save(path, &c, err);
		if (rc >= 0)
			rc = fuzz_slurp(path, b);
		unlink(path);
	}
	free(params);
	free(opt);
	snprintf(b->name, sizeof b->name, "%s", name);
	return rc;
}

static int seeds(struct fuzz_buf **out, char *err)
{
	struct fuzz_buf *b = calloc(4, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	if (one(&b[0], "sgd.ckpt", HN_OPT_SGD, 5, 0, err) < 0 ||
	    one(&b[1], "momentum.ckpt", HN_OPT_MOMENTUM, 17, 0, err) < 0 ||
	    one(&b[2], "adam.ckpt", HN_OPT_ADAM, 9, 0, err) < 0 ||
	    one(&b[3], "mid-epoch.ckpt", HN_OPT_ADAM, 6, 4, err) < 0)
		return -1;
	return 4;
}

const struct fuzz_target fuzz_target = {"fuzz_checkpoint", seeds, check};
