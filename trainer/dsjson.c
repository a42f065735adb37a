/*
 * dsjson.c - reads a mount's dataset.json (contract in dsjson.h).
 *
 * A scanner over [p, end) that only ever moves forward and checks every
 * step against end, so that a truncated or hostile file makes a lookup
 * fail rather than read past the buffer; numbers are read with strtoul,
 * which is why the buffer must end with a NUL.
 */
#include "trainer/dsjson.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/format.h"
#include "trainer/data.h"

/* err = "PATH: what" (or what alone without path); returns rc. */
static int refuse(char *err, int rc, const char *path, const char *what)
{
	snprintf(err, HN_ERR_MAX, "%s%s%s", path ? path : "", path ? ": " : "", what);
	return rc;
}

/* Skip JSON whitespace. */
static const char *js_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Parse a JSON string at p into out (cap bytes, \u escapes beyond ASCII become '?'). */
static const char *js_string(const char *p, const char *end, char *out, size_t cap)
{
	if (p >= end || *p != '"')
		return NULL;
	p++;
	size_t n = 0;
	while (p < end && *p != '"') {
		char ch = *p++;
		if (ch == '\\') {
			if (p >= end)
				return NULL;
			ch = *p++;
			switch (ch) {
			case 'n':
				ch = '\n';
				break;
			case 't':
				ch = '\t';
				break;
			case 'r':
				ch = '\r';
				break;
			case 'b':
				ch = '\b';
				break;
			case 'f':
				ch = '\f';
				break;
			case 'u':
				if (end - p < 4)
					return NULL;
				{
					char hex[5] = {p[0], p[1], p[2], p[3], 0};
					unsigned v = (unsigned)strtoul(hex, NULL, 16);
					ch = v < 0x80 ? (char)v : '?';
				}
				p += 4;
				break;
			default:
				break; /* \" \\ \/ */
			}
		}
		if (out && n + 1 < cap)
			out[n++] = ch;
	}
	if (p >= end)
		return NULL;
	if (out && cap)
		out[n] = 0;
	return p + 1;
}

/* Skip one JSON value; NULL on malformed input. depth bounds recursion. */
static const char *js_skip(const char *p, const char *end, int depth)
{
	p = js_ws(p, end);
	if (p >= end || depth > 64)
		return NULL;
	if (*p == '"')
		return js_string(p, end, NULL, 0);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		p = js_ws(p + 1, end);
		if (p < end && *p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				p = js_string(js_ws(p, end), end, NULL, 0);
				if (!p)
					return NULL;
				p = js_ws(p, end);
				if (p >= end || *p != ':')
					return NULL;
				p++;
			}
			p = js_skip(p, end, depth + 1);
			if (!p)
				return NULL;
			p = js_ws(p, end);
			if (p < end && *p == ',') {
				p++;
				continue;
			}
			if (p < end && *p == close)
				return p + 1;
			return NULL;
		}
	}
	while (p < end && (isalnum((unsigned char)*p) || *p == '-' || *p == '+' || *p == '.'))
		p++;
	return p;
}

/* Find key in the object at p; returns the value's start or NULL. */
static const char *js_find(const char *p, const char *end, const char *key)
{
	p = js_ws(p, end);
	if (p >= end || *p != '{')
		return NULL;
	p++;
	for (;;) {
		char k[128];
		p = js_ws(p, end);
		if (p < end && *p == '}')
			return NULL;
		p = js_string(p, end, k, sizeof k);
		if (!p)
			return NULL;
		p = js_ws(p, end);
		if (p >= end || *p != ':')
			return NULL;
		p = js_ws(p + 1, end);
		if (!strcmp(k, key))
			return p;
		p = js_skip(p, end, 0);
		if (!p)
			return NULL;
		p = js_ws(p, end);
		if (p >= end || *p != ',')
			return NULL;
		p++;
	}
}

static uint64_t js_u64(const char *obj, const char *end, const char *key, uint64_t dflt)
{
	const char *v = obj && *obj == '{' ? js_find(obj, end, key) : NULL;
	return v && isdigit((unsigned char)*v) ? strtoull(v, NULL, 10) : dflt;
}

/* "classes": [ "a", "b", ... ] */
static int parse_classes(const char *json, const char *end, const char *path, struct hn_dsjson *d,
			 char *err)
{
	const char *p = js_find(json, end, "classes");
	if (!p || *p != '[')
		return refuse(err, -EINVAL, path, "no \"classes\" list");
	uint32_t cap = 0;
	p = js_ws(p + 1, end);
	while (p && p < end && *p != ']') {
		char name[256];
		p = js_string(p, end, name, sizeof name);
		if (!p)
			break;
		if (d->nclasses == HN_MAX_CLASSES)
			return refuse(err, -EINVAL, path, "too many classes");
		if (d->nclasses == cap) {
			cap = cap ? cap * 2 : 16;
			char **nn = realloc(d->classes, cap * sizeof *d->classes);
			if (!nn)
				return refuse(err, -ENOMEM, NULL, "out of memory");
			d->classes = nn;
		}
		if (!(d->classes[d->nclasses] = strdup(name)))
			return refuse(err, -ENOMEM, NULL, "out of memory");
		d->nclasses++;
		p = js_ws(p, end);
		if (p < end && *p == ',')
			p = js_ws(p + 1, end);
	}
	if (!p || p >= end || d->nclasses == 0)
		return refuse(err, -EINVAL, path, "malformed \"classes\" list");
	return 0;
}

int hn_dsjson_parse(const char *json, size_t len, const char *path, const char *train_split,
		    struct hn_dsjson *d, char *err)
{
	memset(d, 0, sizeof *d);
	const char *end = json + len;
	int rc = parse_classes(json, end, path, d, err);
	if (rc < 0)
		return rc;
	const char *ow = js_find(json, end, "order_window");
	d->order_window = -1;
	if (ow && isdigit((unsigned char)*ow)) {
		unsigned long long v = strtoull(ow, NULL, 10);
		d->order_window = v <= UINT32_MAX ? (int64_t)v : -1;
	}
	const char *st = js_find(json, end, "sheet_tiles");
	if (st && isdigit((unsigned char)*st)) {
		unsigned long v = strtoul(st, NULL, 10);
		if (v > 0 && v <= SPRITE_MAX_SHEET_TILES)
			d->sheet_tiles = (uint32_t)v;
	}
	const char *nm = js_find(json, end, "name");
	if (nm)
		js_string(nm, end, d->name, sizeof d->name);
	d->name[sizeof d->name - 1] = 0;

	/* The epoch views and the order of the training split. */
	const char *ep = js_find(json, end, "epochs");
	const char *sp = js_find(json, end, "splits");
	const char *tr = sp && *sp == '{' ? js_find(sp, end, train_split) : NULL;
	if (!ep || !tr || *tr != '{')
		return 0;
	d->view_batch = (uint32_t)js_u64(ep, end, "batch", 0);
	d->view_epochs = js_u64(ep, end, "count", 0);
	const char *ov = js_find(tr, end, "order");
	if (ov)
		js_string(ov, end, d->order, sizeof d->order);
	d->order[sizeof d->order - 1] = 0;
	d->window = js_u64(tr, end, "window", 0);
	return 0;
}

void hn_dsjson_free(struct hn_dsjson *d)
{
	for (uint32_t i = 0; i < d->nclasses; i++)
		free(d->classes[i]);
	free(d->classes);
	d->classes = NULL;
	d->nclasses = 0;
}
