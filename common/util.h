/*
 * util.h - small shared helpers: checksums, whole-buffer I/O, clocks, sizes,
 * UTF-8 lengths, names escaped for messages and for a shell.
 */
#ifndef SPRITE_UTIL_H
#define SPRITE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h" /* sprite_fail, SPRITE_ERR_MAX: the err of the functions below */

/* XXH3-64 (libxxhash), seed 0: the checksum of every store structure. */
uint64_t sprite_checksum(const void *p, size_t len);
/* The same hash built for AVX2 (checksum_avx2.c); sprite_checksum picks it when it may. */
uint64_t sprite_checksum_avx2(const void *p, size_t len);

/*
 * Whole-buffer I/O that retries on EINTR and short transfers.
 * sprite_pread_full returns 0, -errno, or -ENODATA when the file ends first.
 */
int sprite_pread_full(int fd, void *buf, size_t len, uint64_t off);
int sprite_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
int sprite_write_full(int fd, const void *buf, size_t len);
/*
 * Write len bytes as the whole of path, atomically and without following
 * links (safe_open.h): to a new "<path>.tmp.<pid>", fsynced, renamed over
 * path, then the folder fsynced, so a crash leaves the old file or the new
 * one, never half of one. 0, or -errno with a message in err (the temp file
 * removed).
 */
int sprite_write_file_atomic(const char *path, const void *buf, size_t len, char *err);

/*
 * Length of the well-formed UTF-8 character at p (RFC 3629: no overlongs, no
 * surrogates, at most U+10FFFF), or 0 where p does not start one. Reads no
 * further than a byte that is out of place, so a NUL ends any string safely.
 */
int sprite_utf8_len(const unsigned char *p);

/*
 * Length of the longest prefix of s of at most max bytes that does not end
 * inside a well-formed UTF-8 character (a byte that starts none counts as
 * one): where a name is cut to fit a fixed field.
 */
size_t sprite_utf8_cut(const char *s, size_t max);

/* qsort that also takes an empty array given as NULL (qsort's own pointer must not be). */
void sprite_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

/*
 * s made safe to print in a message or a log line: bytes below 0x20, DEL,
 * the C1 controls (U+0080..U+009F), the bidirectional controls (U+061C,
 * U+200E/F, U+202A..E, U+2066..9) and bytes that are not well-formed UTF-8
 * are written as \n, \t, \r or \xNN (the byte, two lower-case hex digits),
 * a backslash as \\; printable UTF-8 stays as it is. A name read from a
 * folder can thus neither break a line, forge one, steer a terminal, nor
 * show its characters out of order, and
 * different names show differently. Writes into out (cap bytes, NUL
 * included); what does not fit is cut between two characters, never inside
 * an escape, and marked "..." (cap < 4: an empty string). Returns out.
 */
const char *sprite_escape(const char *s, char *out, size_t cap);

/* "dir/name" in a new malloc'd string (NULL: out of memory). */
char *sprite_path_join(const char *dir, const char *name);

/* mkdir -p with mode 0755; 0 or -errno. */
int sprite_mkdir_p(const char *path);

/* Monotonic seconds. */
double sprite_now(void);

/* Parse "512M", "2G", "4096", "1.5G" (binary units) into bytes; -EINVAL if bad. */
int sprite_parse_size(const char *s, uint64_t *out);
/*
 * Parse a tile shape "HxW" or "HxWxC" (sides 1..SPRITE_MAX_TILE_SIDE, C 1, 3
 * or 4; *c is 0 when not given); -EINVAL if bad.
 */
int sprite_parse_tile(const char *s, uint32_t *h, uint32_t *w, uint32_t *c);
/* Format bytes as "1.5 GiB" into buf. */
const char *sprite_fmt_size(uint64_t bytes, char *buf, size_t cap);
/*
 * At least *len bytes (rounded up to whole 2 MiB, the new size in *len),
 * 2 MiB-aligned and asking for transparent huge pages, a hint: 4 KiB pages
 * work too. For buffers that O_DIRECT reads of a FUSE file fill: the kernel
 * pins a huge page with one reference where 4 KiB pages take one each.
 * Freed with free(); NULL when out of memory.
 */
void *sprite_huge_alloc(size_t *len);

/*
 * s as one word for a POSIX shell, into out (cap bytes): as it is when it
 * holds only [A-Za-z0-9_./+:@%=,-] and is not empty, else in single quotes,
 * each ' written '\\''. Cut (still quoted) when cap is too small. Returns out.
 */
const char *sprite_shell_quote(const char *s, char *out, size_t cap);

#endif
