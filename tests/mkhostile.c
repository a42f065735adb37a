/*
 * mkhostile - write a sparse store that declares more samples than it holds.
 *
 *   mkhostile OUT [SAMPLES]
 *
 * One split "train" of SAMPLES (default 2^32-1, the most a split may
 * declare) 1x1x1 tiles in sheets of 65,536: a valid header, index and
 * names, each with its checksum, so the store passes every check made at
 * open; the sheets themselves are holes (they would fail their checksums
 * when read). The file is about 3 MB on disk for 2^32-1 samples (the
 * index), 260 MB apparent. It is what a user can hand a daemon that sizes
 * its tables by the sample count: the memory tests mount it under a limit.
 * No label table, so nothing per sample is read at open.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/format.h"
#include "common/util.h"

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: mkhostile OUT [SAMPLES]\n");
		return 2;
	}
	uint64_t count = argc == 3 ? strtoull(argv[2], NULL, 0) : 0xffffffffull;
	const uint32_t T = 65536;
	if (count == 0 || count > 0xffffffffull) {
		fprintf(stderr, "mkhostile: SAMPLES must be 1..2^32-1\n");
		return 2;
	}
	uint32_t nsheets = (uint32_t)((count + T - 1) / T);
	struct sprite_sheet_entry *e = calloc(nsheets, sizeof(*e));
	if (!e)
		return 1;
	for (uint32_t i = 0; i < nsheets; i++) {
		uint64_t first = (uint64_t)i * T;
		uint32_t n = count - first < T ? (uint32_t)(count - first) : T;
		struct sprite_batch_header b;
		sprite_batch_layout(n, 1, 1, 1, &b);
		e[i].offset = SPRITE_HEADER_SIZE + (uint64_t)i * SPRITE_ALIGN;
		e[i].stored_size = SPRITE_ALIGN;
		e[i].raw_size = (uint32_t)b.total_size;
		e[i].first = first;
		e[i].count = n;
		e[i].codec = SPRITE_CODEC_LZ4;
	}
	static const char names[] = "a\0b";
	struct sprite_header h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SPRITE_MAGIC, 8);
	h.version = SPRITE_VERSION;
	h.header_size = SPRITE_HEADER_SIZE;
	h.tile_h = h.tile_w = h.tile_c = 1;
	h.sheet_tiles = T;
	h.nclasses = 2;
	h.nsplits = 1;
	h.nsheets = nsheets;
	h.index_offset = SPRITE_HEADER_SIZE + (uint64_t)nsheets * SPRITE_ALIGN;
	h.index_size = (uint64_t)nsheets * sizeof(*e);
	h.names_offset =
		(h.index_offset + h.index_size + SPRITE_ALIGN - 1) / SPRITE_ALIGN * SPRITE_ALIGN;
	h.names_size = sizeof(names);
	h.file_size = h.names_offset + SPRITE_ALIGN;
	h.index_checksum = sprite_checksum(e, (size_t)h.index_size);
	h.names_checksum = sprite_checksum(names, sizeof(names));
	snprintf(h.name, sizeof(h.name), "hostile");
	snprintf(h.splits[0].name, sizeof(h.splits[0].name), "train");
	h.splits[0].count = count;
	h.splits[0].nsheets = nsheets;
	h.fit = SPRITE_FIT_STRETCH;
	h.header_checksum = sprite_checksum(&h, sizeof(h));

	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int ok = fd >= 0 && ftruncate(fd, (off_t)h.file_size) == 0 &&
		 pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		 pwrite(fd, e, (size_t)h.index_size, (off_t)h.index_offset) ==
			 (ssize_t)h.index_size &&
		 pwrite(fd, names, sizeof(names), (off_t)h.names_offset) == (ssize_t)sizeof(names);
	if (!ok)
		fprintf(stderr, "mkhostile: %s: %s\n", argv[1], strerror(errno));
	if (fd >= 0)
		close(fd);
	free(e);
	return ok ? 0 : 1;
}
