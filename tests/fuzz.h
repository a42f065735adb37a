/*
 * fuzz.h - fuzz targets for every parser of outside bytes: the store, batch
 * files, images (TIFF, PNG, JPEG), IDX files, hntrain checkpoints, and the
 * .npy headers and dataset.json that hntrain reads from a mount.
 *
 * Each target (tests/fuzz_<name>.c) defines LLVMFuzzerTestOneInput(), so the
 * same file builds into a libFuzzer binary (`./run fuzz`, clang) and, linked
 * with tests/fuzz_main.c, into a plain program that the test suite runs:
 * it builds valid inputs (fuzz_seeds), mutates them deterministically from
 * a seed, and feeds each mutant to the target, under ASan/UBSan in the
 * sanitizer pass. Where a target knows what must hold between a valid input
 * and any mutant of it, fuzz_check says so: for the store, a sheet decoded
 * from a damaged file is either refused or exactly the original sheet.
 */
#ifndef SPRITE_FUZZ_H
#define SPRITE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_buf {
	uint8_t *data;
	size_t len;
	char name[64]; /* for messages and seed file names */
};

struct fuzz_target {
	const char *name;
	/* Build valid inputs into *out (malloc'd array, each data malloc'd). >= 0 count or -errno.
	 */
	int (*seeds)(struct fuzz_buf **out, char *err);
	/* Optional: what must hold for a mutant of seed. 0, or -1 with msg set. */
	int (*check)(const struct fuzz_buf *seed, const uint8_t *data, size_t len, char *msg,
		     size_t cap);
};
extern const struct fuzz_target fuzz_target;

/* Inputs a target accepted (parsed, opened, decoded): the driver reports it. */
extern unsigned long fuzz_accepted;
/* Where targets sum what they read, so that no read is optimized away. */
extern volatile uint64_t fuzz_sink;

/*
 * For parsers that take a path: data written to an anonymous memory file,
 * and "/proc/self/fd/N" naming it (the same file each call). NULL on error.
 */
const char *fuzz_path(const uint8_t *data, size_t len);

/* Read a whole file (seed builders write through the real writers). */
int fuzz_slurp(const char *path, struct fuzz_buf *b);

#endif
