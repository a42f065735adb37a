/*
 * mkstore - write a synthetic sprite store for tests and benchmarks.
 *
 *   mkstore OUT [--count-train N] [--count-test M] [--tile HxWxC] [--sheet S]
 *               [--classes K] [--codec lz4|none] [--seed X] [--name NAME]
 *               [--class-names FILE] [--version 1|2|3] [--paths]
 *
 * --version writes an older store format (tests of readers of those);
 * --paths gives each sample the path "<split>/<class>/<i>.png" in the path
 * table, as a pack of such a folder would.
 *
 * Class names are class0, class1, ... or FILE's lines, one per class.
 * Pixels and labels come from the shared splitmix64 generator (perm.h), one
 * stream per sample seeded from (seed, split, index), so the output is
 * byte-identical for the same arguments. Each class draws oriented stripes
 * with its own angle, frequency and tint, plus mild noise, inside an ellipse on
 * a black background: compressible enough for lz4 to gain something (as on
 * Fashion-MNIST), and structured enough that a small model learns the
 * classes in an epoch or two.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/perm.h"
#include "common/store.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: mkstore OUT [--count-train N] [--count-test M] [--tile HxWxC] "
		"[--sheet S] [--window N|full] [--classes K] [--codec lz4|none] [--seed X] [--name NAME] "
		"[--class-names FILE] [--version 1|2|3] [--paths]\n");
	exit(2);
}

static unsigned long long num(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end) {
		fprintf(stderr, "mkstore: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

static void make_tile(uint64_t seed, uint32_t split, uint64_t i, uint32_t nclasses, uint32_t h,
		      uint32_t w, uint32_t c, uint8_t *tile, uint16_t *label)
{
	struct sprite_rng r;
	sprite_rng_init(&r, seed ^ ((uint64_t)split << 56), i);
	uint32_t lab = (uint32_t)sprite_rng_below(&r, nclasses);
	float ang = 3.14159265f * (float)lab / (float)nclasses;
	float freq = 1.5f + (float)(lab % 4);
	float phase = 6.2831853f * sprite_rng_uniform(&r);
	float ca = cosf(ang), sa = sinf(ang);
	float amp = 60.0f + 30.0f * sprite_rng_uniform(&r);
	/* the object: an ellipse on a black background, as in Fashion-MNIST */
	float rx = 0.30f + 0.15f * sprite_rng_uniform(&r),
	      ry = 0.30f + 0.15f * sprite_rng_uniform(&r);

	for (uint32_t y = 0; y < h; y++) {
		for (uint32_t x = 0; x < w; x++) {
			float u = (float)x / (float)w, v = (float)y / (float)h;
			float dx = (u - 0.5f) / rx, dy = (v - 0.5f) / ry;
			if (dx * dx + dy * dy > 1.0f) {
				memset(tile + ((size_t)y * w + x) * c, 0, c);
				continue;
			}
			float s = sinf(6.2831853f * freq * (u * ca + v * sa) + phase);
			for (uint32_t ch = 0; ch < c; ch++) {
				float tint = (float)((lab * 37 + ch * 53) % 64) - 32.0f;
				float noise = (float)(sprite_rng_next(&r) >> 61) - 4.0f;
				float val = 128.0f + amp * s + tint + noise;
				val = val < 0 ? 0 : val > 255 ? 255 : val;
				tile[((size_t)y * w + x) * c + ch] = (uint8_t)val;
			}
		}
	}
	*label = (uint16_t)lab;
}

int main(int argc, char **argv)
{
	const char *out = NULL, *name = "synthetic", *names_file = NULL;
	unsigned long long ntrain = 1000, ntest = 200, seed = 1;
	unsigned th = 28, tw = 28, tc = 1, sheet = 0, classes = 10, window = 0, version = 0;
	int paths = 0;
	enum sprite_codec codec = SPRITE_CODEC_LZ4;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-') {
			if (out)
				usage();
			out = a;
			continue;
		}
		if (!strcmp(a, "--paths")) {
			paths = 1;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (!strcmp(a, "--count-train"))
			ntrain = num(v);
		else if (!strcmp(a, "--count-test"))
			ntest = num(v);
		else if (!strcmp(a, "--seed"))
			seed = num(v);
		else if (!strcmp(a, "--sheet"))
			sheet = (unsigned)num(v);
		else if (!strcmp(a, "--window"))
			window = !strcmp(v, "full") ? SPRITE_ORDER_FULL : (unsigned)num(v);
		else if (!strcmp(a, "--version"))
			version = (unsigned)num(v);
		else if (!strcmp(a, "--classes"))
			classes = (unsigned)num(v);
		else if (!strcmp(a, "--name"))
			name = v;
		else if (!strcmp(a, "--class-names"))
			names_file = v;
		else if (!strcmp(a, "--codec")) {
			if (!strcmp(v, "lz4"))
				codec = SPRITE_CODEC_LZ4;
			else if (!strcmp(v, "none") || !strcmp(v, "raw"))
				codec = SPRITE_CODEC_RAW;
			else
				usage();
		} else if (!strcmp(a, "--tile")) {
			tc = 1;
			if (sscanf(v, "%ux%ux%u", &th, &tw, &tc) < 2)
				usage();
		} else
			usage();
	}
	if (!out || classes == 0 || classes > 65535)
		usage();

	char err[SPRITE_ERR_MAX];
	char **names = calloc(classes, sizeof(*names));
	FILE *nf = names_file ? fopen(names_file, "r") : NULL;
	if (names_file && !nf) {
		perror(names_file);
		return 1;
	}
	for (unsigned k = 0; k < classes; k++) {
		char line[512];
		if (nf && fgets(line, sizeof line, nf)) {
			line[strcspn(line, "\n")] = 0;
			names[k] = strdup(line);
		} else {
			names[k] = malloc(16);
			snprintf(names[k], 16, "class%u", k);
		}
	}
	if (nf)
		fclose(nf);
	struct sprite_writer_params p = {
		.name = name,
		.tile_h = th,
		.tile_w = tw,
		.tile_c = tc,
		.sheet_tiles = sheet,
		.order_window = window,
		.codec = codec,
		.nclasses = classes,
		.class_names = (const char *const *)names,
		.version = version,
	};
	sprite_writer *w;
	int r = sprite_writer_open(out, &p, &w, err);
	if (r < 0) {
		fprintf(stderr, "mkstore: %s: %s\n", out, err);
		return 1;
	}
	uint8_t *tile = malloc((size_t)th * tw * tc);
	const char *split_names[2] = {"train", "test"};
	unsigned long long counts[2] = {ntrain, ntest};
	for (uint32_t s = 0; s < 2 && r >= 0; s++) {
		if (counts[s] == 0)
			continue;
		r = sprite_writer_begin_split(w, split_names[s]);
		for (unsigned long long i = 0; i < counts[s] && r >= 0; i++) {
			uint16_t lab;
			make_tile(seed, s, i, classes, th, tw, tc, tile, &lab);
			char where[600];
			snprintf(where, sizeof where, "%s/%s/%llu.png", split_names[s], names[lab],
				 i);
			r = sprite_writer_add_path(w, tile, lab, paths ? where : NULL);
		}
	}
	if (r < 0) {
		fprintf(stderr, "mkstore: %s: %s\n", out, strerror(-r));
		sprite_writer_abort(w);
		return 1;
	}
	r = sprite_writer_finish(w, err);
	if (r < 0) {
		fprintf(stderr, "mkstore: %s: %s\n", out, err);
		return 1;
	}
	free(tile);
	for (unsigned k = 0; k < classes; k++)
		free(names[k]);
	free(names);
	return 0;
}
