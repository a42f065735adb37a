/*
 * util.c - small shared helpers: the XXH3-64 checksum every store structure
 * carries, a monotonic clock, human-readable sizes, a terminal progress bar,
 * the folder listing and walk that the packer and hntrain share (so both
 * read an image tree in the same order and pass over the same entries), and
 * the escaping of names for messages (sprite_escape): paths come from folder
 * listings, and a file name may hold a newline or a terminal escape.
 *
 * The progress bar is the one place in common/ that writes anything: it draws
 * on stderr only when stderr is a terminal that takes cursor controls (not
 * TERM=dumb or unset), so that logs, pipes and editor buffers stay clean, and
 * at most ten times a second, so that a tight loop of workers calling
 * sprite_progress_add() costs one atomic add each and nothing more. Each
 * drawing asks the terminal its width (one ioctl): the line is fitted to it,
 * one column short, since a line that fills or passes the last column wraps
 * and "\r" then returns only to the start of its last row.
 */
#include "common/util.h"
#include "common/safe_open.h"

#include "common/format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
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

void sprite_progress_start(struct sprite_progress *p, const char *label, uint64_t total)
{
	p->label = label ? label : "";
	p->total = total;
	__atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
	p->start = sprite_now();
	p->last_draw = 0;
	const char *term = getenv("TERM");
	p->tty = isatty(2) && term && *term && strcmp(term, "dumb") != 0;
}

void sprite_progress_add(struct sprite_progress *p, uint64_t n)
{
	__atomic_fetch_add(&p->done, n, __ATOMIC_RELAXED);
}

static void fmt_hms(double s, char *buf, size_t cap)
{
	if (s < 0 || s > 359999)
		s = 359999;
	unsigned t = (unsigned)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, cap, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, cap, "%u:%02u", t / 60, t % 60);
}

/* Columns of the terminal on stderr; 80 when it does not say. */
static int term_cols(void)
{
	struct winsize ws;
	if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

static void progress_paint(struct sprite_progress *p, double now)
{
	enum { BAR = 24, MIN_BAR = 5 };
	uint64_t done = __atomic_load_n(&p->done, __ATOMIC_RELAXED);
	uint64_t total = p->total;
	double el = now - p->start;
	double rate = el > 0 ? (double)done / el : 0;
	double frac = total ? (double)done / (double)total : 0;
	char eta[16], count[48], tail[128], line[512];

	if (frac > 1)
		frac = 1;
	if (rate > 0 && total >= done)
		fmt_hms((double)(total - done) / rate, eta, sizeof(eta));
	else
		snprintf(eta, sizeof(eta), "--:--");
	snprintf(count, sizeof(count), " %llu/%llu", (unsigned long long)done,
		 (unsigned long long)total);

	/*
	 * "label [bar] count pct rate ETA" on a wide terminal; narrower, the
	 * bar shrinks, then the rate, the ETA, the count and the bar go, in
	 * that order, and a line that still does not fit is cut.
	 */
	int width = term_cols() - 1;
	if (width > (int)sizeof(line) - 1)
		width = (int)sizeof(line) - 1;
	snprintf(line, sizeof(line), "%s", p->label);
	int len = (int)strlen(line), bar = 0;
	for (int v = 0; v < 4; v++) {
		double pct = frac * 100.0;
		switch (v) {
		case 0:
			snprintf(tail, sizeof(tail), "%s %5.1f%% %.0f/s ETA %s", count, pct, rate,
				 eta);
			break;
		case 1:
			snprintf(tail, sizeof(tail), "%s %5.1f%% ETA %s", count, pct, eta);
			break;
		case 2:
			snprintf(tail, sizeof(tail), "%s %5.1f%%", count, pct);
			break;
		default:
			snprintf(tail, sizeof(tail), " %5.1f%%", pct);
		}
		int room = width - len - (int)strlen(tail) - 3; /* " [" and "]" */
		bar = room < BAR ? room : BAR;
		if (bar >= MIN_BAR || len + (int)strlen(tail) <= width)
			break;
	}
	if (bar >= MIN_BAR && len + 2 + bar + 1 < (int)sizeof(line)) {
		int fill = (int)(frac * bar);
		line[len++] = ' ';
		line[len++] = '[';
		for (int i = 0; i < bar; i++)
			line[len++] = i < fill ? '#' : '-';
		line[len++] = ']';
		line[len] = 0;
	}
	snprintf(line + len, sizeof(line) - (size_t)len, "%s", tail);
	if ((int)strlen(line) > width)
		line[width] = 0;
	fprintf(stderr, "\r%s\033[K", line);
	fflush(stderr);
	p->last_draw = now;
}

void sprite_progress_draw(struct sprite_progress *p)
{
	if (!p->tty)
		return;
	double now = sprite_now();
	if (now - p->last_draw < 0.1)
		return;
	progress_paint(p, now);
}

void sprite_progress_end(struct sprite_progress *p)
{
	if (!p->tty)
		return;
	progress_paint(p, sprite_now());
	fputc('\n', stderr);
	fflush(stderr);
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

void sprite_seterr(char *err, const char *fmt, ...)
{
	if (!err)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, SPRITE_ERR_MAX, fmt, ap);
	va_end(ap);
}

int sprite_fail(char *err, int rc, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, SPRITE_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return rc;
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

/* ---- folder listing and walk ------------------------------------------- */

#define WALK_MAX_DEPTH 32

/* What an entry of a folder is, links followed: 'd', 'f', or 0 with why. */
static char entry_kind(int dfd, const char *name, unsigned char d_type, const char **why)
{
	struct stat st;
	if (d_type == DT_DIR)
		return 'd';
	if (d_type == DT_REG)
		return 'f';
	if (fstatat(dfd, name, &st, 0) < 0) {
		int e = errno;
		struct stat ls;
		*why = e == ENOENT && fstatat(dfd, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
				       S_ISLNK(ls.st_mode)
			       ? "a dangling symbolic link"
			       : strerror(e);
		return 0;
	}
	if (S_ISDIR(st.st_mode))
		return 'd';
	if (S_ISREG(st.st_mode))
		return 'f';
	*why = S_ISFIFO(st.st_mode)   ? "a FIFO, not a file or folder"
	       : S_ISSOCK(st.st_mode) ? "a socket, not a file or folder"
	       : S_ISCHR(st.st_mode)  ? "a character device, not a file or folder"
	       : S_ISBLK(st.st_mode)  ? "a block device, not a file or folder"
				      : "not a file or folder";
	return 0;
}

static int cmp_dirent(const void *a, const void *b)
{
	return strcmp((*(struct sprite_dirent *const *)a)->name,
		      (*(struct sprite_dirent *const *)b)->name);
}

void sprite_dirents_free(struct sprite_dirent **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int sprite_list_dir(const char *dir, struct sprite_dirent ***out, size_t *count)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct sprite_dirent **v = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		const char *why = NULL;
		char kind = entry_kind(dirfd(d), de->d_name, de->d_type, &why);
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct sprite_dirent **nv = realloc(v, nc * sizeof *nv);
			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
			cap = nc;
		}
		/* why is kept in the entry: strerror's text may not outlive the next call */
		size_t l = strlen(de->d_name) + 1, wl = why ? strlen(why) + 1 : 0;
		struct sprite_dirent *e = malloc(sizeof *e + l + wl);
		if (!e) {
			r = -ENOMEM;
			break;
		}
		e->kind = kind;
		e->link = de->d_type == DT_LNK;
		if (de->d_type == DT_UNKNOWN) { /* file systems that do not fill d_type */
			struct stat ls;
			e->link = fstatat(dirfd(d), de->d_name, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
				  S_ISLNK(ls.st_mode);
		}
		memcpy(e->name, de->d_name, l);
		e->why = why ? memcpy(e->name + l, why, wl) : NULL;
		v[n++] = e;
	}
	closedir(d);
	if (r < 0) {
		sprite_dirents_free(v, n);
		return r;
	}
	sprite_sort(v, n, sizeof *v, cmp_dirent);
	*out = v;
	*count = n;
	return 0;
}

struct walk {
	const char *top_real; /* the walk's folder, resolved: links must stay inside */
	int (*file)(void *ctx, char *path);
	int (*ignored)(void *ctx, const char *path, int unreadable, const char *why);
	void *ctx;
	char *err;
	size_t errcap;
	int depth;
	dev_t dev[WALK_MAX_DEPTH + 1];
	ino_t ino[WALK_MAX_DEPTH + 1];
};

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
static int walk_fail(struct walk *w, const char *dir, int e, const char *what, const char *detail)
{
	char shown[1024];
	snprintf(w->err, w->errcap, "%s: %s%s", sprite_escape(dir, shown, sizeof shown), what,
		 detail);
	return -e;
}

static int walk_dir(struct walk *w, const char *dir)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return walk_fail(w, dir, errno, "cannot open: ", strerror(errno));
	for (int k = 0; k < w->depth; k++)
		if (w->dev[k] == st.st_dev && w->ino[k] == st.st_ino)
			return w->ignored ? w->ignored(w->ctx, dir, 0, SPRITE_WALK_LOOP) : 0;
	if (w->depth > WALK_MAX_DEPTH)
		return walk_fail(w, dir, ELOOP, "folders nested too deep", "");
	struct sprite_dirent **v = NULL;
	size_t n = 0;
	int r = sprite_list_dir(dir, &v, &n);
	if (r == -ENOMEM)
		return walk_fail(w, dir, ENOMEM, "out of memory listing the folder", "");
	if (r < 0)
		return walk_fail(w, dir, -r, "cannot open: ", strerror(-r));
	w->dev[w->depth] = st.st_dev;
	w->ino[w->depth] = st.st_ino;
	w->depth++;
	for (size_t i = 0; i < n && r == 0; i++) {
		char *p = sprite_path_join(dir, v[i]->name);
		if (!p)
			r = walk_fail(w, dir, ENOMEM, "out of memory listing the folder", "");
		else if (v[i]->link && v[i]->kind && sprite_path_inside(p, w->top_real) != 1) {
			if (w->ignored)
				r = w->ignored(w->ctx, p, 0, SPRITE_WALK_OUTSIDE);
		} else if (v[i]->kind == 'd')
			r = walk_dir(w, p);
		else if (v[i]->kind == 'f') {
			r = w->file(w->ctx, p);
			continue; /* p is the callee's now */
		} else if (w->ignored)
			r = w->ignored(w->ctx, p, 1, v[i]->why);
		free(p);
	}
	w->depth--;
	sprite_dirents_free(v, n);
	if (r == -ENOMEM && !w->err[0])
		walk_fail(w, dir, ENOMEM, "out of memory listing the folder", "");
	return r;
}

int sprite_walk_files(const char *dir, int (*file)(void *ctx, char *path),
		      int (*ignored)(void *ctx, const char *path, int unreadable, const char *why),
		      void *ctx, char *err, size_t errcap)
{
	if (errcap)
		err[0] = 0;
	char *real = realpath(dir, NULL);
	if (!real) {
		int e = errno;
		char shown[1024];
		snprintf(err, errcap, "%s: cannot open: %s", sprite_escape(dir, shown, sizeof shown),
			 strerror(e));
		return -e;
	}
	struct walk w = {real, file, ignored, ctx, err, errcap, 0, {0}, {0}};
	int r = walk_dir(&w, dir);
	free(real);
	return r;
}

/* Whether the resolved path real lies inside (or is) the resolved folder top_real. */
static int real_inside(const char *real, const char *top_real)
{
	size_t n = strlen(top_real);
	if (n == 1 && top_real[0] == '/')
		return real[0] == '/';
	return !strncmp(real, top_real, n) && (real[n] == '/' || !real[n]);
}

int sprite_fd_inside(int fd, const char *top_real)
{
	char link[64], real[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, real, sizeof real - 1);
	if (n < 0)
		return -errno;
	real[n] = 0;
	return real_inside(real, top_real);
}

int sprite_path_inside(const char *path, const char *top_real)
{
	char *real = realpath(path, NULL);
	if (!real)
		return -errno;
	int in = real_inside(real, top_real);
	free(real);
	return in;
}

void sprite_mountinfo_unescape(char *s)
{
	size_t k = 0;
	for (const char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			s[k++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			s[k++] = *p;
		}
	}
	s[k] = 0;
}

int sprite_mountinfo_next(FILE *f, struct sprite_mount *m)
{
	char line[8192];
	while (fgets(line, sizeof line, f)) {
		/* ID PARENT DEV ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE SUPEROPTIONS */
		const char *sep = strstr(line, " - ");
		if (sscanf(line, "%lu %*s %31s %4095s %4095s", &m->id, m->dev, m->root, m->point) !=
			    4 ||
		    !sep || sscanf(sep + 3, "%63s %4095s", m->type, m->source) != 2)
			continue;
		sprite_mountinfo_unescape(m->root);
		sprite_mountinfo_unescape(m->point);
		sprite_mountinfo_unescape(m->source);
		return 1;
	}
	return 0;
}

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
