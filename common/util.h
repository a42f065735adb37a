/*
 * util.h - small shared helpers: checksums, clocks, sizes, progress, folder
 * listing and walk, names escaped for messages.
 */
#ifndef SPRITE_UTIL_H
#define SPRITE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
#ifndef SPRITE_ERR_MAX
#define SPRITE_ERR_MAX 256 /* bytes of an error message buffer (also in store.h) */
#endif
/* Format a message into err (SPRITE_ERR_MAX bytes); NULL err: nothing. */
void sprite_seterr(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * The same, returning rc: `return sprite_fail(err, -EINVAL, "%s: bad header", path);`.
 * rc is a negative errno (or a negative SPRITE_E* code), passed through as is.
 */
int sprite_fail(char *err, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
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

/*
 * Undo /proc/self/mountinfo's escapes in place: space, tab, newline and
 * backslash are written there as \ooo (three octal digits).
 */
void sprite_mountinfo_unescape(char *s);

/* One line of /proc/self/mountinfo, the fields spritefs uses, unescaped. */
struct sprite_mount {
	unsigned long id;  /* the mount's ID (as /proc/PID/fdinfo's mnt_id names it) */
	char dev[32];	   /* "major:minor" */
	char root[4096];   /* the folder of its filesystem that is mounted ("/": all) */
	char point[4096];  /* where it is mounted */
	char type[64];	   /* "ext4", "fuse.spritefs" */
	char source[4096]; /* what is mounted: a device, or spritefs's store path */
};

/*
 * The next entry of a mountinfo file f (fopen'd by the caller): 1, or 0 at
 * its end. Lines that do not parse are passed over.
 */
int sprite_mountinfo_next(FILE *f, struct sprite_mount *m);

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

/* A visible entry of a folder, as sprite_list_dir gives it. */
struct sprite_dirent {
	char kind;	 /* 'd' a folder, 'f' a regular file (links followed), 0 neither */
	char link;	 /* 1: the entry is a symbolic link (kind is its target's) */
	const char *why; /* kind 0: what it is instead ("a dangling symbolic link", "a FIFO") */
	char name[];
};

/*
 * The entries of dir, names starting with '.' left out, sorted by name
 * bytewise: *out a malloc'd array of *n entries, for sprite_dirents_free.
 * Symbolic links are followed to tell a folder from a file; an entry that is
 * neither (a link to nothing, a FIFO, a socket, a device, or one that stat()
 * fails on) has kind 0 and why. Returns 0 or -errno (opendir's, -ENOMEM).
 */
int sprite_list_dir(const char *dir, struct sprite_dirent ***out, size_t *n);
void sprite_dirents_free(struct sprite_dirent **v, size_t n);

/*
 * Every visible regular file under dir, the way the packer and hntrain read
 * image folders: depth first, the entries of a folder in byte order of their
 * names (files and folders mixed), names starting with '.' left out, symbolic
 * links followed. file(ctx, path) gets each file's path (malloc'd, now the
 * callee's); a negative return stops the walk and is returned. Entries passed
 * over go to ignored(ctx, path, unreadable, why), when given, in the same
 * order: a folder that is already open further up (a symbolic link loop) is
 * not entered again (unreadable 0, why SPRITE_WALK_LOOP), and an entry that
 * is neither a file nor a folder (sprite_list_dir's kind 0) is left out
 * (unreadable 1); a negative return stops the walk and is returned. More
 * than 32 folders deep is an error. Returns 0, a callback's negative value,
 * or -errno with a message naming the folder (escaped) in err (errcap bytes).
 */
#define SPRITE_WALK_LOOP "a symbolic link back to a folder above it: not entered again"
/*
 * Symbolic links are followed only where they stay inside dir (the class
 * folder): one that leads elsewhere, even to another folder of the same tree
 * (a/zz -> .. would read class b again as class a), is passed over with
 * unreadable 0 and why SPRITE_WALK_OUTSIDE, so a tree cannot lend its
 * reader (root, for spritefs) a file the tree's owner may not read.
 */
#define SPRITE_WALK_OUTSIDE "a symbolic link out of its class folder: not followed"

/*
 * Whether path, resolved (realpath), lies inside the resolved folder top
 * (or is top itself): 1, 0, or -errno when path cannot be resolved.
 */
int sprite_path_inside(const char *path, const char *top_real);
/*
 * The same for the file open at fd, by its real path (/proc/self/fd): a
 * check on what was opened, so that a link swapped into the tree after it
 * was listed cannot lead out of it. 1, 0, or -errno (no /proc).
 */
int sprite_fd_inside(int fd, const char *top_real);
int sprite_walk_files(const char *dir, int (*file)(void *ctx, char *path),
		      int (*ignored)(void *ctx, const char *path, int unreadable, const char *why),
		      void *ctx, char *err, size_t errcap);

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
 * A one-line progress bar on stderr, drawn only when stderr is a terminal
 * and TERM is set and not "dumb", at most ~10 times a second, fitted to the
 * terminal's width at each drawing (the bar shrinks, then the line is cut;
 * the label should be ASCII). Thread-safe updates with atomic counters.
 * tty says whether it draws (a caller printing a line of its own clears the
 * bar's line first only then).
 */
struct sprite_progress {
	const char *label;
	uint64_t total;
	uint64_t done; /* updated with __atomic ops by workers */
	double start, last_draw;
	int tty;
};
void sprite_progress_start(struct sprite_progress *p, const char *label, uint64_t total);
void sprite_progress_add(struct sprite_progress *p, uint64_t n); /* thread-safe */
void sprite_progress_draw(struct sprite_progress *p);		 /* call from one thread */
void sprite_progress_end(struct sprite_progress *p);

/*
 * s as one word for a POSIX shell, into out (cap bytes): as it is when it
 * holds only [A-Za-z0-9_./+:@%=,-] and is not empty, else in single quotes,
 * each ' written '\\''. Cut (still quoted) when cap is too small. Returns out.
 */
const char *sprite_shell_quote(const char *s, char *out, size_t cap);

#endif
