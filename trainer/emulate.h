/*
 * emulate.h - hntrain --emulate PROFILE: emulated accelerators, as MLPerf
 * Storage's DLIO emulates them (private to trainer/).
 *
 * An emulated accelerator reads its share of every batch exactly as
 * training does (the same source, loaders, order, ranks and --augment) and,
 * in place of the maths, spends the profile's compute time per batch. Each
 * rank of mpirun is one accelerator. The numbers that matter are the
 * accelerator utilisation (AU: compute time over wall time, per epoch, the
 * first step left out as MLPerf Storage leaves it out) and whether it stays
 * at or above the profile's minimum (90% for ResNet-50 and U-Net3D).
 *
 * Like train.c, emulate.c is the program's own code: it prints, appends to
 * --log, and exits on a usage error (2) or a failure (1).
 */
#ifndef HN_EMULATE_H
#define HN_EMULATE_H

#include <stdint.h>

/* What --emulate says: a profile of the table, or BATCH:SECONDS. */
struct hn_emulate {
	char name[32];	  /* "resnet50-h100", or "400:0.224" as given; "" not emulating */
	uint32_t batch;	  /* samples per accelerator per step */
	double compute_s; /* per step of a full batch */
	double au_min;	  /* the AU a run must hold to pass (0.90; CosmoFlow 0.70) */
	int image_tiles;  /* the profile's samples are 224x224x3 images, as tiles are */
};

/*
 * Parse --emulate's value into e: 0, or -EINVAL with err saying what would
 * work (the profiles, or BATCH:SECONDS with a batch of 1..65536 and seconds
 * in (0, 3600]).
 */
int hn_emulate_parse(const char *s, struct hn_emulate *e, char *err);

struct hn_opts;
typedef struct hn_source hn_source;

/*
 * Before hn_opts_check: refuse the options that train a model (there is
 * none), take the profile's batch into o->batch (a different --batch is a
 * usage error) and read the training split only. Exits 2 on a usage error.
 */
void hn_emulate_check_opts(struct hn_opts *o);

/*
 * Run the emulated accelerators over the open source: every epoch of
 * o->epochs, a line per epoch and a summary, --log records (rank 0), then
 * leave the ranks together. 0 when done (whether or not the AU passed: the
 * summary says), else exits 1 (a failure inside the loop) or returns -1
 * with its message printed (one that needs no unwinding of the loop).
 */
int hn_emulate_run(const struct hn_opts *o, hn_source *src);

#endif
