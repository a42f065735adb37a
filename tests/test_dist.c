/*
 * test_dist - the collective calls of trainer/dist_mpi.c, on real MPI ranks
 * (tests/dist.sh starts it under mpirun with 3 ranks; alone it is the world
 * of one rank and checks the same things):
 *   - hn_dist_share_bytes: rank 0's bytes (the NCCL set-up's id, 257 here,
 *     an odd length) arrive whole on every rank, and rank 0's are untouched;
 *   - hn_dist_sum_floats: every rank ends with the sum of all ranks' values
 *     added in rank order, ((r0 + r1) + r2), bit for bit, over a length that
 *     does not split evenly between the ranks (the slices' edges);
 *   - hn_dist_gather_doubles: every rank's values, in rank order.
 * Each rank prints its failures; the exit status is non-zero on any.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "trainer/backend.h"
#include "trainer/dist.h"

#define NSHARE 257
#define NSUM   1001

/* A value of rank r at index i whose sums round (so the order shows). */
static float value(int r, int i)
{
	return (float)((r * 7919 + i * 104729) % 1000003) * (r % 2 ? 1e-3f : 1.7e4f) +
	       0.1f * (float)(r + 1);
}

int main(int argc, char **argv)
{
	char err[HN_ERR_MAX] = "";
	if (hn_dist_init(&argc, &argv, err) < 0) {
		fprintf(stderr, "test_dist: %s\n", err);
		return 1;
	}
	const struct hn_dist_info *d = hn_dist();
	int bad = 0;

	unsigned char share[NSHARE];
	for (int i = 0; i < NSHARE; i++)
		share[i] = d->rank ? 0 : (unsigned char)(i * 31 + 7);
	if (hn_dist_share_bytes(share, sizeof share, err) < 0) {
		fprintf(stderr, "rank %d: share: %s\n", d->rank, err);
		bad++;
	}
	for (int i = 0; i < NSHARE; i++)
		if (share[i] != (unsigned char)(i * 31 + 7)) {
			fprintf(stderr, "rank %d: shared byte %d is %u\n", d->rank, i, share[i]);
			bad++;
			break;
		}

	static float buf[NSUM];
	for (int i = 0; i < NSUM; i++)
		buf[i] = value(d->rank, i);
	if (hn_dist_sum_floats(buf, NSUM, err) < 0) {
		fprintf(stderr, "rank %d: sum: %s\n", d->rank, err);
		bad++;
	}
	for (int i = 0; i < NSUM; i++) {
		float want = value(0, i);
		for (int r = 1; r < d->size; r++)
			want += value(r, i);
		if (memcmp(&want, &buf[i], sizeof want)) {
			fprintf(stderr, "rank %d: sum %d is %.9g, in rank order %.9g\n", d->rank, i,
				(double)buf[i], (double)want);
			bad++;
			break;
		}
	}

	double mine[2] = {d->rank, 10.0 * d->rank + 0.5}, all[2 * 64];
	if (d->size > 64 || hn_dist_gather_doubles(mine, 2, all, err) < 0) {
		fprintf(stderr, "rank %d: gather: %s\n", d->rank, d->size > 64 ? "too many" : err);
		bad++;
	} else {
		for (int r = 0; r < d->size; r++)
			if (all[2 * r] != r || all[2 * r + 1] != 10.0 * r + 0.5) {
				fprintf(stderr, "rank %d: gathered %g %g for rank %d\n", d->rank,
					all[2 * r], all[2 * r + 1], r);
				bad++;
			}
	}
	printf("test_dist: rank %d of %d (%s): %s\n", d->rank, d->size, d->impl,
	       bad ? "FAILED" : "ok");
	if (!bad)
		hn_dist_finalize();
	return bad ? 1 : 0;
}
