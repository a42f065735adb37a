/*
 * ll.c - the FUSE low-level operations of spritefs, in one const table.
 *
 * The tree is immutable while mounted, so every reply carries long entry and
 * attribute timeouts and the kernel keeps its page cache of every file: a
 * second read of a file never reaches the daemon. Where the kernel allows it
 * (FUSE no_open), opens do not reach it either: the first open answers
 * ENOSYS, and from then on the kernel opens files by itself, keeping their
 * cache, and sends no open or release. A trainer that opens a small epoch
 * batch or a by-class image per sample saves a round trip per file: warm
 * open+read+close of a 50 KB batch file costs about half as much.
 *
 * Only stats.json changes. It is one page (SFS_STATS_SIZE, padded), its
 * attributes never cache, and its mtime moves every 10 ms and with every
 * failure counted (EIO, checksum, read errors); with
 * auto_inval_data, a read() after a change finds the page invalidated and
 * gets a fresh snapshot, taken whole in one reply. Without no_open
 * (-o kernel_open=0, or an old kernel), it is opened direct_io and every
 * read takes a snapshot.
 *
 * Reads are answered from pinned sheets (one copy, into the reader, done by
 * the kernel): replies of 64 KiB or more through a pipe (vmsplice of the
 * sheets' pages, then splice to /dev/fuse; see reply_spliced), others with
 * fuse_reply_iov() (writev); the sheets are unpinned once the reply is
 * written. Requests are never taken by splice (SPLICE_READ), and pages are
 * never moved (SPLICE_MOVE): the cache reuses its blocks.
 *
 * Everything that would change the tree answers EROFS (the mount is also
 * made read-only, so the kernel usually answers first).
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/sfs.h"

#define TIMEOUT 86400.0

static struct sfs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * The seed slot an inode carries (epochs/<seed> and below), or -1. The
 * kernel's lookups of these are counted, so that a slot it no longer holds
 * any inode of can go to another seed (epoch.c).
 */
static int64_t slot_of(uint64_t ino)
{
	switch (sfs_ino_kind(ino)) {
	case SFS_K_SEED_DIR:
		return sfs_ino_a(ino);
	case SFS_K_EPOCH_DIR:
	case SFS_K_EPOCH_BATCH:
		return sfs_ep_slot(sfs_ino_a(ino));
	}
	return -1;
}

static void fill_stat(struct sfs *fs, const struct sfs_attr *a, struct stat *st)
{
	struct timespec t = fs->mtime;
	if (sfs_ino_kind(a->ino) == SFS_K_STATS_JSON) {
		/*
		 * The counters move: a new mtime (10 ms steps) makes the kernel
		 * re-read. Within a step the nanoseconds count the failures, so a
		 * reader that has just had EIO finds it counted, not a page cached
		 * before it.
		 */
		uint64_t failed = SFS_GET(fs, eio) + SFS_GET(fs, checksum_failures) +
				  SFS_GET(fs, read_errors);
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec -= t.tv_nsec % 10000000;
		t.tv_nsec += (long)(failed % 10000000);
	}
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->dir ? (S_IFDIR | fs->dir_mode) : (S_IFREG | fs->file_mode);
	st->st_nlink = a->nlink;
	st->st_size = (off_t)a->size;
	st->st_blksize = 1 << 20;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_uid = fs->owner;
	st->st_gid = fs->group;
	st->st_atim = st->st_mtim = st->st_ctim = t;
}

static void sfs_ll_init(void *userdata, struct fuse_conn_info *conn)
{
	struct sfs *fs = userdata;
	/* 1 MiB requests: libfuse derives max_pages from max_write */
	conn->max_write = SFS_MAX_READ;
	conn->max_readahead =
		conn->max_readahead > SFS_MAX_READ ? conn->max_readahead : SFS_MAX_READ;
	/*
	 * Requests the kernel keeps in flight for async reads (an O_DIRECT read
	 * is split into 1 MiB requests): the kernel's 12 would be filled by
	 * readers of later batches that the cache holds back (stream.c,
	 * admit) while the oldest batch's requests queue behind them.
	 */
	conn->max_background = SFS_MAX_BACKGROUND;
	conn->congestion_threshold = SFS_MAX_BACKGROUND * 3 / 4;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* always plus: a listing makes every inode (see readdir_common) */
	if (conn->capable & FUSE_CAP_READDIRPLUS) {
		conn->want |= FUSE_CAP_READDIRPLUS;
		conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
	}
	conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
				  FUSE_CAP_SPLICE_READ | FUSE_CAP_WRITEBACK_CACHE);
	/* replies by splice only: requests are small, and pages never move (no SPLICE_MOVE) */
	if (fs->o.splice && (conn->capable & FUSE_CAP_SPLICE_WRITE)) {
		conn->want |= FUSE_CAP_SPLICE_WRITE;
		fs->splice_write = 1;
	}
	if ((conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) &&
	    (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) && fs->o.kernel_open) {
		/* every file's mtime is fixed but stats.json's: only it gets invalidated */
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
		fs->no_open = 1;
	} else {
		conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	}
}

static void fill_entry(struct sfs *fs, const struct sfs_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = a->ino;
	e->generation = 1;
	fill_stat(fs, a, &e->attr);
	e->attr_timeout = sfs_ino_kind(a->ino) == SFS_K_STATS_JSON ? 0 : TIMEOUT;
	e->entry_timeout = TIMEOUT;
}

static void sfs_ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct sfs *fs = fs_of(req);
	struct sfs_attr a;
	SFS_ADD(fs, lookups, 1);
	SFS_ADD(fs, requests, 1);
	int r = sfs_tree_lookup(fs, parent, name, (uint32_t)fuse_req_ctx(req)->uid, &a);
	/* a seed directory's lookup was counted when its slot was found */
	int64_t slot = r < 0 ? -1 : slot_of(a.ino);
	if (slot >= 0 && sfs_ino_kind(a.ino) != SFS_K_SEED_DIR)
		r = sfs_seed_ref(fs, (uint32_t)slot, NULL);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	/* the order is built while the kernel opens the file: its read mostly finds it */
	if (sfs_ino_kind(a.ino) == SFS_K_EPOCH_BATCH)
		sfs_epoch_prepare(fs, sfs_ep_slot(sfs_ino_a(a.ino)), sfs_ep_epoch(sfs_ino_a(a.ino)),
				  sfs_ino_split(a.ino));
	struct fuse_entry_param e;
	fill_entry(fs, &a, &e);
	if (fuse_reply_entry(req, &e) != 0 && slot >= 0)
		sfs_seed_unref(fs, (uint32_t)slot, 1); /* the kernel did not take it */
}

static void forget_one(struct sfs *fs, uint64_t ino, uint64_t nlookup)
{
	int64_t slot = slot_of(ino);
	if (slot >= 0)
		sfs_seed_unref(fs, (uint32_t)slot, nlookup);
}

static void sfs_ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void sfs_ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct sfs *fs = fs_of(req);
	for (size_t k = 0; k < count; k++)
		forget_one(fs, forgets[k].ino, forgets[k].nlookup);
	fuse_reply_none(req);
}

static void sfs_ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs *fs = fs_of(req);
	struct sfs_attr a;
	struct stat st;
	SFS_ADD(fs, requests, 1);
	int r = sfs_tree_attr(fs, ino, &a);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	fill_stat(fs, &a, &st);
	fuse_reply_attr(req, &st, sfs_ino_kind(ino) == SFS_K_STATS_JSON ? 0 : TIMEOUT);
}

static void sfs_ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			   struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_readonly_entry(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
				  dev_t rdev)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			  const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			  struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			     struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			    size_t size, int flags)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void sfs_ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs *fs = fs_of(req);
	struct sfs_attr a;
	SFS_ADD(fs, opens, 1);
	SFS_ADD(fs, requests, 1);
	int r = sfs_tree_attr(fs, ino, &a);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (a.dir) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (fs->no_open) {
		/* the kernel takes this as "open without asking, keep the cache" */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	/* stats.json changes: no page cache for it (each read takes a snapshot) */
	int live = sfs_ino_kind(ino) == SFS_K_STATS_JSON;
	fi->direct_io = live;
	fi->keep_cache = !live;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

/* stats.json: a snapshot per read; with no_open, the cached page is one reply */
static void read_stats(fuse_req_t req, struct sfs *fs, size_t size, off_t off)
{
	size_t len = 0;
	char *j = sfs_stats_json(fs, &len);
	if (!j) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t o = (uint64_t)off < len ? (size_t)off : len;
	size_t n = len - o < size ? len - o : size;
	SFS_ADD(fs, bytes_served, n);
	fuse_reply_buf(req, j + o, n);
	free(j);
}

/*
 * Spliced replies. The writev of fuse_reply_iov() makes the kernel take a
 * reference to each 4 KiB page of the reply's source, one page per call
 * (fuse_copy_fill: iov_iter_get_pages2 of one page), which costs a cold
 * pass over raw sheets about a tenth of the daemon's time. vmsplice() takes
 * the same pages 16 to a call into a pipe, and the splice from the pipe to
 * /dev/fuse (libfuse's fuse_reply_data with the pipe as a descriptor
 * buffer, moved pipe to pipe) copies from the pipe's pages: still one copy,
 * into the reader's buffer or page cache. A pipe per thread, made on first
 * use, 2 MiB (512 pages) so that a 1 MiB reply fits with its piece ends.
 * Past pipe-max-size (1 MiB by default) only CAP_SYS_RESOURCE grows a pipe;
 * a 1 MiB pipe takes replies up to about 1 MiB - 12 KiB, and the rest go
 * by writev (counted in splice_fallbacks). The pipe holds references to the sheet's pages, not
 * a copy, so nothing may stay in it past the reply: a pipe found not empty
 * afterwards is closed (its references with it) and made anew.
 */
#define SPLICE_PIPE (2u * SFS_MAX_READ)
#define SPLICE_MIN  (64u << 10) /* smaller replies: writev (libfuse copies under 2 pages) */

static void pipe_close(struct sfs_rbuf *rb)
{
	close(rb->pipe_fd[0]);
	close(rb->pipe_fd[1]);
	rb->pipe_state = 0;
}

/* 1 when this thread's pipe is there, made now if need be */
static int pipe_ready(struct sfs_rbuf *rb)
{
	if (rb->pipe_state)
		return rb->pipe_state > 0;
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
		rb->pipe_state = -1;
		return 0;
	}
	/* 2 MiB needs CAP_SYS_RESOURCE or pipe-max-size; 1 MiB, its default, anyone */
	int got = fcntl(p[1], F_SETPIPE_SZ, (int)SPLICE_PIPE);
	if (got < 0)
		got = fcntl(p[1], F_SETPIPE_SZ, (int)SPLICE_PIPE / 2);
	if (got < (int)SPLICE_PIPE / 2) {
		close(p[0]);
		close(p[1]);
		rb->pipe_state = -1; /* libfuse's own pipe could not grow either */
		return 0;
	}
	rb->pipe_bytes = (size_t)got;
	rb->pipe_fd[0] = p[0];
	rb->pipe_fd[1] = p[1];
	rb->pipe_state = 1;
	return 1;
}

/* pipe buffers for the reply: one per page each piece touches */
static size_t pipe_slots(const struct sfs_rbuf *rb)
{
	size_t n = 0;
	for (int k = 0; k < rb->niov; k++) {
		size_t at = (uintptr_t)rb->iov[k].iov_base & 4095u;
		n += (at + rb->iov[k].iov_len + 4095u) / 4096u;
	}
	return n;
}

/*
 * The pages libfuse's pipe holds for a reply of n bytes, at least: it grows
 * it to its estimate (3 pages + header + n, fuse_send_data_iov), which the
 * kernel rounds up to a power of two pages.
 */
static size_t libfuse_slots(size_t n)
{
	size_t want = (3u * 4096u + 16u + n + 4095u) / 4096u, slots = 1;
	while (slots < want)
		slots *= 2;
	return slots;
}

/* Answer req from rb through the pipe: 1 when replied, 0 when the caller must. */
static int reply_spliced(fuse_req_t req, struct sfs *fs, struct sfs_rbuf *rb)
{
	if (!fs->splice_write || rb->total < SPLICE_MIN)
		return 0;
	/*
	 * libfuse grows its pipe as far as ours could grow, or answers with a
	 * copy; +1: the reply's header goes first into libfuse's pipe
	 */
	size_t slots = pipe_slots(rb);
	if (!pipe_ready(rb) || 3u * 4096u + 16u + rb->total > rb->pipe_bytes ||
	    slots > rb->pipe_bytes / 4096u || slots + 1 > libfuse_slots(rb->total)) {
		SFS_ADD(fs, splice_fallbacks, 1);
		return 0;
	}
	ssize_t w = vmsplice(rb->pipe_fd[1], rb->iov, (unsigned long)rb->niov, SPLICE_F_NONBLOCK);
	if (w != (ssize_t)rb->total) {
		pipe_close(rb); /* drops what went in */
		SFS_ADD(fs, splice_fallbacks, 1);
		return 0;
	}
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(rb->total);
	bv.buf[0].flags = FUSE_BUF_IS_FD;
	bv.buf[0].fd = rb->pipe_fd[0];
	int r = fuse_reply_data(req, &bv, 0);
	int left = 0;
	if (r != 0 || ioctl(rb->pipe_fd[0], FIONREAD, &left) < 0 || left != 0)
		pipe_close(rb);
	if (r == 0)
		SFS_ADD(fs, bytes_spliced, rb->total);
	return 1;
}

/* Every other file: bytes from pinned sheets (read.c), unpinned once replied. */
static void read_file(fuse_req_t req, struct sfs *fs, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct sfs_rbuf *rb = sfs_rbuf_get(fs, size);
	if (!rb) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rb->direct = (fi->flags & O_DIRECT) != 0; /* the reader's open flags */
	int r = sfs_read_file(fs, ino, (uint64_t)off, size, rb);
	if (r < 0) {
		sfs_rbuf_release(fs, rb);
		if (r == -EIO)
			SFS_ADD(fs, eio, 1);
		fuse_reply_err(req, -r);
		return;
	}
	SFS_ADD(fs, bytes_served, rb->total);
	if (rb->flat)
		fuse_reply_buf(req, (const char *)rb->out, rb->total);
	else if (!reply_spliced(req, fs, rb))
		fuse_reply_iov(req, rb->iov, rb->niov);
	sfs_rbuf_release(fs, rb);
}

static void sfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct sfs *fs = fs_of(req);
	SFS_ADD(fs, requests, 1);
	SFS_ADD(fs, reads, 1);
	if (off < 0)
		fuse_reply_err(req, EINVAL);
	else if (sfs_ino_kind(ino) == SFS_K_STATS_JSON)
		read_stats(req, fs, size, off);
	else
		read_file(req, fs, ino, size, off, fi);
}

static void sfs_ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs *fs = fs_of(req);
	struct sfs_attr a;
	SFS_ADD(fs, requests, 1);
	int r = sfs_tree_attr(fs, ino, &a);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (!a.dir) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* epochs/ grows as seeds are looked up: list it afresh on every open */
	int fixed = sfs_ino_kind(ino) != SFS_K_EPOCHS_DIR;
	fi->cache_readdir = fixed;
	fi->keep_cache = fixed;
	fuse_reply_open(req, fi);
}

/*
 * readdir and readdirplus. With plus, each entry carries its attributes and
 * the kernel makes the inode at once: a reader that lists batches/ before
 * reading it needs no lookup per file, and the decode workers can push sheets
 * into the page cache of files the reader has not opened yet (an inode the
 * kernel does not hold cannot be pushed to). Inodes are computed, not
 * allocated; only those under epochs/ have their lookups counted (their
 * seed slot is recycled once the kernel forgets them all), "." and ".."
 * aside, which the kernel does not count.
 */
static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct sfs *fs = fs_of(req);
	SFS_ADD(fs, requests, 1);
	if (size > 1 << 20)
		size = 1 << 20;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	char name[256];
	for (uint64_t i = off < 0 ? 0 : (uint64_t)off;; i++) {
		struct sfs_attr a;
		int r = sfs_tree_dirent(fs, ino, i, name, &a);
		if (r < 0) {
			free(buf);
			fuse_reply_err(req, -r);
			return;
		}
		if (r == 0)
			break;
		if (r == 2)
			continue; /* a hole: a seed slot free again */
		size_t need;
		if (plus) {
			struct fuse_entry_param e;
			int64_t slot = i < 2 ? -1 : slot_of(a.ino);
			if (slot >= 0) {
				/* the slot may have gone to another seed since the name was made */
				uint64_t seed = strtoull(name, NULL, 10);
				int seed_dir = sfs_ino_kind(a.ino) == SFS_K_SEED_DIR;
				if (sfs_seed_ref(fs, (uint32_t)slot, seed_dir ? &seed : NULL) < 0)
					continue;
			}
			fill_entry(fs, &a, &e);
			need = fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
						      (off_t)(i + 1));
			if (need > size - used && slot >= 0)
				sfs_seed_unref(fs, (uint32_t)slot, 1);
		} else {
			struct stat st;
			memset(&st, 0, sizeof(st));
			st.st_ino = a.ino;
			st.st_mode = a.dir ? S_IFDIR : S_IFREG;
			need = fuse_add_direntry(req, buf + used, size - used, name, &st,
						 (off_t)(i + 1));
		}
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void sfs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, 0);
}

static void sfs_ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, 1);
}

static void sfs_ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct sfs *fs = fs_of(req);
	struct statvfs sv;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = fs->info->file_size / 4096;
	sv.f_files = fs->info->nsheets;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

static void sfs_ll_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct sfs *fs = fs_of(req);
	struct sfs_attr a;
	int r = sfs_tree_attr(fs, ino, &a);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_err(req, (mask & W_OK) ? EROFS : 0);
}

const struct fuse_lowlevel_ops sfs_ll_ops = {
	.init = sfs_ll_init,
	.lookup = sfs_ll_lookup,
	.forget = sfs_ll_forget,
	.forget_multi = sfs_ll_forget_multi,
	.getattr = sfs_ll_getattr,
	.setattr = sfs_ll_setattr,
	.mknod = sfs_ll_readonly_entry,
	.mkdir = sfs_ll_mkdir,
	.unlink = sfs_ll_unlink,
	.rmdir = sfs_ll_unlink,
	.symlink = sfs_ll_symlink,
	.rename = sfs_ll_rename,
	.link = sfs_ll_link,
	.open = sfs_ll_open,
	.read = sfs_ll_read,
	.write = sfs_ll_write,
	.opendir = sfs_ll_opendir,
	.readdir = sfs_ll_readdir,
	.readdirplus = sfs_ll_readdirplus,
	.statfs = sfs_ll_statfs,
	.setxattr = sfs_ll_setxattr,
	.removexattr = sfs_ll_removexattr,
	.access = sfs_ll_access,
	.create = sfs_ll_create,
	.fallocate = sfs_ll_fallocate,
};
