/*
 * json.c - JSON text: a growing buffer, and the one string escaping rule
 * that spritefs's JSON files and hntrain's log share (json.h).
 *
 * The rule is written once, in json_escape(), which hands each piece of
 * output to a sink: a buffer (sprite_str_json) or a FILE
 * (sprite_json_fputs), so a log line is written without building it in
 * memory first, and both writers cannot drift apart.
 */
#include "common/json.h"

#include <stdarg.h>
#include <stdlib.h>

#include "common/util.h"

void sprite_str_printf(struct sprite_str *s, const char *fmt, ...)
{
	va_list ap;
	if (s->oom)
		return;
	for (;;) {
		size_t room = s->cap - s->len;
		va_start(ap, fmt);
		int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			s->oom = 1;
			return;
		}
		if (s->p && (size_t)n < room) {
			s->len += (size_t)n;
			return;
		}
		size_t cap = s->cap ? s->cap * 2 : 1024;
		while (cap < s->len + (size_t)n + 1)
			cap *= 2;
		char *p = realloc(s->p, cap);
		if (!p) {
			s->oom = 1;
			return;
		}
		s->p = p;
		s->cap = cap;
	}
}

int sprite_utf8_ok(const char *text)
{
	for (const unsigned char *c = (const unsigned char *)text; *c;) {
		int n = sprite_utf8_len(c);
		if (!n)
			return 0;
		c += n;
	}
	return 1;
}

/* Write text as a JSON string literal through emit(ctx, bytes, len). */
static void json_escape(const char *text, void (*emit)(void *ctx, const char *p, size_t len),
			void *ctx)
{
	emit(ctx, "\"", 1);
	for (const unsigned char *c = (const unsigned char *)text; *c;) {
		int n = sprite_utf8_len(c);
		char esc[8];
		if (*c == '"' || *c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*c;
			emit(ctx, esc, 2);
		} else if (*c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", *c);
			emit(ctx, esc, 6);
		} else if (n == 0) {
			emit(ctx, "\\ufffd", 6); /* not UTF-8: JSON must be */
		} else {
			emit(ctx, (const char *)c, (size_t)n);
		}
		c += n ? n : 1;
	}
	emit(ctx, "\"", 1);
}

static void emit_str(void *ctx, const char *p, size_t len)
{
	sprite_str_printf(ctx, "%.*s", (int)len, p);
}

static void emit_file(void *ctx, const char *p, size_t len)
{
	fwrite(p, 1, len, ctx);
}

void sprite_str_json(struct sprite_str *s, const char *text)
{
	json_escape(text, emit_str, s);
}

void sprite_json_fputs(FILE *f, const char *text)
{
	json_escape(text ? text : "", emit_file, f);
}
