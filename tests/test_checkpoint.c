/*
 * test_checkpoint.c - hntrain's checkpoint file, read back field by field:
 * a version-3 file keeps the schedule and the position inside an epoch; a
 * version-2 file (no position) and a version-1 file (no schedule) still
 * load; a future version, a flipped byte and a short file are refused with
 * a message that names the file and the problem. So is a file resealed
 * (its checksum computed again, as the format does) over a bad field: each
 * count and index out of range (accum 0 would divide by zero), counts that
 * disagree (the steps with the epochs and the position), and a NaN or
 * infinite weight, optimizer value or header float, named by field.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/check.h"
#include "trainer/checkpoint.h"

enum { NP = 37, HDR = 640, OLD_HDR = 512 };

static char dir[] = "/tmp/test_checkpoint.XXXXXX";

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	uint8_t *b = malloc(*len);
	if (b && fread(b, 1, *len, f) != *len) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

/* Write b (len bytes) to path, with the trailing checksum made valid again. */
static void spit_resummed(const char *path, uint8_t *b, size_t len)
{
	uint64_t sum = sprite_checksum(b, len - 8);
	memcpy(b + len - 8, &sum, 8);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, len, f) != len)
		FAIL("cannot write %s", path);
	if (f)
		fclose(f);
}

static void put_u32(uint8_t *b, size_t off, uint32_t v)
{
	memcpy(b + off, &v, 4);
}
static void put_f64(uint8_t *b, size_t off, double v)
{
	memcpy(b + off, &v, 8);
}
static void put_u64(uint8_t *b, size_t off, uint64_t v)
{
	memcpy(b + off, &v, 8);
}
static void put_f32(uint8_t *b, size_t off, float v)
{
	memcpy(b + off, &v, 4);
}

/*
 * The version-3 file orig (len bytes) as an older version writes it: no
 * position block (bytes 512..639), header_size 512. Returns its length.
 */
static size_t to_old(uint8_t *b, const uint8_t *orig, size_t len, uint32_t version)
{
	memcpy(b, orig, OLD_HDR);
	memcpy(b + OLD_HDR, orig + HDR, len - HDR);
	put_u32(b, 8, version);
	put_u32(b, 12, OLD_HDR);
	return len - (HDR - OLD_HDR);
}

/* Loading path must fail, and its message name the file and contain words. */
static void expect_refused(const char *what, const char *path, const char *words)
{
	struct hn_checkpoint c;
	char err[HN_ERR_MAX] = "";
	int rc = hn_checkpoint_load(path, &c, err);
	CHECK(rc < 0, "%s: loaded", what);
	CHECK(strstr(err, path) != NULL, "%s: message does not name the file: %s", what, err);
	CHECK(strstr(err, words) != NULL, "%s: message lacks \"%s\": %s", what, words, err);
	if (rc >= 0)
		hn_checkpoint_free(&c);
	else
		printf("%s: %s\n", what, err);
}

/* orig with a field changed and the checksum made valid again must be refused. */
static void expect_resealed_refused(const char *what, const uint8_t *orig, size_t len, uint8_t *b,
				    const char *path, size_t off, const void *v, size_t vlen,
				    const char *words)
{
	memcpy(b, orig, len);
	memcpy(b + off, v, vlen);
	spit_resummed(path, b, len);
	expect_refused(what, path, words);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char path[256], bad[256];
	snprintf(path, sizeof path, "%s/a.ckpt", dir);
	snprintf(bad, sizeof bad, "%s/b.ckpt", dir);

	float params[NP], opt[2 * NP];
	for (int i = 0; i < NP; i++)
		params[i] = (float)i * 0.25f - 3;
	for (int i = 0; i < 2 * NP; i++)
		opt[i] = (float)i / 7;
	struct hn_checkpoint w = {
		.in_c = 1,
		.in_h = 12,
		.in_w = 12,
		.nclasses = 4,
		.nparams = NP,
		.optim = {.kind = HN_OPT_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
		.epoch = 2,
		.step = 16, /* 500 samples / 32 = 16 batches, / accum 2 = 8 steps per epoch */
		.seed = 11,
		.batch = 32,
		.accum = 2,
		.window = 0,
		.train_count = 500,
		.has_schedule = 1,
		.sched = 1,
		.lr = 0.003,
		.gamma = 0.5,
		.step_epochs = 3,
		.warmup = 5,
		.epochs = 9,
		.params = params,
		.opt = opt,
	};
	snprintf(w.spec, sizeof w.spec, "c8k3-r-m2-d32-r");
	char err[HN_ERR_MAX] = "";
	CHECK(hn_checkpoint_save(path, &w, err) == 0, "save: %s", err);

	struct hn_checkpoint r;
	CHECK(hn_checkpoint_load(path, &r, err) == 0, "load: %s", err);
	CHECK(!strcmp(r.spec, w.spec), "spec %s", r.spec);
	CHECK(r.nparams == NP && r.epoch == 2 && r.step == 16 && r.seed == 11 && r.batch == 32 &&
		      r.accum == 2 && r.train_count == 500,
	      "counters differ");
	CHECK(r.optim.kind == HN_OPT_ADAM && r.optim.beta2 == 0.999f, "optimizer differs");
	CHECK(r.has_schedule == 1 && r.sched == 1 && r.lr == 0.003 && r.gamma == 0.5 &&
		      r.step_epochs == 3 && r.warmup == 5 && r.epochs == 9,
	      "schedule differs: has %d kind %u lr %g gamma %g step %llu warmup %llu epochs %llu",
	      r.has_schedule, r.sched, r.lr, r.gamma, (unsigned long long)r.step_epochs,
	      (unsigned long long)r.warmup, (unsigned long long)r.epochs);
	CHECK(!memcmp(r.params, params, sizeof params), "parameters differ");
	CHECK(!memcmp(r.opt, opt, sizeof opt), "optimizer state differs");
	hn_checkpoint_free(&r);

	size_t len = 0;
	uint8_t *orig = slurp(path, &len);
	CHECK(orig && len == HDR + 3 * NP * 4 + 8, "file is %zu bytes", len);
	if (!orig)
		return 1;
	uint8_t *b = malloc(len);

	CHECK(r.batch_in_epoch == 0 && r.reason == HN_CKPT_EPOCH_END, "an epoch's end: position");

	/* Version 2: no position block; it loads as an epoch's end. */
	size_t olen = to_old(b, orig, len, 2);
	spit_resummed(bad, b, olen);
	CHECK(hn_checkpoint_load(bad, &r, err) == 0, "version 2: %s", err);
	CHECK(r.has_schedule == 1 && r.epoch == 2 && r.step == 16 && r.batch_in_epoch == 0 &&
		      r.lr == 0.003,
	      "version 2 differs");
	CHECK(!memcmp(r.params, params, sizeof params), "version 2: parameters differ");
	CHECK(!memcmp(r.opt, opt, sizeof opt), "version 2: optimizer state differs");
	hn_checkpoint_free(&r);

	/* Version 1: the same header without the schedule (bytes 376..423 zero). */
	to_old(b, orig, len, 1);
	memset(b + 376, 0, 48);
	spit_resummed(bad, b, olen);
	CHECK(hn_checkpoint_load(bad, &r, err) == 0, "version 1: %s", err);
	CHECK(r.has_schedule == 0 && r.epoch == 2 && r.step == 16, "version 1: has_schedule %d",
	      r.has_schedule);
	CHECK(!memcmp(r.params, params, sizeof params), "version 1: parameters differ");
	hn_checkpoint_free(&r);
	/* An old version with a position block (header_size 640) is not one hntrain wrote. */
	memcpy(b, orig, len);
	put_u32(b, 8, 2);
	spit_resummed(bad, b, len);
	expect_refused("version 2 of 640 bytes", bad, "version 2");

	memcpy(b, orig, len);
	put_u32(b, 8, 4);
	spit_resummed(bad, b, len);
	expect_refused("version 4", bad, "version 4");

	/* Inside epoch 3: 6 of its 16 batches (3 steps) trained, with its sums so far. */
	struct hn_checkpoint mid = w;
	mid.batch_in_epoch = 6;
	mid.step = 16 + 3;
	mid.ep_seen = 190; /* 192 planned, 2 images that did not decode */
	mid.ep_correct = 77;
	mid.ep_loss = 201.5;
	mid.reason = HN_CKPT_SIGNAL;
	CHECK(hn_checkpoint_save(bad, &mid, err) == 0, "save inside an epoch: %s", err);
	CHECK(hn_checkpoint_load(bad, &r, err) == 0, "load inside an epoch: %s", err);
	CHECK(r.epoch == 2 && r.step == 19 && r.batch_in_epoch == 6 && r.ep_seen == 190 &&
		      r.ep_correct == 77 && r.ep_loss == 201.5 && r.reason == HN_CKPT_SIGNAL,
	      "position differs: batch %llu step %llu", (unsigned long long)r.batch_in_epoch,
	      (unsigned long long)r.step);
	hn_checkpoint_free(&r);
	uint8_t *mb = slurp(bad, &len);
	CHECK(mb && len == HDR + 3 * NP * 4 + 8, "mid file is %zu bytes", len);
	if (!mb)
		return 1;

	/* Resealed over bad fields: refused by name. Offsets as docs/HNTRAIN.md has them. */
	struct {
		const char *what;
		size_t off, len;
		uint64_t v;
		const char *words;
	} ints[] = {
		{"accum 0", 348, 4, 0, "accum is 0"},
		{"accum 70000", 348, 4, 70000, "accum is 70000"},
		{"batch 0", 344, 4, 0, "batch is 0"},
		{"nclasses 0", 284, 4, 0, "nclasses is 0"},
		{"in_c 0", 272, 4, 0, "in_c is 0"},
		{"nranks 100000", 440, 4, 100000, "nranks is 100000"},
		{"train_count 2^40", 360, 8, 1ull << 40, "train_count is"},
		{"train_count 0", 360, 8, 0, "train_count is 0"},
		{"epoch 2^60", 320, 8, 1ull << 60, "epoch is"},
		{"step beyond the epoch", 328, 8, 25, "step is 25"},
		{"window 2^31", 352, 4, 1u << 31, "window is"},
		{"warmup 2^40", 408, 8, 1ull << 40, "warmup is"},
		{"batch_in_epoch beyond the epoch", 512, 8, 17, "batch_in_epoch is 17"},
		{"batch_in_epoch inside a group", 512, 8, 5, "inside a group of --accum 2"},
		{"global_batch", 528, 8, 64, "global_batch is 64"},
		{"samples_in_epoch", 520, 8, 1000, "samples_in_epoch is 1000"},
		{"ep_seen", 536, 8, 193, "ep_seen is 193"},
		{"ep_correct above ep_seen", 544, 8, 191, "ep_correct is 191"},
		{"reason 9", 560, 4, 9, "reason is 9"},
	};
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
		expect_resealed_refused(ints[i].what, mb, len, b, bad, ints[i].off, &ints[i].v,
					ints[i].len, ints[i].words);
	float fnan = NAN, finf = INFINITY, fneg = -1;
	double dnan = NAN;
	expect_resealed_refused("a NaN weight", mb, len, b, bad, HDR + 5 * 4, &fnan, 4,
				"params[5] is nan");
	expect_resealed_refused("an infinite weight", mb, len, b, bad, HDR + 36 * 4, &finf, 4,
				"params[36] is inf");
	expect_resealed_refused("a NaN in adam's m", mb, len, b, bad, HDR + (NP + 2) * 4, &fnan, 4,
				"adam_m[2] is nan");
	expect_resealed_refused("a negative adam v", mb, len, b, bad, HDR + (2 * NP + 3) * 4, &fneg,
				4, "adam_v[3] is -1, expected a finite non-negative");
	expect_resealed_refused("a NaN beta2", mb, len, b, bad, 308, &fnan, 4, "beta2 is nan");
	expect_resealed_refused("a NaN momentum", mb, len, b, bad, 300, &fnan, 4,
				"momentum is nan");
	expect_resealed_refused("an infinite weight decay", mb, len, b, bad, 316, &finf, 4,
				"weight_decay is inf");
	expect_resealed_refused("a NaN epoch loss", mb, len, b, bad, 552, &dnan, 8,
				"ep_loss is nan");
	expect_resealed_refused("a NaN gamma", mb, len, b, bad, 384, &dnan, 8,
				"corrupt checkpoint header");
	/* The last epoch done with a position inside the next, beyond the run. */
	memcpy(b, mb, len);
	put_u64(b, 392, 2); /* epochs planned: 2, done: 2, and 6 batches of a third */
	spit_resummed(bad, b, len);
	expect_refused("a position beyond the run", bad, "beyond the run's 2 epochs");
	/* A momentum checkpoint's buffer is checked too. */
	struct hn_checkpoint mom = w;
	mom.optim.kind = HN_OPT_MOMENTUM;
	mom.optim.momentum = 0.9f;
	CHECK(hn_checkpoint_save(bad, &mom, err) == 0, "save momentum: %s", err);
	size_t mlen = 0;
	uint8_t *mo = slurp(bad, &mlen);
	if (mo && mlen == HDR + 2 * NP * 4 + 8) {
		put_f32(mo, HDR + (NP + 7) * 4, NAN);
		spit_resummed(bad, mo, mlen);
		expect_refused("a NaN in the momentum buffer", bad, "momentum_buffer[7] is nan");
	} else
		CHECK(0, "momentum file is %zu bytes", mlen);
	free(mo);
	free(mb);

	memcpy(b, orig, len);
	put_f64(b, 376, -1); /* lr */
	spit_resummed(bad, b, len);
	expect_refused("negative lr", bad, "corrupt checkpoint header");

	memcpy(b, orig, len);
	put_u32(b, 416, 7); /* schedule kind */
	spit_resummed(bad, b, len);
	expect_refused("schedule kind 7", bad, "corrupt checkpoint header");

	memcpy(b, orig, len);
	uint64_t one = 1; /* planned epochs below the epochs done */
	memcpy(b + 392, &one, 8);
	spit_resummed(bad, b, len);
	expect_refused("epochs below done", bad, "corrupt checkpoint header");

	memcpy(b, orig, len);
	b[400] ^= 0x10; /* no new checksum */
	FILE *f = fopen(bad, "wb");
	if (f) {
		fwrite(b, 1, len, f);
		fclose(f);
	}
	expect_refused("flipped byte", bad, "checksum mismatch");

	f = fopen(bad, "wb");
	if (f) {
		fwrite(orig, 1, len - 4, f);
		fclose(f);
	}
	expect_refused("4 bytes short", bad, "truncated");

	free(b);
	free(orig);
	unlink(path);
	unlink(bad);
	rmdir(dir);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	else
		printf("PASS\n");
	return failures ? 1 : 0;
}
