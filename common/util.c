/*
 * util.c - small shared helpers: the XXH3-64 checksum every store structure
 * carries, whole-buffer I/O, a monotonic clock, sizes and tile shapes read
 * and written for people, UTF-8 lengths, and the escaping of names for
 * messages (sprite_escape) and for a shell: paths come from folder
 * listings, and a file name may hold a newline or a terminal escape.
 */
#include "common/util.h"
#include "common/safe_open.h"

#include "common/format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <unistd.h>
#include <xxhash.h>

#if SPRITE_CHECKSUM_AVX2
uint64_t sprite_checksum(const void *p, size_t len)
{
	/* one load and a test after libgcc's start-up probe of the CPU */
	if (__builtin_cpu_supports("avx2"))
		return sprite_checksum_avx2(p, len);
	return XXH3_64bits(p, len);
}
#else
uint64_t sprite_checksum(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}
#endif

double sprite_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Parsed by hand rather than with strtod so that the result is exact for
 * integers, independent of the locale, and overflow is caught.
 */
int sprite_parse_tile(const char *s, uint32_t *h, uint32_t *w, uint32_t *c)
{
	unsigned long a, b, d = 0;
	char *e;
	a = strtoul(s, &e, 10);
	if (e == s || *e != 'x')
		return -EINVAL;
	s = e + 1;
	b = strtoul(s, &e, 10);
	if (e == s || (*e && *e != 'x'))
		return -EINVAL;
	if (*e == 'x') {
		s = e + 1;
		d = strtoul(s, &e, 10);
		if (e == s || *e)
			return -EINVAL;
		if (d != 1 && d != 3 && d != 4)
			return -EINVAL;
	}
	if (a == 0 || b == 0 || a > SPRITE_MAX_TILE_SIDE || b > SPRITE_MAX_TILE_SIDE)
		return -EINVAL;
	*h = (uint32_t)a;
	*w = (uint32_t)b;
	*c = (uint32_t)d;
	return 0;
}

int sprite_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGTPE";
	uint64_t ip = 0, frac = 0, fdiv = 1, mult = 1;
	const char *p = s;
	int digits = 0;

	if (!s)
		return -EINVAL;
	while (*p >= '0' && *p <= '9') {
		unsigned d = (unsigned)(*p++ - '0');
		if (ip > (UINT64_MAX - d) / 10)
			return -EINVAL;
		ip = ip * 10 + d;
		digits++;
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (fdiv < 1000000000000ull) { /* 12 decimals are plenty */
				frac = frac * 10 + (uint64_t)(*p - '0');
				fdiv *= 10;
			}
			p++;
			digits++;
		}
	}
	if (!digits)
		return -EINVAL;
	if (*p) {
		const char *u = strchr(units, *p & ~0x20); /* upper case */
		if (!u || !*u)
			return -EINVAL;
		for (long i = 0; i <= u - units; i++)
			mult <<= 10;
		p++;
		if ((*p | 0x20) == 'i')
			p++;
		if ((*p | 0x20) == 'b')
			p++;
		if (*p)
			return -EINVAL;
	} else if (fdiv > 1) {
		return -EINVAL; /* "1.5" bytes makes no sense */
	}
	if (ip > UINT64_MAX / mult)
		return -EINVAL;
	uint64_t v = ip * mult;
	/* frac / fdiv * mult without overflow: mult <= 2^60, frac < 10^12 */
	unsigned __int128 f = (unsigned __int128)frac * mult / fdiv;
	if (f > UINT64_MAX - v)
		return -EINVAL;
	*out = v + (uint64_t)f;
	return 0;
}

const char *sprite_fmt_size(uint64_t bytes, char *buf, size_t cap)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (bytes < 1024) {
		snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	double v = (double)bytes / 1024.0;
	int u = 0;
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, cap, "%.1f %s", v, units[u]);
	return buf;
}

int sprite_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ENODATA;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int sprite_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t r = pwrite(fd, p, len, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int sprite_write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t r = write(fd, p, len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

int sprite_write_file_atomic(const char *path, const void *buf, size_t len, char *err)
{
	struct sprite_outfile o;
	int rc = sprite_outfile_open(&o, path, 0644, 0, err);
	if (rc < 0)
		return rc;
	rc = sprite_write_full(o.fd, buf, len);
	if (rc < 0) {
		sprite_seterr(err, "writing %s: %s", o.tmp_path, strerror(-rc));
		sprite_outfile_abort(&o);
		return rc;
	}
	return sprite_outfile_commit(&o, err);
}

int sprite_utf8_len(const unsigned char *p)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xbf;
	int n;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (int k = 2; k < n; k++)
		if (p[k] < 0x80 || p[k] > 0xbf)
			return 0;
	return n;
}

size_t sprite_utf8_cut(const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0;
	while (p[n]) {
		int k = sprite_utf8_len(p + n);
		size_t step = k > 0 ? (size_t)k : 1;
		if (step > max - n)
			break;
		n += step;
	}
	return n;
}

void sprite_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

int sprite_mkdir_p(const char *path)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* ---- names in messages ------------------------------------------------ */

/*
 * Whether the n-byte UTF-8 character at p reorders text on display (U+061C,
 * U+200E/F, U+202A-E, U+2066-9): "gnp.exe" can read as "exe.png".
 */
static int is_bidi(const unsigned char *p, int n)
{
	if (n == 2)
		return p[0] == 0xd8 && p[1] == 0x9c;
	if (n != 3 || p[0] != 0xe2)
		return 0;
	return (p[1] == 0x80 && (p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xaa && p[2] <= 0xae))) ||
	       (p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9);
}

const char *sprite_escape(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t k = 0, mark = 0; /* mark: the last cut that leaves room for "..." */
	if (cap < 4) {
		if (cap)
			out[0] = 0;
		return out;
	}
	while (*p) {
		char one[12]; /* one character as it is shown: at most three \xNN */
		size_t len = 0, used = 1;
		int n = sprite_utf8_len(p);
		if (*p == '\\' || *p == '\n' || *p == '\t' || *p == '\r') {
			one[len++] = '\\';
			one[len++] = *p == '\\' ? '\\' : *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r';
		} else if (n == 0 || *p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] < 0xa0) ||
			   is_bidi(p, n)) {
			used = n >= 2 ? (size_t)n : 1; /* a C1 or bidi control: all its bytes */
			for (size_t i = 0; i < used; i++) {
				one[len++] = '\\';
				one[len++] = 'x';
				one[len++] = hex[p[i] >> 4];
				one[len++] = hex[p[i] & 15];
			}
		} else {
			used = (size_t)n;
			memcpy(one, p, used);
			len = used;
		}
		if (k + len > cap - 1) {
			memcpy(out + mark, "...", 3);
			out[mark + 3] = 0;
			return out;
		}
		memcpy(out + k, one, len);
		k += len;
		if (k + 3 <= cap - 1)
			mark = k;
		p += used;
	}
	out[k] = 0;
	return out;
}

char *sprite_path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);
	if (p) {
		memcpy(p, dir, a);
		p[a] = '/';
		memcpy(p + a + 1, name, b + 1);
	}
	return p;
}

/* err = "DIR: what detail" with DIR escaped; returns -e. */
const char *sprite_shell_quote(const char *s, char *out, size_t cap)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789_./+:@%=,-";
	if (cap < 3) {
		if (cap)
			out[0] = 0;
		return out;
	}
	if (s[0] && strspn(s, safe) == strlen(s)) {
		snprintf(out, cap, "%s", s);
		return out;
	}
	size_t at = 0;
	out[at++] = '\'';
	for (; *s; s++) {
		size_t n = *s == '\'' ? 4 : 1;
		if (at + n + 2 > cap)
			break;
		memcpy(out + at, *s == '\'' ? "'\\''" : s, n);
		at += n;
	}
	out[at++] = '\'';
	out[at] = 0;
	return out;
}

void *sprite_huge_alloc(size_t *len)
{
	const size_t huge = 2u << 20;
	size_t n = (*len + huge - 1) & ~(huge - 1);
	void *p;
	if (!n || posix_memalign(&p, huge, n) != 0)
		return NULL;
	(void)madvise(p, n, MADV_HUGEPAGE);
	*len = n;
	return p;
}
