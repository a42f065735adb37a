/*
 * stats.c - live counters as /.spritefs/stats.json.
 *
 * Counters are plain uint64_t fields updated with relaxed atomics on the hot
 * paths (no lock, no false sharing worth a cache line each at these rates);
 * a snapshot is taken when stats.json is opened, so one read(2) sequence sees
 * one consistent-enough picture. It reads every part of the daemon (cache,
 * prefetcher, orders), so it sits above them; the log they all write is
 * log.c's, a floor below everything.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "fs/sfs.h"

uint64_t sfs_rss_bytes(void)
{
	unsigned long long size = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * The store bytes read for the epoch view read last, against the bytes that
 * epoch needs (its split's stored sheets, each read once): the read
 * amplification, 1.0 at the end of an epoch served within the working set.
 */
static void epoch_io_json(struct sfs *fs, struct sprite_str *s)
{
	struct sfs_epoch_io io;
	sfs_cache_epoch_io(fs, &io);
	sprite_str_printf(s, "  \"store_bytes_read\": %llu,\n", (unsigned long long)io.total_read);
	const struct sfs_split *sp = &fs->splits[io.active ? io.split : 0];
	if (!io.active)
		for (uint32_t k = 1; k < fs->info->nsplits; k++)
			if (fs->splits[k].raw_bytes > sp->raw_bytes)
				sp = &fs->splits[k];
	/* for the readers its views have had at once (1 before any) */
	uint32_t readers = sfs_cache_readers(fs, sp->index);
	sprite_str_printf(s, "  \"working_set\": %llu,\n  \"view_readers\": %u,\n",
			  (unsigned long long)sfs_working_set(fs, sp, readers), readers);
	if (!io.active) {
		sprite_str_printf(s, "  \"epoch\": null,\n");
		return;
	}
	uint64_t need = 0;
	for (uint32_t i = sp->first_sheet; i < sp->first_sheet + sp->nsheets; i++)
		need += fs->info->sheets[i].stored_size;
	sprite_str_printf(s, "  \"epoch\": {\"split\": ");
	sprite_str_json(s, sp->name);
	sprite_str_printf(s,
			  ", \"batch\": %u, \"batches\": %u, \"store_bytes_read\": %llu, "
			  "\"stored_bytes\": %llu, \"read_amplification\": %.4f},\n",
			  io.batch, io.batches, (unsigned long long)io.read_bytes,
			  (unsigned long long)need,
			  need ? (double)io.read_bytes / (double)need : 0.0);
}

/*
 * The daemon's CPU time so far (every thread's, user and system, from
 * getrusage) and per 10^9 bytes served: the cost of a delivered byte on the
 * daemon's side, which the floor of one lz4 decode per stored byte and one
 * copy per delivered byte bounds (docs/ARCHITECTURE.md, "CPU floor").
 */
static void cpu_json(struct sfs *fs, struct sprite_str *s)
{
	struct rusage ru;
	double user = 0, sys = 0;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
		sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	}
	uint64_t served = SFS_GET(fs, bytes_served);
	sprite_str_printf(s,
			  "  \"cpu_s\": %.3f,\n  \"cpu_user_s\": %.3f,\n  \"cpu_sys_s\": %.3f,\n",
			  user + sys, user, sys);
	if (served)
		sprite_str_printf(s, "  \"cpu_s_per_gb_served\": %.4f,\n",
				  (user + sys) / ((double)served / 1e9));
	else
		sprite_str_printf(s, "  \"cpu_s_per_gb_served\": null,\n");
}

char *sfs_stats_json(struct sfs *fs, size_t *len)
{
	struct sprite_str s = {0};
	double up = sprite_now() - fs->stats.started;
	uint64_t mapped = SFS_GET(fs, bytes_mapped);
	uint64_t iobufs = sfs_prefetch_mem(fs);
	uint64_t scratch = SFS_GET(fs, scratch_bytes);
	uint64_t orders = SFS_GET(fs, orders_bytes);
#define C(name)                                                                                    \
	sprite_str_printf(&s, "  \"%s\": %llu,\n", #name, (unsigned long long)SFS_GET(fs, name))
	sprite_str_printf(&s, "{\n  \"uptime_s\": %.3f,\n", up);
	sprite_str_printf(&s, "  \"pid\": %d,\n", (int)getpid()); /* hntrain names a hung daemon */
	C(requests);
	C(reads);
	C(bytes_served);
	C(opens);
	C(lookups);
	C(eio);
	C(cache_hits);
	C(cache_misses);
	C(evictions);
	C(sheets_resident);
	C(bytes_resident);
	C(bytes_mapped);
	C(sheets_pushed);
	C(bytes_pushed);
	sprite_str_printf(&s, "  \"splice_write\": %s,\n", fs->splice_write ? "true" : "false");
	C(bytes_spliced);
	C(splice_fallbacks);
	sprite_str_printf(&s, "  \"cache_budget\": %llu,\n", (unsigned long long)fs->o.cache_bytes);
	sprite_str_printf(&s, "  \"prefetch_depth\": %u,\n", fs->o.prefetch);
	sprite_str_printf(&s, "  \"orders_budget\": %llu,\n",
			  (unsigned long long)fs->o.orders_bytes);
	C(orders_bytes);
	C(order_waits);
	C(order_refusals);
	C(seeds_recycled);
	C(seed_refusals);
	C(prefetch_issued);
	C(prefetch_hits);
	C(prefetch_skipped);
	C(room_waits);
	C(room_releases);
	C(over_budget_loads);
	epoch_io_json(fs, &s);
	C(inflight);
	C(uring_reads);
	C(uring_bytes);
	sprite_str_printf(&s, "  \"direct_io\": %s,\n", sfs_prefetch_direct(fs) ? "true" : "false");
	sprite_str_printf(&s, "  \"kernel_open\": %s,\n", fs->no_open ? "true" : "false");
	C(checksum_failures);
	C(read_errors);
	C(sheets_decoded);
	C(raw_bytes_decoded);
	sprite_str_printf(&s, "  \"decode_s\": %.6f,\n", (double)SFS_GET(fs, decode_ns) / 1e9);
	cpu_json(fs, &s);
	sprite_str_printf(&s, "  \"io_buffer_bytes\": %llu,\n", (unsigned long long)iobufs);
	uint32_t nbufs, nreg = sfs_prefetch_registered(fs, &nbufs);
	sprite_str_printf(&s, "  \"io_buffers\": %u,\n  \"io_buffers_registered\": %u,\n", nbufs,
			  nreg);
	sprite_str_printf(&s, "  \"scratch_bytes\": %llu,\n", (unsigned long long)scratch);
	sprite_str_printf(&s, "  \"memory_in_use\": %llu,\n",
			  (unsigned long long)(mapped + iobufs + scratch + orders));
	sprite_str_printf(&s, "  \"rss\": %llu\n}", (unsigned long long)sfs_rss_bytes());
#undef C
	/* a fixed size, so that the file's size never changes under a reader */
	while (!s.oom && s.len + 1 < SFS_STATS_SIZE)
		sprite_str_printf(&s, "%*s", (int)(SFS_STATS_SIZE - 1 - s.len), "");
	sprite_str_printf(&s, "\n");
	if (s.oom) {
		free(s.p);
		return NULL;
	}
	*len = s.len;
	return s.p;
}
