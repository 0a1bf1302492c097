/* strata guest libc: snprintf/vsnprintf (integer, string and char conversions). */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/stdio.h"
#include "include/string.h"

/* Output cursor: writes what fits in buf, counts everything. */
struct fmt_out {
	char *buf;
	size_t cap; /* bytes of buf usable for characters (size - 1) */
	size_t len; /* would-be length so far */
};

static void out_bytes(struct fmt_out *o, const char *s, size_t n)
{
	if (o->len < o->cap) {
		size_t room = o->cap - o->len;
		STRATA_LIBC_NAME(memcpy)(o->buf + o->len, s, n < room ? n : room);
	}
	o->len += n;
}

static void out_fill(struct fmt_out *o, char c, size_t n)
{
	if (o->len < o->cap) {
		size_t room = o->cap - o->len;
		STRATA_LIBC_NAME(memset)(o->buf + o->len, c, n < room ? n : room);
	}
	o->len += n;
}

enum {
	F_MINUS = 1 << 0,
	F_ZERO = 1 << 1,
	F_PLUS = 1 << 2,
	F_SPACE = 1 << 3,
	F_HASH = 1 << 4,
};

enum fmt_len { L_NONE, L_HH, L_H, L_L, L_LL, L_Z, L_J, L_T };

struct fmt_spec {
	unsigned flags;
	size_t width;
	bool has_prec;
	size_t prec;
	enum fmt_len len;
	char conv;
};

/* Emit body (already converted digits etc.) with prefix, zero padding to
 * the precision and space/zero padding to the width. */
static void out_field(struct fmt_out *o, const struct fmt_spec *sp, const char *prefix,
                      size_t plen, const char *body, size_t blen, size_t zeros)
{
	size_t total = plen + zeros + blen;
	size_t pad = sp->width > total ? sp->width - total : 0;

	if (!(sp->flags & F_MINUS) && !(sp->flags & F_ZERO))
		out_fill(o, ' ', pad);
	out_bytes(o, prefix, plen);
	if (!(sp->flags & F_MINUS) && (sp->flags & F_ZERO))
		out_fill(o, '0', pad);
	out_fill(o, '0', zeros);
	out_bytes(o, body, blen);
	if (sp->flags & F_MINUS)
		out_fill(o, ' ', pad);
}

static void out_integer(struct fmt_out *o, struct fmt_spec *sp, uintmax_t v, bool neg)
{
	/* 64-bit octal needs 22 digits. */
	char digits[24];
	char prefix[2];
	size_t plen = 0, n = 0, zeros = 0;
	unsigned base = 10;
	const char *set = "0123456789abcdef";

	switch (sp->conv) {
	case 'o':
		base = 8;
		break;
	case 'X':
		set = "0123456789ABCDEF";
		/* fall through */
	case 'x':
	case 'p':
		base = 16;
		break;
	default:
		break;
	}
	if (neg)
		prefix[plen++] = '-';
	else if (sp->flags & F_PLUS)
		prefix[plen++] = '+';
	else if (sp->flags & F_SPACE)
		prefix[plen++] = ' ';

	while (v) {
		digits[sizeof digits - ++n] = set[v % base];
		v /= base;
	}
	/* Precision 0 with value 0 prints no digits; otherwise at least one. */
	if (n == 0 && !(sp->has_prec && sp->prec == 0))
		digits[sizeof digits - ++n] = '0';
	if (sp->has_prec) {
		sp->flags &= ~(unsigned)F_ZERO;
		if (sp->prec > n)
			zeros = sp->prec - n;
	}
	if (sp->flags & F_HASH) {
		if (base == 8 && zeros == 0 && (n == 0 || digits[sizeof digits - n] != '0'))
			zeros = 1;
		if (base == 16 && n > 0 && !(n == 1 && digits[sizeof digits - 1] == '0')) {
			prefix[plen++] = '0';
			prefix[plen++] = sp->conv == 'X' ? 'X' : 'x';
		}
	}
	out_field(o, sp, prefix, plen, digits + sizeof digits - n, n, zeros);
}

static uintmax_t arg_unsigned(enum fmt_len len, va_list *ap)
{
	switch (len) {
	case L_HH: return (unsigned char)va_arg(*ap, unsigned int);
	case L_H: return (unsigned short)va_arg(*ap, unsigned int);
	case L_L: return va_arg(*ap, unsigned long);
	case L_LL: return va_arg(*ap, unsigned long long);
	case L_Z: return va_arg(*ap, size_t);
	case L_J: return va_arg(*ap, uintmax_t);
	/* The unsigned type matching ptrdiff_t has size_t's width. */
	case L_T: return va_arg(*ap, size_t);
	default: return va_arg(*ap, unsigned int);
	}
}

static intmax_t arg_signed(enum fmt_len len, va_list *ap)
{
	switch (len) {
	case L_HH: return (signed char)va_arg(*ap, int);
	case L_H: return (short)va_arg(*ap, int);
	case L_L: return va_arg(*ap, long);
	case L_LL: return va_arg(*ap, long long);
	/* The signed type matching size_t has ptrdiff_t's width. */
	case L_Z: return va_arg(*ap, ptrdiff_t);
	case L_J: return va_arg(*ap, intmax_t);
	case L_T: return va_arg(*ap, ptrdiff_t);
	default: return va_arg(*ap, int);
	}
}

/* Parse a decimal count, saturating far above any useful width. */
static size_t parse_count(const char **pp)
{
	const char *p = *pp;
	size_t v = 0;

	while (*p >= '0' && *p <= '9') {
		if (v < ((size_t)1 << 40))
			v = v * 10 + (size_t)(*p - '0');
		p++;
	}
	*pp = p;
	return v;
}

/* Parse one conversion after '%'; returns false if it is not one we
 * support, leaving *pp where the conversion text ended. */
static bool parse_spec(const char **pp, struct fmt_spec *sp, va_list *ap)
{
	const char *p = *pp;

	*sp = (struct fmt_spec){ 0 };
	for (;; p++) {
		if (*p == '-') sp->flags |= F_MINUS;
		else if (*p == '0') sp->flags |= F_ZERO;
		else if (*p == '+') sp->flags |= F_PLUS;
		else if (*p == ' ') sp->flags |= F_SPACE;
		else if (*p == '#') sp->flags |= F_HASH;
		else break;
	}
	if (*p == '*') {
		int w = va_arg(*ap, int);
		p++;
		if (w < 0) {
			sp->flags |= F_MINUS;
			sp->width = (size_t)(0u - (unsigned)w);
		} else {
			sp->width = (size_t)w;
		}
	} else {
		sp->width = parse_count(&p);
	}
	if (*p == '.') {
		p++;
		sp->has_prec = true;
		if (*p == '*') {
			int pr = va_arg(*ap, int);
			p++;
			/* A negative precision is taken as if omitted. */
			if (pr < 0)
				sp->has_prec = false;
			else
				sp->prec = (size_t)pr;
		} else {
			sp->prec = parse_count(&p);
		}
	}
	switch (*p) {
	case 'h':
		sp->len = p[1] == 'h' ? L_HH : L_H;
		p += sp->len == L_HH ? 2 : 1;
		break;
	case 'l':
		sp->len = p[1] == 'l' ? L_LL : L_L;
		p += sp->len == L_LL ? 2 : 1;
		break;
	case 'z': sp->len = L_Z; p++; break;
	case 'j': sp->len = L_J; p++; break;
	case 't': sp->len = L_T; p++; break;
	default: break;
	}
	sp->conv = *p;
	if (*p)
		p++;
	*pp = p;
	switch (sp->conv) {
	case 'd': case 'i': case 'u': case 'x': case 'X': case 'o':
		return true;
	case 'p': case 's': case 'c': case '%':
		return sp->len == L_NONE;
	default:
		return false;
	}
}

int STRATA_LIBC_NAME(vsnprintf)(char *restrict buf, size_t size,
                                const char *restrict fmt, va_list ap)
{
	struct fmt_out o = { .buf = buf, .cap = size ? size - 1 : 0, .len = 0 };
	va_list args;
	const char *p = fmt;

	va_copy(args, ap);
	while (*p) {
		const char *start = p;
		struct fmt_spec sp;

		while (*p && *p != '%')
			p++;
		out_bytes(&o, start, (size_t)(p - start));
		if (!*p)
			break;
		start = p++;
		if (!parse_spec(&p, &sp, &args)) {
			/* Unsupported: copy the conversion text as written. */
			out_bytes(&o, start, (size_t)(p - start));
			continue;
		}
		switch (sp.conv) {
		case '%':
			out_bytes(&o, "%", 1);
			break;
		case 'c': {
			char c = (char)va_arg(args, int);
			sp.flags &= ~(unsigned)F_ZERO;
			out_field(&o, &sp, "", 0, &c, 1, 0);
			break;
		}
		case 's': {
			const char *s = va_arg(args, const char *);
			size_t n;
			if (!s)
				s = !sp.has_prec || sp.prec >= 6 ? "(null)" : "";
			n = sp.has_prec ? STRATA_LIBC_NAME(strnlen)(s, sp.prec)
			                : STRATA_LIBC_NAME(strlen)(s);
			sp.flags &= ~(unsigned)F_ZERO;
			out_field(&o, &sp, "", 0, s, n, 0);
			break;
		}
		case 'p': {
			const void *ptr = va_arg(args, const void *);
			if (!ptr) {
				sp.flags &= ~(unsigned)(F_ZERO | F_PLUS | F_SPACE);
				sp.has_prec = false;
				out_field(&o, &sp, "", 0, "(nil)", 5, 0);
			} else {
				sp.flags |= F_HASH;
				out_integer(&o, &sp, (uintptr_t)ptr, false);
			}
			break;
		}
		case 'd':
		case 'i': {
			intmax_t v = arg_signed(sp.len, &args);
			uintmax_t mag = v < 0 ? -(uintmax_t)v : (uintmax_t)v;
			out_integer(&o, &sp, mag, v < 0);
			break;
		}
		default:
			/* Unsigned conversions take no sign. */
			sp.flags &= ~(unsigned)(F_PLUS | F_SPACE);
			out_integer(&o, &sp, arg_unsigned(sp.len, &args), false);
			break;
		}
	}
	va_end(args);
	if (size)
		o.buf[o.len < o.cap ? o.len : o.cap] = '\0';
	if (o.len > (size_t)__INT_MAX__)
		return -1;
	return (int)o.len;
}

int STRATA_LIBC_NAME(snprintf)(char *restrict buf, size_t size, const char *restrict fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = STRATA_LIBC_NAME(vsnprintf)(buf, size, fmt, ap);
	va_end(ap);
	return n;
}
