/*
 * dsjson.h - what hntrain reads from a spritefs mount's dataset.json
 * (private to trainer/): the class names, the data set's name and sheet
 * size, and whether the mount's epoch views are laid out for this run.
 *
 * The file is hostile input. The reader is a small JSON scanner, not a
 * general parser: it finds keys of the top-level object (and of "epochs"
 * and "splits"), bounds its recursion, and takes a value it cannot read as
 * absent, except the "classes" list, which must be there and well formed.
 */
#ifndef HN_DSJSON_H
#define HN_DSJSON_H

#include <stddef.h>
#include <stdint.h>

struct hn_dsjson {
	char **classes; /* nclasses malloc'd names (\u escapes beyond ASCII as '?') */
	uint32_t nclasses;
	char name[64];	      /* "name", cut to fit; "" when absent */
	uint32_t sheet_tiles; /* "sheet_tiles" when in range, else 0 */
	/* The epoch views, 0 when dataset.json describes none for the split asked: */
	uint32_t view_batch;  /* "epochs": {"batch"} */
	uint64_t view_epochs; /* "epochs": {"count"}: views exist for epochs below it */
	char order[32];	      /* "splits": {SPLIT: {"order"}}: "full" or "windowed" */
	uint64_t window;      /* "splits": {SPLIT: {"window"}} */
	int64_t order_window; /* "order_window": the data set's; -1 absent (an older mount) */
};

/*
 * Parse json (len bytes, NUL at json[len]) for the training split
 * train_split into *d; path names the file in messages. 0, or -EINVAL
 * (no "classes" list, a malformed one, or more than HN_MAX_CLASSES) or
 * -ENOMEM with err set (HN_ERR_MAX bytes). Free d with hn_dsjson_free
 * either way.
 */
int hn_dsjson_parse(const char *json, size_t len, const char *path, const char *train_split,
		    struct hn_dsjson *d, char *err);
void hn_dsjson_free(struct hn_dsjson *d);

#endif
