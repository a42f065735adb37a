/*
 * fuzz_checkpoint.c - fuzz target: hntrain checkpoints (trainer/checkpoint.c),
 * read by --resume. Against its valid seed, a damaged checkpoint is refused
 * or loads the seed's very parameters and optimizer state (the file is
 * checksummed whole).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/fuzz.h"
#include "trainer/app.h"

struct loaded {
	int ok;
	uint64_t nparams, params_hash, opt_hash;
};

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
	       char *err)
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
			.step = 10,
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
	struct fuzz_buf *b = calloc(3, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	if (one(&b[0], "sgd.ckpt", HN_OPT_SGD, 5, err) < 0 ||
	    one(&b[1], "momentum.ckpt", HN_OPT_MOMENTUM, 17, err) < 0 ||
	    one(&b[2], "adam.ckpt", HN_OPT_ADAM, 9, err) < 0)
		return -1;
	return 3;
}

const struct fuzz_target fuzz_target = {"fuzz_checkpoint", seeds, check};
