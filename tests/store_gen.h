/*
 * store_gen.h - synthetic stores for the store tests (test_store.c,
 * test_store_damage.c): a shape, its tiles and labels as a function of the
 * sample index, written through the real writer; file helpers. The including
 * file defines `dir`, its temporary folder, first.
 */
#ifndef SPRITE_TEST_STORE_GEN_H
#define SPRITE_TEST_STORE_GEN_H

struct shape {
	uint32_t h, w, c, sheet;
	enum sprite_codec codec;
	uint64_t count[2]; /* train, test; 0 = no such split */
	int noisy; /* incompressible pixels: lz4 falls back to raw; 2: the first 5% of each tile
		      zero, so lz4 saves a little, less than SPRITE_LZ4_MIN_GAIN: raw too */
	uint32_t nclasses;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static void gen(const struct shape *sh, uint32_t split, uint64_t i, uint8_t *tile, uint16_t *lab)
{
	uint64_t key = mix(((uint64_t)split << 40) ^ i);
	size_t n = (size_t)sh->h * sh->w * sh->c;
	for (size_t k = 0; k < n; k++)
		tile[k] = sh->noisy == 2 && k < n / 20 ? 0
			  : sh->noisy		       ? (uint8_t)mix(key + k)
						       : (uint8_t)((key >> 8) + k / 7);
	*lab = (uint16_t)(key % sh->nclasses);
}

/* The path written for a sample: none for train's first three (""). */
static void want_path(uint32_t split, uint64_t i, char *out)
{
	if (split == 0 && i < 3)
		out[0] = 0;
	else if (split == 1 && i == 5) /* a control byte is stored as '?' */
		strcpy(out, "test/a\nb.png");
	else
		snprintf(out, 64, "%s/c/%llu.png", split ? "test" : "train", (unsigned long long)i);
}

static int write_store(const char *path, const struct shape *sh)
{
	char err[SPRITE_ERR_MAX];
	const char *names[] = {"t-shirt", "trouser", "pullover", "dress", "coat",
			       "sandal",  "shirt",   "sneaker",	 "bag",	  "ankle boot"};
	struct sprite_writer_params p = {"unit",
					 sh->h,
					 sh->w,
					 sh->c,
					 sh->sheet,
					 sh->codec,
					 sh->nclasses,
					 sh->nclasses <= 10 ? names : NULL,
					 0,
					 0,
					 SPRITE_FIT_STRETCH,
					 0};
	sprite_writer *w;
	int r = sprite_writer_open(path, &p, &w, err);
	if (r < 0) {
		fprintf(stderr, "writer_open: %s\n", err);
		return r;
	}
	uint8_t *tile = malloc((size_t)sh->h * sh->w * sh->c);
	static const char *splits[2] = {"train", "test"};
	for (uint32_t s = 0; s < 2 && r >= 0; s++) {
		if (!sh->count[s])
			continue;
		r = sprite_writer_begin_split(w, splits[s]);
		for (uint64_t i = 0; i < sh->count[s] && r >= 0; i++) {
			uint16_t lab;
			gen(sh, s, i, tile, &lab);
			char pb[64];
			want_path(s, i, pb);
			r = sprite_writer_add_path(w, tile, lab, s == 0 && i < 3 ? NULL : pb);
		}
	}
	free(tile);
	if (r < 0) {
		sprite_writer_abort(w);
		return r;
	}
	r = sprite_writer_finish(w, err);
	if (r < 0)
		fprintf(stderr, "writer_finish: %s\n", err);
	return r;
}

static void *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	fstat(fd, &st);
	void *p = malloc((size_t)st.st_size + 1);
	*len = (size_t)st.st_size;
	if (pread(fd, p, *len, 0) != (ssize_t)*len)
		abort();
	close(fd);
	return p;
}

static void spit(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, p, len) != (ssize_t)len)
		abort();
	close(fd);
}

#endif
