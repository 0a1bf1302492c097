/* text.c: print text that came from a snapshot or a guest with its control characters escaped, and sizes in words. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/array.h"
#include "cli.h"

/* Length of the valid UTF-8 sequence at s (of at most n bytes) that is safe
 * to show as is (a code point >= U+00A0: not a C1 control), or 0. */
static size_t utf8_printable(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	len = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	if (n < len)
		return 0;
	cp = s[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong, surrogate, beyond Unicode, or a C1 control (U+0080..U+009F) */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp > 0x10ffff || cp < 0xa0)
		return 0;
	return len;
}

size_t cli_escape(const char *in, size_t n, char *out, size_t size)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		char tmp[5];
		size_t tl;
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\') {
			tmp[0] = (char)s[i];
			tl = 1;
		} else if (s[i] == '\\' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
			tmp[0] = '\\';
			tmp[1] = s[i] == '\\' ? '\\' : s[i] == '\n' ? 'n' : s[i] == '\t' ? 't' : 'r';
			tl = 2;
		} else if ((tl = utf8_printable(s + i, n - i)) > 0) {
			if (o + tl < size)
				memcpy(out + o, s + i, tl);
			o += tl;
			i += tl;
			continue;
		} else {
			snprintf(tmp, sizeof(tmp), "\\x%02x", s[i]);
			tl = 4;
		}
		if (o + tl < size)
			memcpy(out + o, tmp, tl);
		o += tl;
		i++;
	}
	if (size)
		out[o < size ? o : size - 1] = '\0';
	return o;
}

/* Escaped copies are handed out from a few rotating buffers, so one printf
 * can take several; each stays valid until CLI_ESC_SLOTS more calls. They
 * are the main thread's (the CLI prints from there); other threads use
 * cli_esc_dup. */
#define CLI_ESC_SLOTS 4
static struct {
	char *buf;
	size_t cap;
} slots[CLI_ESC_SLOTS];
static unsigned next_slot;

char *cli_esc_dup(const char *s, size_t n)
{
	size_t need = cli_escape(s, n, NULL, 0) + 1;
	char *out = malloc(need);

	if (out)
		cli_escape(s, n, out, need);
	return out;
}

const char *cli_esc_n(const char *s, size_t n)
{
	unsigned k = next_slot++ % CLI_ESC_SLOTS;
	size_t need;

	if (!s)
		return "(null)";
	need = cli_escape(s, n, NULL, 0) + 1;
	if (ST_ARRAY_RESERVE(slots[k].buf, slots[k].cap, need) < 0)
		return "(out of memory)";
	cli_escape(s, n, slots[k].buf, slots[k].cap);
	return slots[k].buf;
}

const char *cli_esc(const char *s)
{
	return cli_esc_n(s, s ? strlen(s) : 0);
}

void cli_vputs_escaped(FILE *f, const char *fmt, va_list ap)
{
	char small[512], *msg = small;
	va_list again;
	int n;

	va_copy(again, ap);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	if (n >= (int)sizeof(small) && (msg = malloc((size_t)n + 1)) != NULL)
		vsnprintf(msg, (size_t)n + 1, fmt, again);
	else if (n >= (int)sizeof(small))
		msg = small, n = (int)sizeof(small) - 1;
	va_end(again);
	char *e = n > 0 ? cli_esc_dup(msg, (size_t)n) : NULL;
	if (e)
		fputs(e, f);
	free(e);
	if (msg != small)
		free(msg);
}

int cli_json_put(json_t *root)
{
	char *s = root ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII) : NULL;

	json_decref(root);
	if (!s)
		return -ENOMEM;
	puts(s);
	free(s);
	return 0;
}

void cli_fmt_size(char *buf, size_t len, uint64_t v)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", v);
	else
		snprintf(buf, len, d < 10 ? "%.1f %s" : "%.0f %s", d, unit[u]);
}


/* v with a comma between each three digits: 1,024. */
static void fmt_count(char *buf, size_t len, uint64_t v)
{
	char raw[24];
	int n = snprintf(raw, sizeof(raw), "%" PRIu64, v);
	size_t o = 0;

	for (int i = 0; i < n && o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = raw[i];
	}
	buf[o] = '\0';
}

void cli_fmt_lazy(char *buf, size_t len, uint64_t present, uint64_t chunks)
{
	char a[32], b[32];

	fmt_count(a, sizeof(a), present);
	fmt_count(b, sizeof(b), chunks);
	snprintf(buf, len, "lazy: %s of %s chunks present", a, b);
}
