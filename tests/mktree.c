/*
 * mktree.c - write small synthetic image data sets for the pack tests.
 *
 *   mktree gray  DIR [PER_CLASS]  ImageFolder train/test tree, 3 classes, all
 *                                 20x24 gray in lossless forms (TIFF 8/16-bit,
 *                                 none/LZW/Deflate/PackBits, min-is-white, PNG)
 *   mktree rgb   DIR [PER_CLASS]  same, 20x24 RGB (TIFF RGB/RGBA-assoc/palette,
 *                                 PNG RGB, JPEG)
 *   mktree mixed DIR [PER_CLASS]  class folders directly under DIR, mixed sizes
 *                                 and channels, plus bad files: truncated TIFF
 *                                 and PNG, an empty file, a text file, random
 *                                 bytes, a JPEG cut in half; hidden files that
 *                                 must be ignored
 *   mktree idx   DIR N H W        train-/t10k-images/labels IDX files (plain)
 *   mktree ycck  FILE H W         one YCCK JPEG (CMYK pixels, inverted inks as
 *                                 Photoshop writes them)
 *   mktree jpegs DIR N H W        DIR/a/ and DIR/b/, N RGB JPEGs of H x W in all
 *                                 (quality 95): camera-sized files for timing
 *   mktree odd   DIR              train/test tree of 20x24 gray TIFF/PNG with odd
 *                                 names and entries: good files named
 *                                 "ok\nname.tif" and "caf\xe9.tif"; files that do
 *                                 not decode named "bad\nname.png" and
 *                                 "\e[31mred\e[0m.png"; and 4 entries that are not
 *                                 images of a class folder: DIR/README.md,
 *                                 train/notes\xff.txt, a dangling symbolic link
 *                                 train/ant/gone.tif and a FIFO train/ant/pipe.png
 *
 * Prints "good G bad B" (files that should pack / be skipped). Files are
 * written with libtiff, libpng and libturbojpeg directly, not with the code
 * under test; content is a deterministic function of the file's index.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <png.h>
#include <tiffio.h>
#include <turbojpeg.h>

static void die(const char *what, const char *path)
{
	fprintf(stderr, "mktree: %s %s\n", what, path);
	exit(1);
}

static void mkdirs(const char *a, const char *b, const char *c)
{
	char p[1024];
	snprintf(p, sizeof p, "%s", a);
	mkdir(p, 0755);
	if (b) {
		snprintf(p, sizeof p, "%s/%s", a, b);
		mkdir(p, 0755);
	}
	if (c) {
		snprintf(p, sizeof p, "%s/%s/%s", a, b, c);
		mkdir(p, 0755);
	}
}

static uint8_t val(unsigned seed, unsigned y, unsigned x, unsigned ch)
{
	unsigned v = seed * 2654435761u + y * 97u + x * 31u + ch * 57u;
	v ^= v >> 13;
	v *= 0x5bd1e995u;
	return (uint8_t)(v >> 15);
}

/* A smooth picture for JPEG: lossy coding keeps it near its values. */
static uint8_t smooth(unsigned seed, unsigned y, unsigned x, unsigned ch)
{
	return (uint8_t)(30 + (seed * 7) % 60 + y * 3 + x * 2 + ch * 25);
}

enum { T_GRAY8, T_GRAY16, T_WHITE, T_RGB8, T_RGBA_ASSOC, T_PALETTE };

static void tiff(const char *path, unsigned seed, unsigned h, unsigned w, int kind, int comp)
{
	TIFF *t = TIFFOpen(path, "w");
	if (!t)
		die("cannot create", path);
	int spp = kind == T_RGB8 ? 3 : kind == T_RGBA_ASSOC ? 4 : 1;
	int bps = kind == T_GRAY16 ? 16 : 8;
	TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
	TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
	TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, bps);
	TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, spp);
	TIFFSetField(t, TIFFTAG_COMPRESSION, comp);
	TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
	TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 7);
	TIFFSetField(t, TIFFTAG_PHOTOMETRIC,
		     kind == T_WHITE	 ? PHOTOMETRIC_MINISWHITE
		     : kind == T_PALETTE ? PHOTOMETRIC_PALETTE
		     : spp >= 3		 ? PHOTOMETRIC_RGB
					 : PHOTOMETRIC_MINISBLACK);
	if (kind == T_RGBA_ASSOC) {
		uint16_t ex = EXTRASAMPLE_ASSOCALPHA;
		TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, &ex);
	}
	if (kind == T_PALETTE) {
		uint16_t r[256], g[256], b[256];
		for (unsigned i = 0; i < 256; i++) {
			r[i] = (uint16_t)(val(seed, 0, i, 0) * 257);
			g[i] = (uint16_t)(val(seed, 0, i, 1) * 257);
			b[i] = (uint16_t)(val(seed, 0, i, 2) * 257);
		}
		TIFFSetField(t, TIFFTAG_COLORMAP, r, g, b);
	}
	uint8_t row[4096];
	for (unsigned y = 0; y < h; y++) {
		for (unsigned x = 0; x < w; x++)
			for (int c = 0; c < spp; c++) {
				unsigned v = val(seed, y, x, (unsigned)c);
				if (kind == T_RGBA_ASSOC && c == 3)
					v = 255; /* opaque: PIL and this project agree */
				if (bps == 16) {
					uint16_t v16 = (uint16_t)(v << 8 | (x * 5 + y) % 256);
					memcpy(row + 2 * ((size_t)x * spp + c), &v16, 2);
				} else {
					row[(size_t)x * spp + c] = (uint8_t)v;
				}
			}
		if (TIFFWriteScanline(t, row, y, 0) < 0)
			die("cannot write", path);
	}
	TIFFClose(t);
}

static void png(const char *path, unsigned seed, unsigned h, unsigned w, int c)
{
	uint8_t *px = malloc((size_t)h * w * c);
	for (unsigned y = 0; y < h; y++)
		for (unsigned x = 0; x < w; x++)
			for (int k = 0; k < c; k++)
				px[((size_t)y * w + x) * c + k] = val(seed, y, x, (unsigned)k);
	png_image img;
	memset(&img, 0, sizeof img);
	img.version = PNG_IMAGE_VERSION;
	img.width = w;
	img.height = h;
	img.format = c == 1 ? PNG_FORMAT_GRAY : c == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
	if (!png_image_write_to_file(&img, path, 0, px, 0, NULL))
		die("cannot write", path);
	free(px);
}

static void jpeg(const char *path, unsigned seed, unsigned h, unsigned w, int c, long cut)
{
	uint8_t *px = malloc((size_t)h * w * c);
	for (unsigned y = 0; y < h; y++)
		for (unsigned x = 0; x < w; x++)
			for (int k = 0; k < c; k++)
				px[((size_t)y * w + x) * c + k] = smooth(seed, y, x, (unsigned)k);
	tjhandle tj = tjInitCompress();
	unsigned char *buf = NULL;
	unsigned long len = 0;
	/* 4 channels: TurboJPEG writes CMYK pixels as a YCCK JPEG (Adobe marker) */
	if (tjCompress2(tj, px, (int)w, 0, (int)h,
			c == 1	 ? TJPF_GRAY
			: c == 4 ? TJPF_CMYK
				 : TJPF_RGB,
			&buf, &len, c == 1 ? TJSAMP_GRAY : TJSAMP_444, 95, 0) < 0)
		die("cannot encode", path);
	FILE *f = fopen(path, "wb");
	if (!f)
		die("cannot create", path);
	fwrite(buf, 1, cut ? len / 2 : len, f);
	fclose(f);
	tjFree(buf);
	tjDestroy(tj);
	free(px);
}

static void truncate_file(const char *path, long keep)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die("cannot open", path);
	char buf[65536];
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	f = fopen(path, "wb");
	fwrite(buf, 1, keep < (long)n ? (size_t)keep : n, f);
	fclose(f);
}

static void raw(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		die("cannot create", path);
	fwrite(p, 1, n, f);
	fclose(f);
}

static const char *const classes[] = {"ant", "bee", "cat"};

static void lossless_tree(const char *dir, int per, int rgb)
{
	static const int comps[] = {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE,
				    COMPRESSION_PACKBITS};
	static const char *const splits[] = {"train", "test"};
	char p[1024];
	int good = 0;
	for (int s = 0; s < 2; s++)
		for (int c = 0; c < 3; c++) {
			mkdirs(dir, splits[s], classes[c]);
			int n = s == 0 ? per : (per + 1) / 2;
			for (int i = 0; i < n; i++) {
				unsigned seed = (unsigned)(s * 100000 + c * 1000 + i);
				int k = i % 6;
				const char *ext = k == 5 ? "png" : (rgb && k == 4) ? "jpg" : "tif";
				snprintf(p, sizeof p, "%s/%s/%s/img%03d.%s", dir, splits[s],
					 classes[c], i, ext);
				if (k == 5)
					png(p, seed, 20, 24, rgb ? 3 : 1);
				else if (rgb && k == 4)
					jpeg(p, seed, 20, 24, 3, 0);
				else if (rgb)
					tiff(p, seed, 20, 24,
					     k == 2   ? T_PALETTE
					     : k == 3 ? T_RGBA_ASSOC
						      : T_RGB8,
					     comps[i % 4]);
				else
					tiff(p, seed, 20, 24,
					     k == 2   ? T_GRAY16
					     : k == 3 ? T_WHITE
						      : T_GRAY8,
					     comps[i % 4]);
				good++;
			}
		}
	printf("good %d bad 0\n", good);
}

static void mixed_tree(const char *dir, int per)
{
	char p[1024];
	int good = 0, bad = 0;
	for (int c = 0; c < 3; c++) {
		mkdirs(dir, classes[c], NULL);
		for (int i = 0; i < per; i++) {
			unsigned seed = (unsigned)(c * 1000 + i);
			unsigned h = 8 + (unsigned)(i * 7) % 40, w = 8 + (unsigned)(i * 11) % 40;
			int k = i % 8;
			static const char *const ext[] = {"tif", "tif", "tif", "png",
							  "png", "jpg", "jpg", "tif"};
			snprintf(p, sizeof p, "%s/%s/f%04d.%s", dir, classes[c], i, ext[k]);
			switch (k) {
			case 0:
				tiff(p, seed, h, w, T_GRAY8, COMPRESSION_LZW);
				break;
			case 1:
				tiff(p, seed, h, w, T_RGB8, COMPRESSION_ADOBE_DEFLATE);
				break;
			case 2:
				tiff(p, seed, h, w, T_GRAY16, COMPRESSION_PACKBITS);
				break;
			case 3:
				png(p, seed, h, w, 1);
				break;
			case 4:
				png(p, seed, h, w, 4);
				break;
			case 5:
				jpeg(p, seed, h, w, 3, 0);
				break;
			case 6:
				jpeg(p, seed, h, w, 1, 0);
				break;
			case 7:
				tiff(p, seed, h, w, T_PALETTE, COMPRESSION_NONE);
				break;
			}
			good++;
		}
		/* Bad files, a few per class. */
		snprintf(p, sizeof p, "%s/%s/zz-truncated.tif", dir, classes[c]);
		tiff(p, 5, 30, 30, T_RGB8, COMPRESSION_NONE);
		truncate_file(p, 1200);
		snprintf(p, sizeof p, "%s/%s/zz-truncated.png", dir, classes[c]);
		png(p, 6, 30, 30, 3);
		truncate_file(p, 200);
		snprintf(p, sizeof p, "%s/%s/zz-empty.png", dir, classes[c]);
		raw(p, "", 0);
		snprintf(p, sizeof p, "%s/%s/zz-notes.txt", dir, classes[c]);
		raw(p, "not an image\n", 13);
		snprintf(p, sizeof p, "%s/%s/zz-cut.jpg", dir, classes[c]);
		jpeg(p, 7, 32, 32, 3, 1);
		uint8_t junk[300];
		for (int i = 0; i < 300; i++)
			junk[i] = (uint8_t)(i * 37 + c);
		memcpy(junk, "II*\0", 4);
		snprintf(p, sizeof p, "%s/%s/zz-junk.tif", dir, classes[c]);
		raw(p, junk, sizeof junk);
		bad += 6;
		/* Hidden files are not part of the data set. */
		snprintf(p, sizeof p, "%s/%s/.hidden.png", dir, classes[c]);
		raw(p, "x", 1);
	}
	printf("good %d bad %d\n", good, bad);
}

static void odd_tree(const char *dir)
{
	static const char *const good[] = {
		"train/ant/f0000.tif", "train/ant/f0001.png",	"train/ant/ok\nname.tif",
		"train/bee/f0000.tif", "train/bee/caf\xe9.tif", "test/ant/f0000.tif",
		"test/bee/f0000.png",
	};
	static const char *const bad[] = {"train/ant/bad\nname.png",
					  "train/bee/\033[31mred\033[0m.png"};
	char p[1024], q[1024];
	mkdirs(dir, "train", "ant");
	mkdirs(dir, "train", "bee");
	mkdirs(dir, "test", "ant");
	mkdirs(dir, "test", "bee");
	for (unsigned i = 0; i < sizeof good / sizeof *good; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, good[i]);
		if (strstr(p, ".png"))
			png(p, i, 20, 24, 1);
		else
			tiff(p, i, 20, 24, T_GRAY8, COMPRESSION_NONE);
	}
	for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, bad[i]);
		raw(p, "not an image\n", 13);
	}
	snprintf(p, sizeof p, "%s/README.md", dir);
	raw(p, "# odd\n", 6);
	snprintf(p, sizeof p, "%s/train/notes\xff.txt", dir);
	raw(p, "notes\n", 6);
	snprintf(p, sizeof p, "%s/train/ant/gone.tif", dir);
	snprintf(q, sizeof q, "%s/nowhere.tif", dir);
	if (symlink(q, p) < 0)
		die("cannot link", p);
	snprintf(p, sizeof p, "%s/train/ant/pipe.png", dir);
	if (mkfifo(p, 0644) < 0)
		die("cannot make a FIFO", p);
	printf("good %u bad %u\n", (unsigned)(sizeof good / sizeof *good),
	       (unsigned)(sizeof bad / sizeof *bad));
}

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void idx_files(const char *dir, unsigned n, unsigned h, unsigned w)
{
	static const char *const pre[] = {"train", "t10k"};
	char p[1024];
	mkdir(dir, 0755);
	for (int s = 0; s < 2; s++) {
		unsigned m = s == 0 ? n : n / 2 + 1;
		size_t sz = 16 + (size_t)m * h * w;
		uint8_t *b = malloc(sz);
		be32(b, 0x803);
		be32(b + 4, m);
		be32(b + 8, h);
		be32(b + 12, w);
		for (unsigned i = 0; i < m; i++)
			for (unsigned y = 0; y < h; y++)
				for (unsigned x = 0; x < w; x++)
					b[16 + ((size_t)i * h + y) * w + x] =
						val(i + 7u * (unsigned)s, y, x, 0);
		snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", dir, pre[s]);
		raw(p, b, sz);
		free(b);
		uint8_t *l = malloc(8 + m);
		be32(l, 0x801);
		be32(l + 4, m);
		for (unsigned i = 0; i < m; i++)
			l[8 + i] = (uint8_t)((i * 7 + (unsigned)s) % 5);
		snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", dir, pre[s]);
		raw(p, l, 8 + m);
		free(l);
	}
	printf("good %u bad 0\n", n + n / 2 + 1);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr,
			"usage: mktree gray|rgb|mixed DIR [PER_CLASS] | odd DIR | idx DIR N H W\n");
		return 2;
	}
	TIFFSetWarningHandler(NULL);
	int per = argc > 3 ? atoi(argv[3]) : 30;
	if (!strcmp(argv[1], "gray") || !strcmp(argv[1], "rgb")) {
		mkdir(argv[2], 0755);
		lossless_tree(argv[2], per, argv[1][0] == 'r');
	} else if (!strcmp(argv[1], "mixed")) {
		mkdir(argv[2], 0755);
		mixed_tree(argv[2], per);
	} else if (!strcmp(argv[1], "odd")) {
		mkdir(argv[2], 0755);
		odd_tree(argv[2]);
	} else if (!strcmp(argv[1], "ycck") && argc == 5) {
		jpeg(argv[2], 7, (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]), 4, 0);
	} else if (!strcmp(argv[1], "jpegs") && argc == 6) {
		char p[4096];
		unsigned n = (unsigned)atoi(argv[3]);
		mkdir(argv[2], 0755);
		for (unsigned i = 0; i < n; i++) {
			snprintf(p, sizeof p, "%s/%c", argv[2], i % 2 ? 'b' : 'a');
			mkdir(p, 0755);
			snprintf(p, sizeof p, "%s/%c/%05u.jpg", argv[2], i % 2 ? 'b' : 'a', i);
			jpeg(p, i, (unsigned)atoi(argv[4]), (unsigned)atoi(argv[5]), 3, 0);
		}
		printf("good %u bad 0\n", n);
	} else if (!strcmp(argv[1], "idx") && argc == 6) {
		idx_files(argv[2], (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]),
			  (unsigned)atoi(argv[5]));
	} else {
		fprintf(stderr, "mktree: bad arguments\n");
		return 2;
	}
	return 0;
}
