/*
 * fuzz_main.c - the plain driver for a fuzz target (tests/fuzz.h), used by
 * the test suite where libFuzzer is not linked in.
 *
 *   fuzz_X [--iters N] [--seed S]   mutate the target's valid inputs N times
 *   fuzz_X --write-seeds DIR        write the valid inputs (a libFuzzer corpus)
 *   fuzz_X FILE...                  run the target on each file (a crash found
 *                                   by libFuzzer, replayed)
 *
 * Mutations are a deterministic function of (seed, iteration), so a failure
 * prints the iteration and can be run again alone. They favour the places
 * parsers care about: the first 512 and the last 4096 bytes (headers,
 * indexes, trailers), aligned words set to edge values (0, 1, -1, 2^31,
 * the input's length), truncation, growth and moved chunks. Exit 0 when
 * every input was handled and every check held, 1 otherwise; a memory
 * error is for the sanitizers to catch.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tests/fuzz.h"

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t below(uint64_t *s, size_t n)
{
	return n ? (size_t)(splitmix(s) % n) : 0;
}

/* A position in [0, len): often in the head or the tail, where the structure is. */
static size_t pick_pos(uint64_t *s, size_t len)
{
	switch (below(s, 4)) {
	case 0:
	case 1:
		return below(s, len < 512 ? len : 512);
	case 2:
		return len > 4096 ? len - 4096 + below(s, 4096) : below(s, len);
	default:
		return below(s, len);
	}
}

/* Mutate b (len bytes, room for cap) in place; returns the new length. */
static size_t mutate(uint64_t *s, uint8_t *b, size_t len, size_t cap)
{
	static const uint32_t edge32[] = {0,	       1,	    2,		0x7f,	 0x80,
					  0xff,	       0x100,	    0xffff,	0x10000, 0x7fffffff,
					  0x80000000u, 0xfffffffeu, 0xffffffffu};
	int n = 1 + (int)below(s, 4);
	for (int k = 0; k < n && len; k++) {
		size_t p = pick_pos(s, len);
		switch (below(s, 9)) {
		case 0: /* one bit */
			b[p] ^= (uint8_t)(1u << below(s, 8));
			break;
		case 1: /* one byte */
			b[p] = (uint8_t)splitmix(s);
			break;
		case 2:	  /* an aligned 32-bit word set to an edge value */
		case 3: { /* (twice as likely: counts and sizes are words) */
			size_t q = p & ~(size_t)3;
			if (q + 4 > len)
				break;
			uint32_t v = below(s, 4) == 0 ? (uint32_t)len
						      : edge32[below(s, sizeof edge32 / 4)];
			memcpy(b + q, &v, 4);
			break;
		}
		case 4: { /* an aligned 64-bit word: offsets */
			size_t q = p & ~(size_t)7;
			if (q + 8 > len)
				break;
			uint64_t v = below(s, 2) ? (uint64_t)len + below(s, 64) - 32
						 : ~(uint64_t)0 >> below(s, 64);
			memcpy(b + q, &v, 8);
			break;
		}
		case 5: /* truncate */
			len = pick_pos(s, len);
			break;
		case 6: { /* grow by up to 64 random bytes */
			size_t add = 1 + below(s, 64);
			if (len + add > cap)
				add = cap - len;
			for (size_t i = 0; i < add; i++)
				b[len + i] = (uint8_t)splitmix(s);
			len += add;
			break;
		}
		case 7: { /* copy a chunk over another place */
			size_t from = below(s, len), n2 = 1 + below(s, 256);
			if (from + n2 > len)
				n2 = len - from;
			if (p + n2 > len)
				n2 = len - p;
			memmove(b + p, b + from, n2);
			break;
		}
		default: { /* delete a chunk */
			size_t n2 = 1 + below(s, 64);
			if (p + n2 > len)
				n2 = len - p;
			memmove(b + p, b + p + n2, len - p - n2);
			len -= n2;
			break;
		}
		}
	}
	return len;
}

static int write_seeds(const struct fuzz_buf *seeds, int n, const char *dir)
{
	if (sprite_mkdir_p(dir) < 0) {
		fprintf(stderr, "%s: cannot create %s\n", fuzz_target.name, dir);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(seeds[i].data, 1, seeds[i].len, f) != seeds[i].len) {
			fprintf(stderr, "%s: cannot write %s\n", fuzz_target.name, path);
			if (f)
				fclose(f);
			return 1;
		}
		fclose(f);
	}
	printf("%s: %d seeds in %s\n", fuzz_target.name, n, dir);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t iters = 2000, seed = 1;
	const char *seed_dir = NULL;
	int first_file = argc;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--write-seeds") && i + 1 < argc)
			seed_dir = argv[++i];
		else if (argv[i][0] == '-') {
			fprintf(stderr,
				"usage: %s [--iters N] [--seed S] | --write-seeds DIR | FILE...\n",
				argv[0]);
			return 2;
		} else {
			first_file = i;
			break;
		}
	}
	if (first_file < argc) { /* replay files */
		for (int i = first_file; i < argc; i++) {
			struct fuzz_buf b;
			int rc = fuzz_slurp(argv[i], &b);
			if (rc < 0) {
				fprintf(stderr, "%s: %s\n", argv[i], strerror(-rc));
				return 1;
			}
			LLVMFuzzerTestOneInput(b.data, b.len);
			printf("%s: %zu bytes: handled\n", argv[i], b.len);
			free(b.data);
		}
		return 0;
	}

	char err[512] = "";
	struct fuzz_buf *seeds = NULL;
	int nseeds = fuzz_target.seeds(&seeds, err);
	if (nseeds <= 0) {
		fprintf(stderr, "%s: no seeds: %s\n", fuzz_target.name, err);
		return 1;
	}
	if (seed_dir)
		return write_seeds(seeds, nseeds, seed_dir);

	size_t maxlen = 0;
	for (int i = 0; i < nseeds; i++) {
		/* Every seed itself must pass, and hold against itself. */
		LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].len);
		if (seeds[i].len > maxlen)
			maxlen = seeds[i].len;
	}
	size_t cap = maxlen + 64 * 4;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return 1;
	int failed = 0;
	double t0 = sprite_now();
	fuzz_accepted = 0;
	for (uint64_t it = 0; it < iters; it++) {
		uint64_t s = seed * 0x100000001b3ull + it;
		const struct fuzz_buf *sd = &seeds[below(&s, (size_t)nseeds)];
		memcpy(buf, sd->data, sd->len);
		size_t len = mutate(&s, buf, sd->len, cap);
		LLVMFuzzerTestOneInput(buf, len);
		char msg[512] = "";
		unsigned long accepted = fuzz_accepted; /* check() runs the target again */
		int bad = fuzz_target.check && fuzz_target.check(sd, buf, len, msg, sizeof msg) < 0;
		fuzz_accepted = accepted;
		if (bad) {
			fprintf(stderr,
				"FAIL %s: seed %" PRIu64 " iteration %" PRIu64
				" (from %s, %zu -> %zu "
				"bytes): %s\n",
				fuzz_target.name, seed, it, sd->name, sd->len, len, msg);
			if (++failed >= 10)
				break;
		}
	}
	printf("%s: %d seeds, %" PRIu64 " mutants in %.2f s, %lu inputs accepted, %d check "
	       "failures\n",
	       fuzz_target.name, nseeds, iters, sprite_now() - t0, fuzz_accepted, failed);
	for (int i = 0; i < nseeds; i++)
		free(seeds[i].data);
	free(seeds);
	free(buf);
	return failed ? 1 : 0;
}
