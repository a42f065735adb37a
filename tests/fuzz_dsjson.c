/*
 * fuzz_dsjson.c - fuzz target: a spritefs mount's dataset.json as hntrain
 * reads it (trainer/dsjson.c). What loads must hold at least one class,
 * each name a string within the buffer it was read into (all of it is read
 * here, for ASan), and a refusal must say why.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz.h"
#include "trainer/backend.h"
#include "trainer/dsjson.h"

static void broken(const char *what)
{
	fprintf(stderr, "fuzz_dsjson: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *json = malloc(size + 1); /* the mount reader NUL-terminates what it read */
	if (!json)
		return 0;
	memcpy(json, data, size);
	json[size] = 0;
	char err[HN_ERR_MAX] = "";
	struct hn_dsjson d;
	int rc = hn_dsjson_parse(json, size, "mnt/dataset.json", "train", &d, err);
	if (rc < 0) {
		if (!err[0])
			broken("refused without a message");
	} else {
		uint64_t sum = d.sheet_tiles + d.view_batch + d.view_epochs + d.window;
		if (d.nclasses == 0)
			broken("accepted without a class");
		for (uint32_t i = 0; i < d.nclasses; i++)
			sum += strlen(d.classes[i]);
		if (memchr(d.name, 0, sizeof d.name) == NULL ||
		    memchr(d.order, 0, sizeof d.order) == NULL)
			broken("a string without its NUL");
		fuzz_sink += sum + strlen(d.name) + strlen(d.order);
		fuzz_accepted++;
	}
	hn_dsjson_free(&d);
	free(json);
	return 0;
}

static int text(struct fuzz_buf *b, const char *name, const char *s)
{
	b->len = strlen(s);
	b->data = malloc(b->len);
	if (!b->data)
		return -1;
	memcpy(b->data, s, b->len);
	snprintf(b->name, sizeof b->name, "%s", name);
	return 0;
}

static int seeds(struct fuzz_buf **out, char *err)
{
	struct fuzz_buf *b = calloc(3, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	/* As fs/tree.c writes it, with escapes, a windowed split, and the bare minimum. */
	if (text(&b[0], "dataset.json",
		 "{\n  \"name\": \"fashion-mnist\",\n  \"format_version\": 1,\n  \"store\": "
		 "\"/data/fm.sprites\",\n  \"tile\": {\"h\": 28, \"w\": 28, \"c\": 1},\n  "
		 "\"sheet_tiles\": 1024,\n  \"nsheets\": 69,\n  \"nclasses\": 3,\n  \"classes\": "
		 "[\"T-shirt_top\", \"Trouser\", \"Ankle boot\"],\n  \"class_dirs\": "
		 "[\"T-shirt_top\", "
		 "\"Trouser\", \"Ankle boot\"],\n  \"labels_dtype\": \"uint8\",\n  \"image_ext\": "
		 "\"pgm\",\n  \"epochs\": {\"seed\": 7, \"count\": 4, \"batch\": 64},\n  "
		 "\"splits\": "
		 "{\n    \"train\": {\"count\": 60000, \"first_sheet\": 0, \"sheets\": 59, "
		 "\"epoch_batches\": 938, \"order\": \"full\", \"window\": 0},\n    \"test\": "
		 "{\"count\": 10000, \"first_sheet\": 59, \"sheets\": 10, \"epoch_batches\": 157, "
		 "\"order\": \"full\", \"window\": 0}\n  }\n}\n") < 0 ||
	    text(&b[1], "escaped.json",
		 "{\"name\": \"caf\\u00e9 \\\"x\\\"\", \"sheet_tiles\": 256, \"classes\": "
		 "[\"a\\tb\", \"c\\/d\", \"\\u0041\"], \"nested\": [[{}], {\"k\": [1, -2.5e3, "
		 "true, null]}], \"epochs\": {\"count\": 2, \"batch\": 32}, \"splits\": "
		 "{\"train\": {\"order\": \"windowed\", \"window\": 4}}}") < 0 ||
	    text(&b[2], "minimal.json", "{\"classes\": [\"only\"]}") < 0) {
		snprintf(err, 256, "cannot build the dataset.json seeds");
		return -1;
	}
	return 3;
}

const struct fuzz_target fuzz_target = {"fuzz_dsjson", seeds, NULL};
