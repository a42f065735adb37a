/*
 * json.h - JSON text for files that people and scripts read: spritefs's
 * dataset.json and stats.json, hntrain's --log lines.
 *
 * One escaping rule for every JSON string the project writes: '"' and '\'
 * backslashed, control bytes as \u00XX, and bytes that are not well-formed
 * UTF-8 as \ufffd (JSON text must be UTF-8; names from a store or a folder
 * listing need not be). Safe on any NUL-terminated input.
 */
#ifndef SPRITE_JSON_H
#define SPRITE_JSON_H

#include <stddef.h>
#include <stdio.h>

/*
 * A growing text buffer; {0} is an empty one. p is NUL-terminated once
 * anything was appended, and is the caller's to free(). When memory runs out
 * oom is set, later appends do nothing, and the text is incomplete: check oom
 * before using p.
 */
struct sprite_str {
	char *p;
	size_t len, cap;
	int oom;
};

/* Append printf-formatted text. */
void sprite_str_printf(struct sprite_str *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Append text as a JSON string literal (quoted, escaped as above). */
void sprite_str_json(struct sprite_str *s, const char *text);
/* Write text to f as a JSON string literal (quoted, escaped as above); NULL is "". */
void sprite_json_fputs(FILE *f, const char *text);
/* 1 when text is well-formed UTF-8 (sprite_utf8_len's rule), else 0. */
int sprite_utf8_ok(const char *text);

#endif
