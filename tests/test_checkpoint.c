/*
 * test_checkpoint.c - hntrain's checkpoint file, read back field by field:
 * a version-2 file keeps the schedule; a version-1 file (no schedule) still
 * loads, with has_schedule 0; a future version, a schedule field out of
 * range, a flipped byte and a short file are refused with a message that
 * names the file and the problem.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/check.h"
#include "trainer/app.h"

enum { NP = 37, HDR = 512 };

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
		.step = 40,
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
	CHECK(r.nparams == NP && r.epoch == 2 && r.step == 40 && r.seed == 11 && r.batch == 32 &&
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

	/* Version 1: the same header without the schedule (bytes 376..423 zero). */
	memcpy(b, orig, len);
	put_u32(b, 8, 1);
	memset(b + 376, 0, 48);
	spit_resummed(bad, b, len);
	CHECK(hn_checkpoint_load(bad, &r, err) == 0, "version 1: %s", err);
	CHECK(r.has_schedule == 0 && r.epoch == 2 && r.step == 40, "version 1: has_schedule %d",
	      r.has_schedule);
	CHECK(!memcmp(r.params, params, sizeof params), "version 1: parameters differ");
	hn_checkpoint_free(&r);

	memcpy(b, orig, len);
	put_u32(b, 8, 3);
	spit_resummed(bad, b, len);
	expect_refused("version 3", bad, "version 3");

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
