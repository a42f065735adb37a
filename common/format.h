/*
 * format.h - the on-disk layouts of a sprite store (*.sprites) and of a
 * batch file (*.sprite), defined once for the whole project.
 *
 * Everything is little-endian, fixed-width, and padded so that the structs
 * below can be read with one pread() on any x86-64/aarch64 host. Readers must
 * still treat every field as hostile: see store.h and batch.h for the
 * validating readers. docs/FORMAT.md describes the same layouts in prose for
 * trainers that do not link this code.
 *
 * Store file:
 *
 *   offset 0      struct sprite_header  (SPRITE_HEADER_SIZE bytes, padded)
 *   4 KiB-aligned sheets, each stored lz4-compressed or raw; the raw bytes of
 *                 a sheet are exactly a batch file (struct sprite_batch_header,
 *                 labels, ids, tiles), so spritefs serves a decoded sheet as a
 *                 batch file without copying
 *   index_offset  struct sprite_sheet_entry[nsheets]   (4 KiB-aligned)
 *   names_offset  class names: nclasses NUL-terminated UTF-8 strings
 *   labels_offset version 3: label table, uint16 per sample (4 KiB-aligned)
 *   paths_offset  version 3, optional: path table, uint64 offsets[n + 1] then
 *                 n NUL-terminated paths (4 KiB-aligned)
 *   skipped_offset optional: the skipped-file list, one "PATH\tREASON\n" a
 *                 file the packer could not use (4 KiB-aligned)
 *
 * The header carries XXH3-64 checksums of itself, of the index and of the
 * names block; each index entry carries the checksum of its stored bytes and
 * of its raw (decoded) bytes.
 */
#ifndef SPRITE_FORMAT_H
#define SPRITE_FORMAT_H

#include <stdint.h>

#define SPRITE_MAGIC "SPRITES\0" /* 8 bytes */
/*
 * 2 added order_window (a version-1 store reads as the default); 3 added the
 * label table and the source-path table after the names (labels_*, paths_*).
 */
#define SPRITE_VERSION	      3u
#define SPRITE_HEADER_SIZE    4096u
#define SPRITE_ALIGN	      4096u /* sheets and index start on this boundary */
#define SPRITE_MAX_SPLITS     8u
#define SPRITE_NAME_MAX	      64u /* data set name, NUL-padded */
#define SPRITE_SPLIT_NAME_MAX 16u /* split name, NUL-padded */

/* Hard caps a reader enforces before allocating anything. */
#define SPRITE_MAX_TILE_SIDE   4096u
#define SPRITE_MAX_CHANNELS    4u
#define SPRITE_MAX_SHEET_TILES 65536u
#define SPRITE_MAX_CLASSES     65535u
#define SPRITE_MAX_SHEET_RAW   (1ull << 30) /* 1 GiB decoded per sheet */

enum sprite_codec {
	SPRITE_CODEC_RAW = 0,
	SPRITE_CODEC_LZ4 = 1,
};
/*
 * The writer stores a sheet lz4-compressed only when that saves at least
 * this many percent of its bytes, else raw (codec is per sheet): below it,
 * the decode costs a reader more CPU than the bytes saved are worth (photos
 * at 224x224x3 gain a few percent). Readers take either codec on any sheet.
 */
#define SPRITE_LZ4_MIN_GAIN 10u

struct sprite_split_entry {
	char name[SPRITE_SPLIT_NAME_MAX]; /* "train", "test", NUL-padded */
	uint64_t count;			  /* samples in this split */
	uint32_t first_sheet;		  /* sheets of a split are contiguous */
	uint32_t nsheets;
}; /* 32 bytes */

struct sprite_header {
	char magic[8];			 /* SPRITE_MAGIC */
	uint32_t version;		 /* SPRITE_VERSION; a reader refuses newer */
	uint32_t header_size;		 /* SPRITE_HEADER_SIZE */
	uint32_t tile_h, tile_w, tile_c; /* tile shape, uint8 HWC */
	uint32_t sheet_tiles; /* tiles per full sheet; the last of a split may hold fewer */
	uint32_t nclasses;
	uint32_t nsplits; /* <= SPRITE_MAX_SPLITS */
	uint32_t nsheets;
	uint32_t flags;	       /* reserved, 0 */
	uint64_t file_size;    /* exact size of the store file */
	uint64_t index_offset; /* 4 KiB-aligned */
	uint64_t index_size;   /* nsheets * sizeof(struct sprite_sheet_entry) */
	uint64_t names_offset;
	uint64_t names_size;
	uint64_t index_checksum;    /* XXH3-64 of the index bytes */
	uint64_t names_checksum;    /* XXH3-64 of the names bytes */
	char name[SPRITE_NAME_MAX]; /* data set name, NUL-padded */
	struct sprite_split_entry splits[SPRITE_MAX_SPLITS];
	uint64_t header_checksum; /* XXH3-64 of the first 4096 bytes with this field zeroed */
	uint32_t order_window;	  /* version 2: sheets per window of the order, 0 full */
	uint32_t fit;		  /* enum sprite_fit; 0 (stretch) in stores before it */
	/* version 3: the label table and the source-path table (0 offset: none) */
	uint64_t labels_offset, labels_size, labels_checksum;
	uint64_t paths_offset, paths_size, paths_checksum;
	/*
	 * Optional, any version (zero padding before it: none): the files the
	 * packer could not use, skipped_count lines "PATH\tREASON\n".
	 */
	uint64_t skipped_offset, skipped_size, skipped_checksum, skipped_count;
	/*
	 * Optional, any version: what alpha became (SPRITE_BG_*); 0 in stores
	 * before the field, whose alpha went on black. Readers ignore it.
	 */
	uint32_t background;
	uint8_t pad[SPRITE_HEADER_SIZE - 524];
};

/*
 * What an image's alpha becomes (struct sprite_header.background,
 * struct sprite_sample_spec.background): SPRITE_BG_STORED drops it and
 * keeps the colours as stored, as PIL's convert("RGB") / convert("L") do
 * (torchvision's loader); SPRITE_BG_RGB(r, g, b) composites on that colour.
 * 0 in a spec means SPRITE_BG_STORED.
 */
#define SPRITE_BG_STORED 0x02000000u
#define SPRITE_BG_COLOUR 0x01000000u
#define SPRITE_BG_RGB(r, g, b)                                                                     \
	(SPRITE_BG_COLOUR | (uint32_t)(r) << 16 | (uint32_t)(g) << 8 | (uint32_t)(b))

/* How an image of another size became a tile (struct sprite_header.fit). */
enum sprite_fit {
	SPRITE_FIT_STRETCH = 0, /* both sides scaled to the tile: aspect not kept */
	SPRITE_FIT_CROP = 1,	/* shorter side to the tile, centre cropped */
	SPRITE_FIT_PAD = 2,	/* longer side to the tile, letterboxed */
};

struct sprite_sheet_entry {
	uint64_t offset;       /* 4 KiB-aligned file offset of the stored bytes */
	uint32_t stored_size;  /* bytes on disk (compressed or raw) */
	uint32_t raw_size;     /* bytes once decoded: a whole batch file */
	uint64_t checksum;     /* XXH3-64 of the stored bytes */
	uint64_t raw_checksum; /* XXH3-64 of the decoded bytes */
	uint64_t first;	       /* index of the sheet's first sample within its split */
	uint32_t count;	       /* tiles in this sheet, 1..sheet_tiles */
	uint16_t split;	       /* index into header.splits */
	uint8_t codec;	       /* enum sprite_codec */
	uint8_t reserved;      /* 0 */
};			       /* 48 bytes */

/*
 * Batch file (*.sprite): a header, then count labels (uint16), then count
 * sample ids (uint32, index within the split), then count tiles of
 * h*w*c bytes each (uint8, HWC), each section starting at the offset the
 * header names (64-byte aligned). A store sheet decodes to exactly this; an
 * epoch view is the same layout with gathered samples.
 */
#define SPRITE_BATCH_MAGIC	 "SPRBATCH"
#define SPRITE_BATCH_VERSION	 1u
#define SPRITE_BATCH_HEADER_SIZE 64u

struct sprite_batch_header {
	char magic[8];		/* SPRITE_BATCH_MAGIC */
	uint32_t version;	/* SPRITE_BATCH_VERSION */
	uint32_t header_size;	/* 64 */
	uint32_t count;		/* samples in this batch */
	uint32_t h, w, c;	/* tile shape */
	uint32_t labels_offset; /* = 64 */
	uint32_t ids_offset;	/* 64-aligned, after labels */
	uint32_t tiles_offset;	/* 64-aligned, after ids */
	uint32_t split;		/* split index in the store */
	uint64_t total_size;	/* whole file size: tiles_offset + count*h*w*c */
	uint64_t reserved;	/* 0 */
};				/* 64 bytes */

_Static_assert(sizeof(struct sprite_split_entry) == 32, "split entry layout");
_Static_assert(sizeof(struct sprite_header) == SPRITE_HEADER_SIZE, "header layout");
_Static_assert(__builtin_offsetof(struct sprite_header, fit) == 436 &&
		       __builtin_offsetof(struct sprite_header, labels_offset) == 440,
	       "header layout: version 3 fields");
_Static_assert(sizeof(struct sprite_sheet_entry) == 48, "sheet entry layout");
_Static_assert(sizeof(struct sprite_batch_header) == SPRITE_BATCH_HEADER_SIZE, "batch layout");

#endif
