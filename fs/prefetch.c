/*
 * prefetch.c - read stored sheets with io_uring, decode them on workers.
 *
 * One thread owns the ring. It takes sheet numbers from two queues (urgent:
 * a reader sleeps on it; ahead: a prefetch hint), reads the whole stored
 * extent of each (offsets and sizes are 4 KiB-aligned in the store, so the
 * read is O_DIRECT-legal) into one of a few registered buffers with
 * read_fixed, and hands the filled buffer to a pool of decode workers, which
 * check the checksums, lz4-decompress into a fresh mapping and publish the
 * sheet to the cache. The buffer returns to the ring thread when decoded, so
 * the number of buffers bounds both the reads in flight and the memory held.
 * A sheet stored raw (lz4 did not pay, docs/FORMAT.md) is read straight into
 * the cache block it will be served from, the buffer's slot only counting
 * the read: its worker verifies it in place, no copy, no decode.
 * A sheet loaded ahead of a reader of batches/ is then pushed into the
 * kernel's page cache of its batch file by the worker that decoded it
 * (push_batch), the one FUSE call made outside ll.c.
 *
 * Other threads wake the ring thread through an eventfd that the ring itself
 * polls (IORING_OP_POLL_ADD), so the thread sleeps in one place only:
 * io_uring_wait_cqe().
 *
 * O_DIRECT keeps the page cache out of the way (we hold decoded sheets
 * ourselves; caching the compressed bytes too would double memory). When the
 * filesystem refuses it (open or read fails with EINVAL), or with -o direct=0,
 * the same reads go through the page cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/sfs.h"

#define WAKE_TAG    UINT64_MAX
#define MAX_BUFS    32u
#define BUF_MEM_CAP (64ull << 20) /* bytes of I/O buffers, at most (unless one sheet is larger) */
#define BUF_HUGE    (2u << 20)	  /* buffers this large or larger: in transparent huge pages */

enum { Q_NONE = 0, Q_AHEAD, Q_URGENT, Q_ISSUED };

struct job {
	uint32_t sheet;
	uint32_t buf;
	size_t len; /* bytes read */
};

struct sfs_prefetch {
	struct sfs *fs;
	struct io_uring ring;
	int ring_ok;
	int efd;
	int fd; /* O_DIRECT descriptor, or the store's own */
	int direct;
	uint32_t nregistered; /* buffers 0..nregistered-1 are registered with the ring */
	uint8_t **bufs;
	uint8_t **mem; /* per buffer slot: the cache block a raw sheet is read into, or NULL */
	size_t buf_len;
	uint32_t nbufs;

	pthread_mutex_t lock;
	uint32_t *freebufs;
	uint32_t nfree;
	uint32_t *urgent, *ahead; /* ring queues of sheet numbers, capacity nsheets */
	uint32_t uh, ut, un, ah, at, an, cap;
	uint8_t *mark;	      /* Q_* per sheet */
	uint8_t *urgent_read; /* 1 while a read a reader waits for is in flight */
	int stop;
	uint32_t inflight, urgent_inflight;

	pthread_t ring_thread;
	int ring_started;

	/* decode queue */
	pthread_mutex_t dlock;
	pthread_cond_t dcond;
	struct job *dq;
	uint32_t dh, dn;
	int dstop;
	pthread_t *workers;
	uint32_t nworkers;
};

static void wake(struct sfs_prefetch *p)
{
	uint64_t one = 1;
	ssize_t r = write(p->efd, &one, sizeof(one));
	(void)r;
}

static void push_q(uint32_t *q, uint32_t *t, uint32_t *n, uint32_t cap, uint32_t v)
{
	q[*t] = v;
	*t = (*t + 1) % cap;
	(*n)++;
}

static uint32_t pop_q(uint32_t *q, uint32_t *h, uint32_t *n, uint32_t cap)
{
	uint32_t v = q[*h];
	*h = (*h + 1) % cap;
	(*n)--;
	return v;
}

void sfs_prefetch_submit(struct sfs *fs, uint32_t i, int urgent)
{
	struct sfs_prefetch *p = fs->pf;
	int woke = 0;
	pthread_mutex_lock(&p->lock);
	uint8_t m = p->mark[i];
	if (urgent == 2 && m != Q_AHEAD)
		m = Q_ISSUED; /* promote only what still waits in the ahead queue */
	if (m == Q_NONE || (urgent && m == Q_AHEAD)) {
		if (urgent) {
			/* un may exceed nsheets only if a sheet sat in both queues: bounded by cap
			 */
			if (p->un < p->cap) {
				push_q(p->urgent, &p->ut, &p->un, p->cap, i);
				p->mark[i] = Q_URGENT;
				woke = 1;
			}
		} else if (p->an < p->cap) {
			push_q(p->ahead, &p->at, &p->an, p->cap, i);
			p->mark[i] = Q_AHEAD;
			woke = 1;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (woke)
		wake(p);
}

uint64_t sfs_prefetch_mem(struct sfs *fs)
{
	struct sfs_prefetch *p = fs->pf;
	return p ? (uint64_t)p->nbufs * p->buf_len : 0;
}

int sfs_prefetch_direct(struct sfs *fs)
{
	struct sfs_prefetch *p = fs->pf;
	return p ? __atomic_load_n(&p->direct, __ATOMIC_RELAXED) : 0;
}

/*
 * Next sheet to read (locked), or UINT32_MAX. While a reader waits on a read,
 * reads ahead go out one at a time: the device serves what is in flight side
 * by side, so eight sheets issued with the urgent one would make the reader
 * wait for all of them (a cold mount's first read: 8.6 ms instead of ~1.5).
 */
static uint32_t next_sheet(struct sfs_prefetch *p)
{
	while (p->un) {
		uint32_t i = pop_q(p->urgent, &p->uh, &p->un, p->cap);
		if (p->mark[i] == Q_URGENT) {
			p->urgent_read[i] = 1;
			p->urgent_inflight++;
			return i;
		}
	}
	if (p->urgent_inflight && p->inflight > p->urgent_inflight)
		return UINT32_MAX;
	while (p->an) {
		uint32_t i = pop_q(p->ahead, &p->ah, &p->an, p->cap);
		if (p->mark[i] == Q_AHEAD)
			return i;
	}
	return UINT32_MAX;
}

static void arm_wake(struct sfs_prefetch *p)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&p->ring);
	if (!sqe)
		return;
	io_uring_prep_poll_add(sqe, p->efd, POLLIN);
	io_uring_sqe_set_data64(sqe, WAKE_TAG);
}

static void prep_read(struct sfs_prefetch *p, uint32_t sheet, uint32_t b, size_t done)
{
	const struct sprite_sheet_entry *e = &p->fs->info->sheets[sheet];
	size_t want = ((size_t)e->stored_size + 4095) & ~(size_t)4095;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&p->ring);
	if (!sqe) {
		io_uring_submit(&p->ring);
		sqe = io_uring_get_sqe(&p->ring);
	}
	if (p->mem[b])
		io_uring_prep_read(sqe, p->fd, p->mem[b] + done, (unsigned)(want - done),
				   e->offset + done);
	else if (b < p->nregistered)
		io_uring_prep_read_fixed(sqe, p->fd, p->bufs[b] + done, (unsigned)(want - done),
					 e->offset + done, (int)b);
	else
		io_uring_prep_read(sqe, p->fd, p->bufs[b] + done, (unsigned)(want - done),
				   e->offset + done);
	io_uring_sqe_set_data64(sqe, ((uint64_t)done << 40) | ((uint64_t)b << 32) | sheet);
	p->inflight++;
	SFS_ADD(p->fs, inflight, 1);
	SFS_ADD(p->fs, uring_reads, 1);
}

/* The read of a sheet is over (read whole, or failed for good). Ring thread only. */
static void read_over(struct sfs_prefetch *p, uint32_t sheet)
{
	if (p->urgent_read[sheet]) {
		pthread_mutex_lock(&p->lock);
		p->urgent_read[sheet] = 0;
		p->urgent_inflight--;
		pthread_mutex_unlock(&p->lock);
	}
}

static void fail_sheet(struct sfs_prefetch *p, uint32_t sheet, uint32_t b, int err)
{
	read_over(p, sheet);
	struct sfs *fs = p->fs;
	sfs_log("spritefs: %s: sheet %u: read failed: %s", fs->store_path, sheet, strerror(-err));
	SFS_ADD(fs, read_errors, 1);
	sfs_sheet_mem_put(fs, p->mem[b]);
	pthread_mutex_lock(&p->lock);
	p->mem[b] = NULL;
	p->freebufs[p->nfree++] = b;
	p->mark[sheet] = Q_NONE;
	pthread_mutex_unlock(&p->lock);
	sfs_cache_complete(fs, sheet, NULL, -EIO);
}

static void to_decode(struct sfs_prefetch *p, uint32_t sheet, uint32_t b, size_t len)
{
	pthread_mutex_lock(&p->dlock);
	uint32_t t = (p->dh + p->dn) % p->nbufs;
	p->dq[t] = (struct job){.sheet = sheet, .buf = b, .len = len};
	p->dn++;
	pthread_cond_signal(&p->dcond);
	pthread_mutex_unlock(&p->dlock);
}

static void on_cqe(struct sfs_prefetch *p, uint64_t tag, int res)
{
	uint32_t sheet = (uint32_t)tag;
	uint32_t b = (uint32_t)(tag >> 32) & 0xff;
	size_t done = (size_t)(tag >> 40);
	const struct sprite_sheet_entry *e = &p->fs->info->sheets[sheet];

	p->inflight--;
	SFS_SUB(p->fs, inflight, 1);
	if (res == -EINVAL && p->direct) {
		/* the filesystem took O_DIRECT at open but refuses it now: go buffered */
		sfs_log("spritefs: %s: O_DIRECT read refused, using buffered reads",
			p->fs->store_path);
		if (p->fd != sprite_store_fd(p->fs->store))
			close(p->fd);
		p->fd = sprite_store_fd(p->fs->store);
		__atomic_store_n(&p->direct, 0, __ATOMIC_RELAXED); /* stats.json reads it */
		/* registered buffers work on any descriptor: they stay */
		prep_read(p, sheet, b, done);
		return;
	}
	if (res == -EAGAIN || res == -EINTR) {
		prep_read(p, sheet, b, done);
		return;
	}
	if (res < 0) {
		fail_sheet(p, sheet, b, res);
		return;
	}
	done += (size_t)res;
	SFS_ADD(p->fs, uring_bytes, (uint64_t)res);
	if (done < e->stored_size) {
		if (res == 0) {
			fail_sheet(p, sheet, b, -EIO); /* file shrank under us */
			return;
		}
		prep_read(p, sheet, b, done); /* short read: ask for the rest */
		return;
	}
	read_over(p, sheet);
	to_decode(p, sheet, b, done);
}

static void *ring_main(void *arg)
{
	struct sfs_prefetch *p = arg;
	arm_wake(p);
	for (;;) {
		pthread_mutex_lock(&p->lock);
		while (p->nfree && !p->stop) {
			uint32_t i = next_sheet(p);
			if (i == UINT32_MAX)
				break;
			p->mark[i] = Q_ISSUED;
			uint32_t b = p->freebufs[--p->nfree];
			pthread_mutex_unlock(&p->lock);
			/* raw: into its cache block (when one is free; else the buffer) */
			if (p->fs->info->sheets[i].codec == SPRITE_CODEC_RAW)
				p->mem[b] = sfs_sheet_mem_get(p->fs);
			prep_read(p, i, b, 0);
			pthread_mutex_lock(&p->lock);
		}
		int stop = p->stop;
		pthread_mutex_unlock(&p->lock);
		if (stop && p->inflight == 0)
			break;
		io_uring_submit(&p->ring);

		struct io_uring_cqe *cqe;
		int r = io_uring_wait_cqe(&p->ring, &cqe);
		if (r == -EINTR)
			continue;
		if (r < 0) {
			sfs_log("spritefs: io_uring wait failed: %s", strerror(-r));
			break;
		}
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&p->ring, head, cqe)
		{
			uint64_t tag = io_uring_cqe_get_data64(cqe);
			int res = cqe->res;
			seen++;
			if (tag == WAKE_TAG) {
				uint64_t v;
				ssize_t rr = read(p->efd, &v, sizeof(v));
				(void)rr;
				arm_wake(p);
			} else {
				on_cqe(p, tag, res);
			}
		}
		io_uring_cq_advance(&p->ring, seen);
	}
	return NULL;
}

/*
 * Store decoded sheet i into the kernel's page cache of its batch file, in
 * 1 MiB pieces (fuse_lowlevel_notify_store), from the decode worker that
 * made it. A reader going through batches/ in order then finds the pages
 * there: the copy into the page cache runs on the worker's core, alongside
 * the reader, instead of inside the reader's read() round trip. The kernel
 * answers ENOENT for a file it has not looked up; nothing is lost then, the
 * read comes to the daemon as usual.
 */
static void push_batch(struct sfs *fs, uint32_t i, const uint8_t *raw)
{
	const struct sprite_sheet_entry *e = &fs->info->sheets[i];
	struct fuse_session *se = __atomic_load_n(&fs->se, __ATOMIC_ACQUIRE);
	if (!se)
		return;
	uint64_t ino = sfs_ino(SFS_K_BATCH, e->split, 0, i - fs->splits[e->split].first_sheet);
	size_t len = e->raw_size, done = 0;
	while (done < len) {
		size_t n = len - done < SFS_MAX_READ ? len - done : SFS_MAX_READ;
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);
		bv.buf[0].mem = (void *)(uintptr_t)(raw + done);
		if (fuse_lowlevel_notify_store(se, ino, (off_t)done, &bv, 0) != 0)
			break;
		done += n;
	}
	if (done == len)
		SFS_ADD(fs, sheets_pushed, 1);
	SFS_ADD(fs, bytes_pushed, done);
}

static void *worker_main(void *arg)
{
	struct sfs_prefetch *p = arg;
	struct sfs *fs = p->fs;
	char err[SPRITE_ERR_MAX];
	for (;;) {
		pthread_mutex_lock(&p->dlock);
		while (!p->dn && !p->dstop)
			pthread_cond_wait(&p->dcond, &p->dlock);
		if (!p->dn) {
			pthread_mutex_unlock(&p->dlock);
			break;
		}
		struct job j = p->dq[p->dh];
		p->dh = (p->dh + 1) % p->nbufs;
		p->dn--;
		pthread_mutex_unlock(&p->dlock);

		const struct sprite_sheet_entry *e = &fs->info->sheets[j.sheet];
		/* a raw sheet read into its block is verified there (decode copies nothing) */
		uint8_t *in_place = p->mem[j.buf];
		uint8_t *raw = in_place ? in_place : sfs_sheet_mem_get(fs);
		int64_t r;
		double t0 = sprite_now();
		if (!raw) {
			r = -ENOMEM;
			snprintf(err, sizeof(err), "out of memory");
		} else {
			err[0] = 0;
			r = sprite_sheet_decode(fs->store, j.sheet, in_place ? raw : p->bufs[j.buf],
						e->stored_size, raw, sfs_sheet_mem_block(fs), err);
		}
		SFS_ADD(fs, decode_ns, (uint64_t)((sprite_now() - t0) * 1e9));

		pthread_mutex_lock(&p->lock);
		p->mem[j.buf] = NULL;
		p->freebufs[p->nfree++] = j.buf;
		p->mark[j.sheet] = Q_NONE;
		pthread_mutex_unlock(&p->lock);
		wake(p);

		if (r < 0) {
			sfs_sheet_mem_put(fs, raw);
			if (r == -SPRITE_ECHECKSUM || r == -SPRITE_ECORRUPT) {
				SFS_ADD(fs, checksum_failures, 1);
				const struct sprite_split_entry *sp = &fs->info->splits[e->split];
				/* the line names the sheet already: drop the store's "sheet N: " */
				char pre[32];
				int pl = snprintf(pre, sizeof(pre), "sheet %u: ", j.sheet);
				const char *why = strncmp(err, pre, (size_t)pl) ? err : err + pl;
				sfs_log("spritefs: %s: sheet %u (split %.*s, samples %llu..%llu, "
					"offset "
					"%llu): %s; files that need it give EIO",
					fs->store_path, j.sheet, (int)SPRITE_SPLIT_NAME_MAX,
					sp->name, (unsigned long long)e->first,
					(unsigned long long)(e->first + e->count - 1),
					(unsigned long long)e->offset, why[0] ? why : "bad sheet");
			} else if (err[0]) { /* the store's message names the sheet */
				sfs_log("spritefs: %s: %s", fs->store_path, err);
			} else {
				sfs_log("spritefs: %s: sheet %u: %s", fs->store_path, j.sheet,
					strerror((int)-r));
			}
			sfs_cache_complete(fs, j.sheet, NULL, (int)r);
		} else {
			SFS_ADD(fs, sheets_decoded, 1);
			SFS_ADD(fs, raw_bytes_decoded, (uint64_t)r);
			if (sfs_cache_complete(fs, j.sheet, raw, 0)) {
				push_batch(fs, j.sheet, raw);
				sfs_sheet_put(fs, j.sheet);
			}
		}
	}
	return NULL;
}

/*
 * An I/O buffer of len bytes. From BUF_HUGE up (len then a multiple of it),
 * 2 MiB-aligned and asking for transparent huge pages: an O_DIRECT read of
 * a sheet into 4 KiB pages is as many scattered segments, split into
 * requests of at most the device's max_segments (254 on virtio), each
 * mapped page by page; into huge pages it is one request of a few segments,
 * and the decode worker's checksum and lz4 read it through fewer TLB
 * entries (docs/ARCHITECTURE.md, "CPU floor"). NULL when it cannot be had.
 */
static uint8_t *map_buf(size_t len)
{
	size_t pad = len >= BUF_HUGE ? BUF_HUGE : 0;
	uint8_t *m =
		mmap(NULL, len + pad, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (!pad)
		return m;
	size_t head = (BUF_HUGE - (uintptr_t)m % BUF_HUGE) % BUF_HUGE;
	if (head)
		munmap(m, head);
	if (pad - head)
		munmap(m + head + len, pad - head);
	(void)madvise(m + head, len, MADV_HUGEPAGE); /* a hint: 4 KiB pages work too */
	return m + head;
}

/*
 * Registration pins the I/O buffers once instead of on every read. It is
 * optional: without CAP_IPC_LOCK the pinned bytes count against
 * RLIMIT_MEMLOCK (often 8 MiB, under the buffers' 64 MiB), so the soft limit
 * is raised to the hard one, and where all the buffers still do not fit, as
 * many as fit are registered (halving); the rest are read into unregistered.
 * stats.json tells how many are (io_buffers_registered).
 */
static void register_bufs(struct sfs_prefetch *p, const struct iovec *iov, uint32_t n)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_MEMLOCK, &rl);
	}
	while (n && io_uring_register_buffers(&p->ring, iov, n) != 0)
		n /= 2;
	p->nregistered = n;
}

uint32_t sfs_prefetch_registered(struct sfs *fs, uint32_t *nbufs)
{
	struct sfs_prefetch *p = fs->pf;
	*nbufs = p ? p->nbufs : 0;
	return p ? p->nregistered : 0;
}

int sfs_prefetch_start(struct sfs *fs, char *err)
{
	struct sfs_prefetch *p = calloc(1, sizeof(*p));
	int r;
	if (!p)
		return -ENOMEM;
	p->fs = fs;
	p->efd = -1;
	p->fd = -1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->dlock, NULL);
	pthread_cond_init(&p->dcond, NULL);
	fs->pf = p;

	uint32_t n = fs->info->nsheets ? fs->info->nsheets : 1;
	p->cap = n;
	p->urgent = calloc(n, sizeof(uint32_t));
	p->ahead = calloc(n, sizeof(uint32_t));
	p->mark = calloc(n, 1);
	p->urgent_read = calloc(n, 1);
	if (!p->urgent || !p->ahead || !p->mark || !p->urgent_read)
		return -ENOMEM;

	/* buffers: enough for prefetch + a few readers, within BUF_MEM_CAP */
	p->buf_len = ((size_t)fs->max_stored + 4095) & ~(size_t)4095;
	if (p->buf_len < 4096)
		p->buf_len = 4096;
	if (p->buf_len >= BUF_HUGE)
		p->buf_len = (p->buf_len + BUF_HUGE - 1) & ~(size_t)(BUF_HUGE - 1);
	uint32_t want = fs->o.prefetch + 4;
	if (want > MAX_BUFS)
		want = MAX_BUFS;
	uint64_t fit = BUF_MEM_CAP / p->buf_len;
	if (want > fit)
		want = fit > 2 ? (uint32_t)fit : 2;
	p->nbufs = want;
	p->bufs = calloc(want, sizeof(*p->bufs));
	p->mem = calloc(want, sizeof(*p->mem));
	p->freebufs = calloc(want, sizeof(uint32_t));
	p->dq = calloc(want, sizeof(struct job));
	if (!p->bufs || !p->mem || !p->freebufs || !p->dq)
		return -ENOMEM;
	for (uint32_t b = 0; b < want; b++) {
		p->bufs[b] = map_buf(p->buf_len);
		if (!p->bufs[b]) {
			snprintf(err, SPRITE_ERR_MAX, "cannot map %zu bytes of I/O buffers",
				 p->buf_len);
			return -ENOMEM;
		}
		p->freebufs[p->nfree++] = b;
	}

	/* O_DIRECT descriptor when asked and allowed */
	p->fd = sprite_store_fd(fs->store);
	if (fs->o.direct) {
		int dfd = open(fs->store_path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (dfd >= 0) {
			p->fd = dfd;
			p->direct = 1;
		}
	}

	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->efd < 0) {
		snprintf(err, SPRITE_ERR_MAX, "eventfd: %s", strerror(errno));
		return -errno;
	}
	r = io_uring_queue_init(2 * want + 8, &p->ring, 0);
	if (r < 0) {
		snprintf(err, SPRITE_ERR_MAX, "io_uring_queue_init: %s", strerror(-r));
		return r;
	}
	p->ring_ok = 1;
	struct iovec *iov = calloc(want, sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	for (uint32_t b = 0; b < want; b++)
		iov[b] = (struct iovec){.iov_base = p->bufs[b], .iov_len = p->buf_len};
	register_bufs(p, iov, want);
	free(iov);

	p->nworkers = fs->o.workers ? fs->o.workers : 1;
	p->workers = calloc(p->nworkers, sizeof(pthread_t));
	if (!p->workers)
		return -ENOMEM;
	for (uint32_t w = 0; w < p->nworkers; w++) {
		r = pthread_create(&p->workers[w], NULL, worker_main, p);
		if (r) {
			p->nworkers = w;
			snprintf(err, SPRITE_ERR_MAX, "pthread_create: %s", strerror(r));
			return -r;
		}
	}
	r = pthread_create(&p->ring_thread, NULL, ring_main, p);
	if (r) {
		snprintf(err, SPRITE_ERR_MAX, "pthread_create: %s", strerror(r));
		return -r;
	}
	p->ring_started = 1;
	return 0;
}

void sfs_prefetch_stop(struct sfs *fs)
{
	struct sfs_prefetch *p = fs->pf;
	if (!p)
		return;
	if (p->ring_started) {
		pthread_mutex_lock(&p->lock);
		p->stop = 1;
		pthread_mutex_unlock(&p->lock);
		wake(p);
		pthread_join(p->ring_thread, NULL);
	}
	pthread_mutex_lock(&p->dlock);
	p->dstop = 1;
	pthread_cond_broadcast(&p->dcond);
	pthread_mutex_unlock(&p->dlock);
	for (uint32_t w = 0; w < p->nworkers; w++)
		pthread_join(p->workers[w], NULL);
	if (p->ring_ok)
		io_uring_queue_exit(&p->ring);
	if (p->efd >= 0)
		close(p->efd);
	if (p->direct && p->fd >= 0)
		close(p->fd);
	for (uint32_t b = 0; p->bufs && b < p->nbufs; b++)
		if (p->bufs[b])
			munmap(p->bufs[b], p->buf_len);
	free(p->bufs);
	free(p->mem); /* blocks still in it belong to the cache's chunks */
	free(p->freebufs);
	free(p->dq);
	free(p->urgent);
	free(p->ahead);
	free(p->mark);
	free(p->urgent_read);
	free(p->workers);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->dlock);
	pthread_cond_destroy(&p->dcond);
	free(p);
	fs->pf = NULL;
}
