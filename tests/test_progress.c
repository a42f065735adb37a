/*
 * test_progress.c - the progress bar on a real terminal (a pseudo-terminal):
 * every line it draws fits the terminal's width, one column short (a line
 * that reaches the last column wraps, and each redraw leaves a stray line),
 * a resize between drawings is followed, a terminal narrower than the bar
 * still gets whole lines cut to fit, and with TERM=dumb (or no TERM) nothing
 * is drawn at all. Each case prints the width and the line that failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "common/progress.h"
#include "common/util.h"
#include "tests/check.h"

static int master = -1, slave = -1;

static void set_cols(int cols)
{
	struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)cols};
	if (ioctl(master, TIOCSWINSZ, &ws) < 0)
		FAIL("TIOCSWINSZ: %s", strerror(errno));
}

/* Everything written to the terminal so far (the master side, drained). */
static size_t drain(char *buf, size_t cap)
{
	size_t n = 0;
	for (;;) {
		ssize_t r = read(master, buf + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	return n;
}

/*
 * Draw a bar of `steps` updates on the terminal (stderr pointed at the
 * pseudo-terminal meanwhile), switching to cols2 columns half way.
 */
static size_t run_bar(const char *term, const char *label, int cols1, int cols2, char *out,
		      size_t cap)
{
	if (term)
		setenv("TERM", term, 1);
	else
		unsetenv("TERM");
	set_cols(cols1);
	int saved = dup(2);
	fflush(stderr);
	dup2(slave, 2);
	struct sprite_progress p;
	memset(&p, 0, sizeof p);
	sprite_progress_start(&p, label, 100000);
	for (int i = 0; i < 20; i++) {
		if (i == 10)
			set_cols(cols2);
		sprite_progress_add(&p, 5000);
		p.last_draw = 0; /* past the 10-a-second limit */
		sprite_progress_draw(&p);
	}
	sprite_progress_end(&p);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	return drain(out, cap);
}

/* Every line drawn (between \r and \n, escapes removed) is at most max columns. */
static void check_lines(const char *what, char *out, int max1, int max2)
{
	int lines = 0, second = 0;
	char *save = NULL;
	for (char *l = strtok_r(out, "\r\n", &save); l; l = strtok_r(NULL, "\r\n", &save)) {
		char *k = strstr(l, "\033[K");
		if (k)
			*k = 0;
		if (!*l)
			continue;
		CHECK(strchr(l, '\033') == NULL, "%s: a stray escape in '%s'", what, l);
		second = strstr(l, " 55000/") || second; /* drawn after the resize */
		int max = second ? max2 : max1;
		CHECK((int)strlen(l) <= max,
		      "%s: line of %zu columns on a %d-column terminal: '%s'", what, strlen(l),
		      max + 1, l);
		lines++;
	}
	if (max1 > 0) /* on one column there is no room for anything */
		CHECK(lines >= 20, "%s: %d lines drawn, expected 21", what, lines);
}

int main(void)
{
	master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0) {
		printf("SKIP: no pseudo-terminal: %s\n", strerror(errno));
		return 77;
	}
	slave = open(ptsname(master), O_RDWR | O_NOCTTY);
	if (slave < 0) {
		printf("SKIP: cannot open %s: %s\n", ptsname(master), strerror(errno));
		return 77;
	}
	struct termios t;
	tcgetattr(slave, &t);
	cfmakeraw(&t); /* no \n -> \r\n, no echo */
	tcsetattr(slave, TCSANOW, &t);
	fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);

	static char out[1 << 16];
	const struct {
		const char *label;
		int cols1, cols2;
	} cases[] = {
		{"pack", 80, 80},	   {"epoch 1/10", 40, 40}, {"epoch 1/10", 120, 30},
		{"epoch 10/100", 30, 120}, {"pack", 12, 12},	   {"pack", 1, 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char what[64];
		snprintf(what, sizeof what, "'%s' at %d then %d columns", cases[i].label,
			 cases[i].cols1, cases[i].cols2);
		size_t n = run_bar("xterm", cases[i].label, cases[i].cols1, cases[i].cols2, out,
				   sizeof out);
		CHECK(n > 0, "%s: nothing drawn", what);
		if (cases[i].cols2 >= 40)
			CHECK(strstr(out, "100000/100000") != NULL, "%s: no final count in '%s'",
			      what, out);
		check_lines(what, out, cases[i].cols1 - 1, cases[i].cols2 - 1);
	}
	/* on 80 columns the whole bar is there; on 40 the count and ETA stay whole */
	run_bar("xterm", "pack", 80, 80, out, sizeof out);
	CHECK(strstr(out, "pack [########################] 100000/100000 100.0%") != NULL,
	      "80 columns: no full bar in '%s'", out);
	run_bar("xterm", "pack", 40, 40, out, sizeof out);
	CHECK(strstr(out, " 100000/100000 100.0% ETA 0:00\033[K") != NULL,
	      "40 columns: no whole count and ETA in '%s'", out);
	/* a terminal that takes no cursor controls gets nothing */
	const char *dumb[] = {"dumb", "", NULL};
	for (size_t i = 0; i < 3; i++) {
		size_t n = run_bar(dumb[i], "pack", 40, 40, out, sizeof out);
		CHECK(n == 0, "TERM=%s: %zu bytes drawn: '%s'", dumb[i] ? dumb[i] : "(unset)", n,
		      out);
	}
	if (failures)
		return 1;
	printf("PASS\n");
	return 0;
}
