/*
 * progress.h - a one-line progress bar on stderr, for the long loops of
 * spritefs-pack, the mount's first pack and hntrain.
 *
 * Drawn only when stderr is a terminal and TERM is set and not "dumb", at
 * most ~10 times a second, fitted to the terminal's width at each drawing
 * (the bar shrinks, then the line is cut; the label should be ASCII).
 * Thread-safe updates with atomic counters. tty says whether it draws (a
 * caller printing a line of its own clears the bar's line first only then).
 */
#ifndef SPRITE_PROGRESS_H
#define SPRITE_PROGRESS_H

#include <stdint.h>

struct sprite_progress {
	const char *label;
	uint64_t total;
	uint64_t done; /* updated with __atomic ops by workers */
	double start, last_draw;
	int tty;
};
void sprite_progress_start(struct sprite_progress *p, const char *label, uint64_t total);
void sprite_progress_add(struct sprite_progress *p, uint64_t n); /* thread-safe */
void sprite_progress_draw(struct sprite_progress *p);		 /* call from one thread */
void sprite_progress_end(struct sprite_progress *p);

#endif
