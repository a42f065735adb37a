/*
 * image_util.h - what the image decoder tests (test_image.c, test_tiff.c)
 * share: a failure counter, the temporary folder, file helpers, the test
 * pattern, and the checks of a decoded image and of damaged copies of a file.
 */
#ifndef SPRITE_TEST_IMAGE_UTIL_H
#define SPRITE_TEST_IMAGE_UTIL_H

static int failures;
static char tmpdir[256];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	failures++;
}

static void tpath(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

static void write_all(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
	fclose(f);
}

/* The 8-bit value the test puts at (y, x, channel). */
static uint8_t pat(uint32_t y, uint32_t x, uint32_t ch)
{
	return (uint8_t)(x * 17 + y * 29 + ch * 71 + (x * y) % 13);
}

/* Alpha that varies, with fully opaque and fully clear pixels included. */
static uint8_t alpha_at(uint32_t y, uint32_t x)
{
	uint32_t v = (x * 31 + y * 7) % 300;
	return v > 255 ? 255 : (uint8_t)v;
}

static inline uint8_t over_black(unsigned v, unsigned a)
{
	return (uint8_t)((v * a + 127) / 255);
}

/* The same on white (--background white), written out again. */
static inline uint8_t over_white(unsigned v, unsigned a)
{
	return (uint8_t)((v * a + 255 * (255 - a) + 127) / 255);
}

static void check_image(const char *what, const struct sprite_image *im, const uint8_t *want,
			uint32_t h, uint32_t w, uint32_t c, int tol)
{
	if (im->h != h || im->w != w || im->c != c) {
		fail("%s: shape %ux%ux%u, want %ux%ux%u", what, im->h, im->w, im->c, h, w, c);
		return;
	}
	for (size_t i = 0; i < (size_t)h * w * c; i++) {
		int d = (int)im->px[i] - (int)want[i];
		if (d < -tol || d > tol) {
			fail("%s: pixel %zu (y %zu x %zu ch %zu) is %u, want %u", what, i,
			     i / c / w, i / c % w, i % c, im->px[i], want[i]);
			return;
		}
	}
}

/* Every truncation point and a few corruptions must give an error. */
static void check_damage(const char *what, const char *path, int lossy_tail_ok)
{
	size_t len;
	uint8_t *b = read_all(path, &len);
	if (!b) {
		fail("%s: cannot read back %s", what, path);
		return;
	}
	char dpath[512], err[SPRITE_ERR_MAX];
	tpath(dpath, sizeof dpath, "damaged");
	struct sprite_image im;
	/* Truncations: header only, one third, two thirds. */
	size_t cuts[] = {8, len / 3, 2 * len / 3};
	for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
		if (cuts[k] >= len)
			continue;
		write_all(dpath, b, cuts[k]);
		err[0] = 0;
		int r = sprite_image_load(dpath, &im, err);
		if (r == 0) {
			sprite_image_free(&im);
			if (!lossy_tail_ok)
				fail("%s: truncated to %zu of %zu bytes decodes without error",
				     what, cuts[k], len);
		} else if (!strstr(err, dpath)) {
			fail("%s: error '%s' does not name the file", what, err);
		}
	}
	/* Random bytes after the magic: must not crash (an error or, rarely, a
	 * decodable image are both fine for garbage). */
	uint8_t *g = malloc(len);
	memcpy(g, b, len);
	srand(7);
	for (size_t i = 8; i < len; i++)
		g[i] = (uint8_t)rand();
	write_all(dpath, g, len);
	if (sprite_image_load(dpath, &im, err) == 0)
		sprite_image_free(&im);
	/* Flipped bytes everywhere, one at a time in a stride. */
	for (size_t i = 0; i < len; i += len / 40 + 1) {
		memcpy(g, b, len);
		g[i] ^= 0xA5;
		write_all(dpath, g, len);
		if (sprite_image_load(dpath, &im, err) == 0)
			sprite_image_free(&im);
	}
	free(g);
	free(b);
}

/* Make the temporary folder (TMPDIR, else /tmp) named for the test. */
static int tmpdir_make(const char *name)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(tmpdir, sizeof tmpdir, "%s/%s.XXXXXX", base, name);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return -1;
	}
	return 0;
}

/* Remove it, and the verdict: main's exit status. */
static int tmpdir_finish(const char *name)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	if (failures) {
		fprintf(stderr, "%s: %d failures\n", name, failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

#endif
