/*
 * test_util - the helpers of common/util.c, error.c, folder.c and
 * cachestore.c that the store and every message rely on: the checksum
 * against libxxhash, UTF-8 lengths
 * and cuts, sprite_escape, sprite_list_dir, the mountinfo reader's
 * unescaping, and sprite_strerror for the store's own codes; and
 * common/safe_open.c's writes (a planted link at the temporary's name and
 * at the final name, stale temporaries, a folder anyone may write, logs
 * through links, FIFOs) and the tree checks of sprite_path_inside and
 * sprite_fd_inside.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/cachestore.h"
#include "common/folder.h"
#include "common/safe_open.h"
#include "common/store.h"
#include "common/util.h"
#include "tests/check.h"

static char dir[] = "/tmp/test_util.XXXXXX";

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}
/*
 * sprite_checksum may take the AVX2 build of XXH3: it must give libxxhash's
 * hash for every length (XXH3 has separate paths up to 16, 128 and 240 bytes,
 * then stripes of 64 and blocks of 1024) and alignment.
 */
static void check_checksum(void)
{
	size_t cap = (1u << 20) + 64;
	uint8_t *b = malloc(cap);
	if (!b) {
		FAIL("out of memory");
		return;
	}
	for (size_t i = 0; i < cap; i++)
		b[i] = (uint8_t)mix(i);
	int bad = 0;
	for (size_t len = 0; len <= 2100 && bad < 5; len++)
		for (size_t off = 0; off < 3; off++)
			if (sprite_checksum(b + off, len) != XXH3_64bits(b + off, len)) {
				FAIL("checksum of %zu bytes at offset %zu differs from libxxhash",
				     len, off);
				bad++;
			}
	const size_t big[] = {4095, 65536, 800000, 1u << 20};
	for (size_t k = 0; k < sizeof(big) / sizeof(big[0]); k++)
		CHECK(sprite_checksum(b + 1, big[k]) == XXH3_64bits(b + 1, big[k]),
		      "checksum of %zu bytes differs from libxxhash", big[k]);
	free(b);
}

/* sprite_utf8_len: what JSON writers rely on to keep their output UTF-8; sprite_utf8_cut. */
static void check_utf8(void)
{
	static const struct {
		const char *s;
		int len;
	} cases[] = {
		{"a", 1},
		{"\xc3\xa9", 2},
		{"\xe2\x82\xac", 3},
		{"\xf0\x9f\x98\x80", 4},
		{"\xf4\x8f\xbf\xbf", 4},
		{"\xe9", 0},
		{"\xc0\xaf", 0},
		{"\xc1\xbf", 0},
		{"\xe0\x80\xaf", 0},
		{"\xed\xa0\x80", 0},
		{"\xf0\x80\x80\xaf", 0},
		{"\xf4\x90\x80\x80", 0},
		{"\xf5\x80\x80\x80", 0},
		{"\x80", 0},
		{"\xe2\x82", 0},
		{"\xf0\x9f\x98", 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		CHECK(sprite_utf8_len((const unsigned char *)cases[i].s) == cases[i].len,
		      "utf8 case %zu: %d, expected %d", i,
		      sprite_utf8_len((const unsigned char *)cases[i].s), cases[i].len);

	/* sprite_utf8_cut: a name cut to fit a field never ends inside a character */
	static const struct {
		const char *s;
		size_t max, len;
	} cuts[] = {
		{"abc", 2, 2},
		{"ab", 10, 2},
		{"a\xc3\xa9", 2, 1},
		{"a\xc3\xa9", 3, 3},
		{"\xe2\x82\xac", 2, 0},
		{"x\xf0\x9f\x98\x80y", 4, 1},
		{"x\xf0\x9f\x98\x80y", 5, 5},
		{"\xff\xfe", 1, 1}, /* not UTF-8: cut anywhere, byte by byte */
		{"a\xe2\x82", 2, 2},
		{"", 5, 0},
	};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
		CHECK(sprite_utf8_cut(cuts[i].s, cuts[i].max) == cuts[i].len,
		      "utf8 cut case %zu: %zu, expected %zu", i,
		      sprite_utf8_cut(cuts[i].s, cuts[i].max), cuts[i].len);
}

/*
 * sprite_escape: what the packer and hntrain print of a path read from a
 * folder. Control bytes and bytes that are not UTF-8 become escapes, printable
 * UTF-8 stays, and a cut falls between characters, never inside an escape.
 */
static void check_escape(void)
{
	static const struct {
		const char *in;
		size_t cap;
		const char *out;
	} cases[] = {
		{"/data/train/ant/x.png", 64, "/data/train/ant/x.png"},
		{"", 64, ""},
		{"a\nb", 64, "a\\nb"},
		{"t\tr\r", 64, "t\\tr\\r"},
		{"back\\slash \\n", 64, "back\\\\slash \\\\n"}, /* a literal \n stays apart */
		{"\033[31mred\033[0m", 64, "\\x1b[31mred\\x1b[0m"},
		{"\x01\x1f\x7f", 64, "\\x01\\x1f\\x7f"},
		{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 64,
		 "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
		{"nb\xc2\xa0sp", 64, "nb\xc2\xa0sp"},	    /* U+00A0 prints */
		{"csi\xc2\x9b[2J", 64, "csi\\xc2\\x9b[2J"}, /* a C1 control does not */
		{"gnp\xe2\x80\xae"
		 "exe",
		 64, "gnp\\xe2\\x80\\xaeexe"}, /* U+202E reorders */
		{"a\xe2\x81\xa6"
		 "b\xe2\x80\x8f",
		 64, "a\\xe2\\x81\\xa6b\\xe2\\x80\\x8f"},
		{"\xd8\x9c\xd8\xa7", 64, "\\xd8\\x9c\xd8\xa7"}, /* ALM; Arabic alef prints */
		{"\xe2\x80\x94", 64, "\xe2\x80\x94"},		/* an em dash prints */
		{"caf\xe9.png", 64, "caf\\xe9.png"},		/* Latin-1 */
		{"\xff\xfe", 64, "\\xff\\xfe"},
		{"\xc0\xaf", 64, "\\xc0\\xaf"},		 /* overlong '/' */
		{"\xed\xa0\x80", 64, "\\xed\\xa0\\x80"}, /* a surrogate */
		{"\xe2\x82", 64, "\\xe2\\x82"},		 /* cut short by the end */
		{"\xe2\x82x", 64, "\\xe2\\x82x"},	 /* ... or by an ASCII byte */
		{"abcdefg", 8, "abcdefg"},		 /* fits exactly */
		{"abcdefgh", 8, "abcd..."},
		{"abc\ndef", 8, "abc..."}, /* not "abc\\..." */
		{"ab\nc", 8, "ab\\nc"},
		{"\x01\x02", 8, "\\x01..."},
		{"\xc3\xa9\xc3\xa9\xc3\xa9", 6, "\xc3\xa9..."}, /* not half an é */
		{"abcd", 4, "..."},
		{"abc", 4, "abc"},
		{"abc", 3, ""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char out[80]; /* past cap: a write there shows */
		memset(out, '#', sizeof out);
		const char *r = sprite_escape(cases[i].in, out, cases[i].cap);
		CHECK(r == out && !strcmp(out, cases[i].out) && strlen(out) < cases[i].cap,
		      "escape case %zu: \"%s\", expected \"%s\"", i, out, cases[i].out);
		CHECK(out[cases[i].cap] == '#', "escape case %zu: wrote past cap %zu", i,
		      cases[i].cap);
	}
}

/*
 * sprite_list_dir: visible entries in byte order, links followed, and what
 * an entry is when it is neither a file nor a folder.
 */
static void check_list_dir(void)
{
	char d[300], p[400], q[400];
	snprintf(d, sizeof d, "%s/list", dir);
	mkdir(d, 0755);
	static const char *const files[] = {"b.png", "a\nb", ".hidden", "Z"};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", d, files[i]);
		fclose(fopen(p, "w"));
	}
	snprintf(p, sizeof p, "%s/sub", d);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/to-sub", d);
	CHECK(symlink("sub", p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/to-b", d);
	CHECK(symlink("b.png", p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/gone", d);
	CHECK(symlink("nowhere", p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/self", d);
	CHECK(symlink("self", p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/fifo", d);
	CHECK(mkfifo(p, 0644) == 0, "mkfifo");
	static const struct {
		const char *name;
		char kind;
		const char *why;
	} want[] = {
		{"Z", 'f', NULL},
		{"a\nb", 'f', NULL},
		{"b.png", 'f', NULL},
		{"fifo", 0, "a FIFO, not a file or folder"},
		{"gone", 0, "a dangling symbolic link"},
		{"self", 0, NULL}, /* ELOOP: strerror's text */
		{"sub", 'd', NULL},
		{"to-b", 'f', NULL},
		{"to-sub", 'd', NULL},
	};
	static const char links[] = {0, 0, 0, 0, 1, 1, 0, 1, 1}; /* want[i] is a symbolic link */
	struct sprite_dirent **v = NULL;
	size_t n = 0;
	int r = sprite_list_dir(d, &v, &n);
	CHECK(r == 0 && n == sizeof want / sizeof want[0], "list: %d, %zu entries", r, n);
	for (size_t i = 0; r == 0 && i < n && i < sizeof want / sizeof want[0]; i++) {
		CHECK(!strcmp(v[i]->name, want[i].name) && v[i]->kind == want[i].kind,
		      "list entry %zu: \"%s\" kind %d, expected \"%s\" kind %d", i, v[i]->name,
		      v[i]->kind, want[i].name, want[i].kind);
		CHECK((v[i]->kind == 0) == (v[i]->why != NULL),
		      "list entry %zu: why %s with kind %d", i, v[i]->why ? v[i]->why : "NULL",
		      v[i]->kind);
		if (want[i].why && v[i]->why)
			CHECK(!strcmp(v[i]->why, want[i].why), "list entry %zu: why \"%s\"", i,
			      v[i]->why);
		CHECK(v[i]->link == links[i], "list entry %zu: link %d", i, v[i]->link);
	}
	sprite_dirents_free(v, n);
	snprintf(q, sizeof q, "%s/nosuch", d);
	CHECK(sprite_list_dir(q, &v, &n) == -ENOENT, "list of a missing folder");
}

static int file_is(const char *path, const char *want)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	return f && !strcmp(buf, want);
}

/* common/safe_open.c, and the tree checks the source walk and sample loads make. */
static void check_safe_open(void)
{
	char d[300], p[400], q[400], err[SPRITE_ERR_MAX];
	snprintf(d, sizeof d, "%s/safe", dir);
	mkdir(d, 0755);
	snprintf(q, sizeof q, "%s/outside", dir);
	FILE *f = fopen(q, "w");
	fputs("untouched", f);
	fclose(f);
	/* a link planted at our temporary's name, and one at the final name */
	snprintf(p, sizeof p, "%s/x.tmp.%d", d, (int)getpid());
	CHECK(symlink(q, p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/x", d);
	CHECK(symlink(q, p) == 0, "symlink");
	CHECK(sprite_write_file_atomic(p, "new", 3, err) == 0, "write_file_atomic: %s", err);
	CHECK(file_is(q, "untouched"), "a planted link was written through");
	struct stat st;
	CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && file_is(p, "new"),
	      "the final name is not the new regular file");
	snprintf(p, sizeof p, "%s/x.tmp.%d", d, (int)getpid());
	CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode), "the planted link was removed");
	/* stale temporaries: a dead writer's regular file goes, ours and a link stay */
	snprintf(p, sizeof p, "%s/y.tmp.999999999", d);
	fclose(fopen(p, "w"));
	snprintf(p, sizeof p, "%s/y.tmp.999999998.0123456789abcdef", d);
	fclose(fopen(p, "w"));
	snprintf(p, sizeof p, "%s/y.tmp.999999997", d);
	CHECK(symlink(q, p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/y.tmp.%d", d, (int)getpid());
	fclose(fopen(p, "w"));
	int dfd = open(d, O_RDONLY | O_DIRECTORY);
	CHECK(sprite_outfile_sweep(dfd, "y") == 2,
	      "sweep did not remove exactly the 2 stale files");
	CHECK(access(p, F_OK) == 0, "sweep removed a live writer's temporary");
	close(dfd);
	/* a folder anyone may write, not sticky: refused; sticky: taken */
	snprintf(p, sizeof p, "%s/open", dir);
	mkdir(p, 0755);
	chmod(p, 0777);
	snprintf(p, sizeof p, "%s/open/z", dir);
	CHECK(sprite_write_file_atomic(p, "z", 1, err) == -EPERM && strstr(err, "not sticky"),
	      "world-writable folder: %s", err);
	CHECK(sprite_outfile_check(p, err) == -EPERM, "outfile_check: world-writable folder");
	snprintf(p, sizeof p, "%s/open", dir);
	chmod(p, 01777);
	snprintf(p, sizeof p, "%s/open/z", dir);
	CHECK(sprite_write_file_atomic(p, "z", 1, err) == 0, "sticky folder: %s", err);
	/* logs: never through a link, never a FIFO or a hard-linked file */
	snprintf(p, sizeof p, "%s/log", d);
	CHECK(symlink(q, p) == 0, "symlink");
	CHECK(sprite_open_append(p, err) < 0 && strstr(err, "symbolic link"),
	      "append through a link to a file: %s", err);
	snprintf(p, sizeof p, "%s/null", d); /* as /dev/stderr is: a link to no regular file */
	CHECK(symlink("/dev/null", p) == 0, "symlink");
	int nfd = sprite_open_append(p, err);
	CHECK(nfd >= 0, "append through a link to /dev/null in our own folder: %s", err);
	if (nfd >= 0)
		close(nfd);
	snprintf(p, sizeof p, "%s/open/null", dir); /* the same link where anyone may write */
	CHECK(symlink("/dev/null", p) == 0, "symlink");
	CHECK(sprite_open_append(p, err) < 0, "append through a link in a folder anyone may write");
	snprintf(p, sizeof p, "%s/fifo", d);
	CHECK(mkfifo(p, 0644) == 0, "mkfifo");
	CHECK(sprite_open_append(p, err) < 0, "append to a FIFO was taken");
	CHECK(sprite_open_regular(p, err) == -EINVAL && strstr(err, "FIFO"), "read a FIFO: %s",
	      err);
	snprintf(p, sizeof p, "%s/hard", d);
	CHECK(link(q, p) == 0, "link");
	CHECK(sprite_open_append(p, err) == -EINVAL, "append to a hard link: %s", err);
	snprintf(p, sizeof p, "%s/new.log", d);
	int fd = sprite_open_append(p, err);
	CHECK(fd >= 0, "append to a new log: %s", err);
	if (fd >= 0)
		close(fd);
	CHECK(file_is(q, "untouched"), "a log was written through a link");
	/* the tree checks: a link out of a folder, a file opened through one */
	char *top = realpath(d, NULL);
	snprintf(p, sizeof p, "%s/out", d);
	CHECK(symlink("../outside", p) == 0, "symlink");
	CHECK(sprite_path_inside(p, top) == 0, "a link out of the folder counts as inside");
	snprintf(p, sizeof p, "%s/x", d);
	CHECK(sprite_path_inside(p, top) == 1, "a file of the folder counts as outside");
	snprintf(p, sizeof p, "%s/out", d);
	fd = open(p, O_RDONLY);
	CHECK(fd >= 0 && sprite_fd_inside(fd, top) == 0,
	      "a file opened through a link counts as inside");
	if (fd >= 0)
		close(fd);
	snprintf(p, sizeof p, "%s/x", d);
	fd = open(p, O_RDONLY);
	CHECK(fd >= 0 && sprite_fd_inside(fd, top) == 1,
	      "a file of the folder opened counts as outside");
	if (fd >= 0)
		close(fd);
	CHECK(sprite_path_inside("/", "/") == 1, "/ inside /");
	free(top);
}

/* sprite_mountinfo_unescape and _next: mount points and sources with odd bytes. */
static void check_mountinfo_unescape(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"/mnt/plain", "/mnt/plain"},
		{"/mnt/a\\040b", "/mnt/a b"},
		{"/x\\011\\012\\134y", "/x\t\n\\y"},
		{"\\134134", "\\134"}, /* one escape, not two */
		{"/bad\\09x\\4", "/bad\\09x\\4"},
		{"/end\\", "/end\\"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char buf[64];
		snprintf(buf, sizeof buf, "%s", cases[i].in);
		sprite_mountinfo_unescape(buf);
		CHECK(!strcmp(buf, cases[i].out), "mountinfo case %zu: \"%s\", expected \"%s\"", i,
		      buf, cases[i].out);
	}
	/* whole lines: optional tags before " - ", escapes in point and source,
	 * junk passed over */
	FILE *f = tmpfile();
	fputs("36 35 98:0 / /mnt/a\\040b rw,noatime shared:1 master:2 - ext4 "
	      "/dev/sda1 rw\n"
	      "not a mountinfo line\n"
	      "90 36 0:52 /d\\011ir /mnt/s rw - fuse.spritefs /var/x\\040y.sprites "
	      "ro,user_id=0\n",
	      f);
	rewind(f);
	struct sprite_mount m;
	CHECK(sprite_mountinfo_next(f, &m) == 1 && m.id == 36 && !strcmp(m.dev, "98:0") &&
		      !strcmp(m.root, "/") && !strcmp(m.point, "/mnt/a b") &&
		      !strcmp(m.type, "ext4") && !strcmp(m.source, "/dev/sda1"),
	      "mountinfo line 1: %lu %s %s %s %s %s", m.id, m.dev, m.root, m.point, m.type,
	      m.source);
	CHECK(sprite_mountinfo_next(f, &m) == 1 && m.id == 90 && !strcmp(m.dev, "0:52") &&
		      !strcmp(m.root, "/d\tir") && !strcmp(m.point, "/mnt/s") &&
		      !strcmp(m.type, "fuse.spritefs") && !strcmp(m.source, "/var/x y.sprites"),
	      "mountinfo line 3: %lu %s %s %s %s %s", m.id, m.dev, m.root, m.point, m.type,
	      m.source);
	CHECK(sprite_mountinfo_next(f, &m) == 0, "mountinfo: a line after the last");
	fclose(f);
}

/* Each SPRITE_E* code has a name of its own; other codes read as strerror's. */
static void check_strerror(void)
{
	const int codes[] = {SPRITE_EBADMAGIC, SPRITE_EVERSION, SPRITE_ECORRUPT, SPRITE_ECHECKSUM,
			     SPRITE_ETRUNC};
	char unknown[64];
	snprintf(unknown, sizeof unknown, "%s", strerror(SPRITE_ECORRUPT));
	for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
		const char *m = sprite_strerror(codes[i]);
		CHECK(m && m[0] && strcmp(m, unknown) != 0, "code %d: '%s'", codes[i], m ? m : "");
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(m, sprite_strerror(codes[j])) != 0,
			      "codes %d and %d: same text", codes[i], codes[j]);
	}
	CHECK(!strcmp(sprite_strerror(ENOENT), strerror(ENOENT)), "ENOENT: '%s'",
	      sprite_strerror(ENOENT));
	CHECK(!strcmp(sprite_strerror(SPRITE_ECHECKSUM), "checksum mismatch"), "'%s'",
	      sprite_strerror(SPRITE_ECHECKSUM));
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	check_checksum();
	check_utf8();
	check_mountinfo_unescape();
	check_escape();
	check_list_dir();
	check_safe_open();
	check_strerror();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (failures) {
		fprintf(stderr, "test_util: %d failures\n", failures);
		return 1;
	}
	printf("test_util: ok\n");
	return 0;
}
