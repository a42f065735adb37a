/*
 * fuzz_util.c - helpers shared by the fuzz targets, in the libFuzzer build
 * and the plain one: a memory file for parsers that take a path, and whole
 * file reads for the seed builders.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/fuzz.h"

unsigned long fuzz_accepted;
volatile uint64_t fuzz_sink;

const char *fuzz_path(const uint8_t *data, size_t len)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("fuzz-input", MFD_CLOEXEC);
		if (fd < 0)
			return NULL;
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)len) < 0 ||
	    (len && sprite_pwrite_full(fd, data, len, 0) < 0))
		return NULL;
	return path;
}

int fuzz_slurp(const char *path, struct fuzz_buf *b)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = fstat(fd, &st) < 0 ? -errno : 0;
	b->len = rc ? 0 : (size_t)st.st_size;
	b->data = rc ? NULL : malloc(b->len ? b->len : 1);
	if (!rc && !b->data)
		rc = -ENOMEM;
	if (!rc)
		rc = sprite_pread_full(fd, b->data, b->len, 0);
	close(fd);
	if (rc) {
		free(b->data);
		b->data = NULL;
	}
	return rc;
}
