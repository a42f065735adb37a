/*
 * progress.c - the terminal progress bar of spritefs-pack, the mount's
 * first pack and hntrain (contract in progress.h).
 *
 * The bar is the one place in common/ that writes anything: it draws on
 * stderr only when stderr is a terminal that takes cursor controls (not
 * TERM=dumb or unset), so that logs, pipes and editor buffers stay clean, and
 * at most ten times a second, so that a tight loop of workers calling
 * sprite_progress_add() costs one atomic add each and nothing more. Each
 * drawing asks the terminal its width (one ioctl): the line is fitted to it,
 * one column short, since a line that fills or passes the last column wraps
 * and "\r" then returns only to the start of its last row.
 */
#include "common/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/util.h"

void sprite_progress_start(struct sprite_progress *p, const char *label, uint64_t total)
{
	p->label = label ? label : "";
	p->total = total;
	__atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
	p->start = sprite_now();
	p->last_draw = 0;
	const char *term = getenv("TERM");
	p->tty = isatty(2) && term && *term && strcmp(term, "dumb") != 0;
}

void sprite_progress_add(struct sprite_progress *p, uint64_t n)
{
	__atomic_fetch_add(&p->done, n, __ATOMIC_RELAXED);
}

static void fmt_hms(double s, char *buf, size_t cap)
{
	if (s < 0 || s > 359999)
		s = 359999;
	unsigned t = (unsigned)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, cap, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, cap, "%u:%02u", t / 60, t % 60);
}

/* Columns of the terminal on stderr; 80 when it does not say. */
static int term_cols(void)
{
	struct winsize ws;
	if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

static void progress_paint(struct sprite_progress *p, double now)
{
	enum { BAR = 24, MIN_BAR = 5 };
	uint64_t done = __atomic_load_n(&p->done, __ATOMIC_RELAXED);
	uint64_t total = p->total;
	double el = now - p->start;
	double rate = el > 0 ? (double)done / el : 0;
	double frac = total ? (double)done / (double)total : 0;
	char eta[16], count[48], tail[128], line[512];

	if (frac > 1)
		frac = 1;
	if (rate > 0 && total >= done)
		fmt_hms((double)(total - done) / rate, eta, sizeof(eta));
	else
		snprintf(eta, sizeof(eta), "--:--");
	snprintf(count, sizeof(count), " %llu/%llu", (unsigned long long)done,
		 (unsigned long long)total);

	/*
	 * "label [bar] count pct rate ETA" on a wide terminal; narrower, the
	 * bar shrinks, then the rate, the ETA, the count and the bar go, in
	 * that order, and a line that still does not fit is cut.
	 */
	int width = term_cols() - 1;
	if (width > (int)sizeof(line) - 1)
		width = (int)sizeof(line) - 1;
	snprintf(line, sizeof(line), "%s", p->label);
	int len = (int)strlen(line), bar = 0;
	for (int v = 0; v < 4; v++) {
		double pct = frac * 100.0;
		switch (v) {
		case 0:
			snprintf(tail, sizeof(tail), "%s %5.1f%% %.0f/s ETA %s", count, pct, rate,
				 eta);
			break;
		case 1:
			snprintf(tail, sizeof(tail), "%s %5.1f%% ETA %s", count, pct, eta);
			break;
		case 2:
			snprintf(tail, sizeof(tail), "%s %5.1f%%", count, pct);
			break;
		default:
			snprintf(tail, sizeof(tail), " %5.1f%%", pct);
		}
		int room = width - len - (int)strlen(tail) - 3; /* " [" and "]" */
		bar = room < BAR ? room : BAR;
		if (bar >= MIN_BAR || len + (int)strlen(tail) <= width)
			break;
	}
	if (bar >= MIN_BAR && len + 2 + bar + 1 < (int)sizeof(line)) {
		int fill = (int)(frac * bar);
		line[len++] = ' ';
		line[len++] = '[';
		for (int i = 0; i < bar; i++)
			line[len++] = i < fill ? '#' : '-';
		line[len++] = ']';
		line[len] = 0;
	}
	snprintf(line + len, sizeof(line) - (size_t)len, "%s", tail);
	if ((int)strlen(line) > width)
		line[width] = 0;
	fprintf(stderr, "\r%s\033[K", line);
	fflush(stderr);
	p->last_draw = now;
}

void sprite_progress_draw(struct sprite_progress *p)
{
	if (!p->tty)
		return;
	double now = sprite_now();
	if (now - p->last_draw < 0.1)
		return;
	progress_paint(p, now);
}

void sprite_progress_end(struct sprite_progress *p)
{
	if (!p->tty)
		return;
	progress_paint(p, sprite_now());
	fputc('\n', stderr);
	fflush(stderr);
}
