/*
 * preload.c - --preload: every sample of both splits read into memory
 * first (by `--loaders` threads, in index order, a mount through
 * images.npy), and the source turned into an in-memory one, so that a run
 * measures compute with zero I/O: the baseline every medium is compared to.
 *
 * Samples of image files that do not decode are left out (the counts
 * shrink); those of unreadable sheets (--skip-bad-sheets) keep their
 * places, so that the order is drawn over the same positions as the store
 * or mount draws it.
 */
#include "trainer/preload.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/source.h"

enum { PRELOAD_CHUNK = 256 };

struct preload_job {
	hn_source *s;
	pthread_mutex_t lock;
	uint64_t next[2];
	uint8_t *px[2];
	uint16_t *lab[2];
	uint32_t *got[2]; /* samples read per chunk (fewer where image files did not decode) */
	int rc;
	char err[HN_ERR_MAX];
};

static void *preload_worker(void *arg)
{
	struct preload_job *j = arg;
	enum { CHUNK = PRELOAD_CHUNK };
	uint32_t idx[CHUNK];
	for (;;) {
		pthread_mutex_lock(&j->lock);
		int k = j->next[0] < j->s->info.count[0] ? 0 : 1;
		uint64_t first = j->next[k];
		if (j->rc < 0 || first >= j->s->info.count[k]) {
			pthread_mutex_unlock(&j->lock);
			return NULL;
		}
		uint64_t n = j->s->info.count[k] - first;
		if (n > CHUNK)
			n = CHUNK;
		j->next[k] += n;
		pthread_mutex_unlock(&j->lock);
		for (uint64_t i = 0; i < n; i++)
			idx[i] = (uint32_t)(first + i);
		char err[HN_ERR_MAX] = "";
		struct hn_batch b = {.split = k,
				     .n = (int)n,
				     .idx = idx,
				     .tiles = j->px[k] + first * j->s->tile_bytes,
				     .labels = j->lab[k] + first};
		/* Index order, so a mount is read through images.npy, not epoch views. */
		int rc = hn_source_fetch(j->s, &b, 1, err);
		if (rc < 0) {
			pthread_mutex_lock(&j->lock);
			if (j->rc == 0) {
				j->rc = rc;
				memcpy(j->err, err, sizeof err);
			}
			pthread_mutex_unlock(&j->lock);
			return NULL;
		}
		j->got[k][first / CHUNK] = (uint32_t)rc; /* fewer where files did not decode */
	}
}

/*
 * Close the gaps the files that did not decode left at the ends of chunks.
 * The samples of unreadable sheets (--skip-bad-sheets) instead keep their
 * places, so that the order is drawn over the same indices as without
 * --preload: each chunk's samples are moved back to them, and the memory
 * source skips those sheets as the store or mount did.
 */
static uint64_t preload_compact(struct preload_job *j, int k, size_t tile_bytes)
{
	uint64_t n = j->s->info.count[k], w = 0;
	if (j->s->bad_sheet[k]) {
		for (uint64_t first = 0; first < n; first += PRELOAD_CHUNK) {
			uint64_t m = j->got[k][first / PRELOAD_CHUNK];
			uint64_t end = first + PRELOAD_CHUNK < n ? first + PRELOAD_CHUNK : n;
			for (uint64_t i = end; i-- > first && m > 0;) {
				if (hn_source_on_bad_sheet(j->s, k, hn_source_id(j->s, k, i)))
					continue;
				m--; /* packed sample m belongs at i (m <= i - first) */
				if (first + m != i) {
					memmove(j->px[k] + i * tile_bytes,
						j->px[k] + (first + m) * tile_bytes, tile_bytes);
					j->lab[k][i] = j->lab[k][first + m];
				}
			}
		}
		return n;
	}
	for (uint64_t first = 0; first < n; first += PRELOAD_CHUNK) {
		uint32_t m = j->got[k][first / PRELOAD_CHUNK];
		if (w != first && m) {
			memmove(j->px[k] + w * tile_bytes, j->px[k] + first * tile_bytes,
				m * tile_bytes);
			memmove(j->lab[k] + w, j->lab[k] + first, m * sizeof *j->lab[k]);
		}
		w += m;
	}
	return w;
}

int hn_source_preload(hn_source *s, int nthreads, char *err)
{
	struct preload_job j = {.s = s};
	pthread_mutex_init(&j.lock, NULL);
	for (int k = 0; k < 2; k++) {
		j.px[k] = malloc(s->info.count[k] * s->tile_bytes + 1);
		j.lab[k] = malloc(s->info.count[k] * sizeof(uint16_t) + 2);
		j.got[k] = calloc(s->info.count[k] / PRELOAD_CHUNK + 1, sizeof *j.got[k]);
		if (!j.px[k] || !j.lab[k] || !j.got[k]) {
			for (int i = 0; i < 2; i++) {
				free(j.px[i]);
				free(j.lab[i]);
				free(j.got[i]);
			}
			return sprite_fail(err, -ENOMEM,
					   "--preload: not enough memory for the data set");
		}
	}
	if (nthreads < 1)
		nthreads = 1;
	if (nthreads > 64)
		nthreads = 64;
	pthread_t t[64];
	int started = 0;
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, preload_worker, &j) == 0)
			started++;
		else
			break;
	if (!started)
		preload_worker(&j);
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&j.lock);
	if (j.rc < 0) {
		for (int i = 0; i < 2; i++) {
			free(j.px[i]);
			free(j.lab[i]);
			free(j.got[i]);
		}
		return sprite_fail(err, j.rc, "%s", j.err);
	}
	/* From here on the source is memory: drop what the original kind held. */
	struct hn_mem *mem = calloc(1, sizeof *mem);
	if (!mem) {
		for (int i = 0; i < 2; i++) {
			free(j.px[i]);
			free(j.lab[i]);
			free(j.got[i]);
		}
		return sprite_fail(err, -ENOMEM, "--preload: out of memory");
	}
	s->ops->close(s);
	for (int k = 0; k < 2; k++) {
		s->info.count[k] = preload_compact(&j, k, s->tile_bytes);
		free(j.got[k]);
		mem->px[k] = j.px[k];
		mem->lab[k] = j.lab[k];
		s->info.full_count[k] = s->info.count[k];
	}
	s->ops = &hn_source_mem_ops;
	s->priv = mem;
	s->ids_resolved = 1; /* the memory holds the --limit pick by position */
	if (s->info.count[0] == 0)
		return sprite_fail(err, -ENODATA, "%s: no training sample decodes", s->root);
	char d[sizeof s->describe];
	memcpy(d, s->describe, sizeof d);
	snprintf(s->describe, sizeof s->describe, "preloaded in RAM from %.480s", d);
	size_t l = strlen(s->info.kind);
	if (l + 10 < sizeof s->info.kind)
		strcat(s->info.kind, "+preload");
	return 0;
}
