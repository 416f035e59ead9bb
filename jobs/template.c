/* SPDX-License-Identifier: MIT */
/* template.c - key and filter templates (see jobs_private.h). A template is
 * compiled once at configuration time into literal and field parts, so a bad
 * template is a configuration error, and rendering is a walk over parts.
 * A filter (ECW_TEMPLATE_FILTER) is lexed as OData when compiled: each
 * placeholder is either inside a '...' literal (its text goes in with '
 * doubled) or a whole operand outside one (it becomes one typed literal,
 * '...', 26, 26L, true, guid'...', ...), so no value can add an operator, a
 * parenthesis or a quote to the filter's structure.
 * The key helpers ({Prop:inverted_ticks}, unix, date_int, hash4) work in
 * .NET ticks (100 ns since 0001-01-01 UTC), the unit DateTime has at full
 * precision, so no digit of a 7-digit fraction is lost. Inverting a filter
 * into the keys it pins is template_filter.c's. */
#include <inttypes.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_clock.h"
#include "jobs_private.h"
#include "template_private.h"

#define TICKS_PER_DAY (86400 * ECW_TICKS_PER_SECOND)

bool ecw_template_civil_date_valid(int y, int m, int d)
{
	static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	if (y < 1 || y > 9999 || m < 1 || m > 12 || d < 1)
		return false;
	return d <= mdays[m - 1] + (m == 2 && leap);
}

int64_t ecw_template_civil_to_unix_ms(int y, int m, int d, int hh)
{
	return (ecw_clock_days_from_civil(y, m, d) * 24 + hh) * 3600000LL;
}

/* "YYYY-MM-DDThh:mm:ss.fffffffZ" (how entities keep a DateTime; 0..7
 * fractional digits accepted) to ticks. */
static bool iso_to_ticks(int64_t *out, const char *s, size_t n)
{
	int y, mo, d, h, mi, sec;
	int64_t frac = 0, scale = 1000000;
	size_t i = 19;

	if (n < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
	    (y = ecw_clock_digits(s, 4)) < 0 || (mo = ecw_clock_digits(s + 5, 2)) < 0 ||
	    (d = ecw_clock_digits(s + 8, 2)) < 0 || (h = ecw_clock_digits(s + 11, 2)) < 0 ||
	    (mi = ecw_clock_digits(s + 14, 2)) < 0 || (sec = ecw_clock_digits(s + 17, 2)) < 0 ||
	    !ecw_template_civil_date_valid(y, mo, d) || h > 23 || mi > 59 || sec > 59)
		return false;
	if (s[i] == '.') {
		for (i++; i < n && s[i] >= '0' && s[i] <= '9' && scale > 0; i++, scale /= 10)
			frac += (s[i] - '0') * scale;
		if (s[i - 1] == '.')
			return false;
	}
	if (i != n - 1 || s[i] != 'Z')
		return false;
	*out = (ecw_clock_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) *
		       ECW_TICKS_PER_SECOND +
	       frac + ECW_TICKS_UNIX_EPOCH;
	return true;
}

int ecw_template_ticks_to_iso(char out[ECW_ISO_TICKS_SIZE], int64_t ticks)
{
	int y, m, d;
	int64_t days, rem;

	if (ticks < 0 || ticks > ECW_TICKS_MAX)
		return ecw_error_set(ECW_EINVALID, "ticks %" PRId64 " are outside 0001-01-01..9999-12-31",
				     ticks);
	days = ticks / TICKS_PER_DAY;
	rem = ticks % TICKS_PER_DAY;
	ecw_clock_civil_from_days(days - 719162, &y, &m, &d); /* 719162: days from 0001-01-01 to 1970-01-01 */
	snprintf(out, ECW_ISO_TICKS_SIZE, "%04d-%02d-%02dT%02d:%02d:%02d.%07dZ", y, m, d,
		 (int)(rem / (3600 * ECW_TICKS_PER_SECOND)), (int)(rem / (60 * ECW_TICKS_PER_SECOND) % 60),
		 (int)(rem / ECW_TICKS_PER_SECOND % 60), (int)(rem % ECW_TICKS_PER_SECOND));
	return 0;
}

int ecw_template_inverted_ticks_to_iso(char out[ECW_ISO_TICKS_SIZE], const char *key)
{
	uint64_t inv = 0; /* 19 digits fit in 64 unsigned bits, not always in signed */

	for (int i = 0; i < 19; i++) {
		if (key[i] < '0' || key[i] > '9')
			return ecw_error_set(ECW_EINVALID, "an inverted-ticks key starts with 19 digits");
		inv = inv * 10 + (uint64_t)(key[i] - '0');
	}
	if (inv > (uint64_t)ECW_TICKS_MAX)
		return ecw_error_set(ECW_EINVALID, "inverted ticks %" PRIu64 " exceed DateTime.MaxValue",
				     inv);
	return ecw_template_ticks_to_iso(out, ECW_TICKS_MAX - (int64_t)inv);
}

/* A time for unix/date_int/inverted_ticks, in ticks: a DateTime, or Unix
 * seconds as Int32, Int64 or a String of digits. */
static int prop_ticks(int64_t *out, const struct ecw_prop *p, const char *fmt)
{
	int64_t secs = -1;

	switch (p->type) {
	case ECW_EDM_DATETIME:
		if (iso_to_ticks(out, p->v.s, p->len))
			return 0;
		break;
	case ECW_EDM_INT32: secs = p->v.i32; break;
	case ECW_EDM_INT64: secs = p->v.i64; break;
	case ECW_EDM_STRING:
		if (p->len == 0 || p->len > 12)
			break;
		secs = 0;
		for (size_t i = 0; i < p->len && secs >= 0; i++)
			secs = p->v.s[i] >= '0' && p->v.s[i] <= '9' ? secs * 10 + (p->v.s[i] - '0') : -1;
		break;
	default: break;
	}
	/* Unix seconds up to 9999-12-31T23:59:59. */
	if (p->type != ECW_EDM_DATETIME && secs >= 0 && secs <= 253402300799LL) {
		*out = secs * ECW_TICKS_PER_SECOND + ECW_TICKS_UNIX_EPOCH;
		return 0;
	}
	return ecw_error_set(
		ECW_EINVALID,
		"property '%s' (%s) is not a time for :%s (a DateTime, or Unix seconds as Int32, "
		"Int64 or a string of digits)",
		p->name, ecw_entity_edm_name(p->type), fmt);
}

void ecw_template_free(struct ecw_template *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		free(t->parts[i].text);
		free(t->parts[i].pattern);
	}
	free(t->parts);
	free(t->source);
	free(t);
}

bool ecw_template_may_render(const struct ecw_template *t, const char *s)
{
	size_t len = strlen(s), pre = 0, suf = 0, i = 0, j = t->n;

	for (; i < t->n && !t->parts[i].field; i++) { /* the literal text before the first placeholder */
		size_t n = strlen(t->parts[i].text);
		if (n > len - pre || memcmp(s + pre, t->parts[i].text, n) != 0)
			return false;
		pre += n;
	}
	if (i == t->n)
		return pre == len;                     /* no placeholder: only its own text */
	for (; j > i && !t->parts[j - 1].field; j--) { /* ... and after the last */
		size_t n = strlen(t->parts[j - 1].text);
		if (n > len - pre - suf || memcmp(s + len - suf - n, t->parts[j - 1].text, n) != 0)
			return false;
		suf += n;
	}
	return true;
}

const char *ecw_template_text(const struct ecw_template *t)
{
	return t->source;
}

size_t ecw_template_nparts(const struct ecw_template *t)
{
	return t->n;
}

const char *ecw_template_part(const struct ecw_template *t, size_t i, bool *field, bool *plain)
{
	*field = t->parts[i].field;
	*plain = t->parts[i].fmt == FMT_NONE && !t->parts[i].now;
	return t->parts[i].text;
}

int ecw_template_select_add(struct ecw_buf *out, const char *name)
{
	size_t n = strlen(name);
	int err;

	for (const char *at = ecw_buf_cstr(out); *at;) {
		const char *comma = strchr(at, ',');
		size_t len = comma ? (size_t)(comma - at) : strlen(at);
		if (len == n && memcmp(at, name, n) == 0)
			return 0;
		at += len + (comma != NULL);
	}
	if (out->len && (err = ecw_buf_addc(out, ',')) < 0)
		return err;
	return ecw_buf_adds(out, name);
}

int ecw_template_select(struct ecw_buf *out, const struct ecw_template *t)
{
	int err = 0;

	for (size_t i = 0; i < t->n && err == 0; i++)
		if (t->parts[i].field && !t->parts[i].now)
			err = ecw_template_select_add(out, t->parts[i].text);
	return err;
}

static int add_part(struct ecw_template *t, const char *s, size_t n, bool field)
{
	struct part *p = realloc(t->parts, (t->n + 1) * sizeof(*p));

	if (!p)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	t->parts = p;
	p = &t->parts[t->n];
	memset(p, 0, sizeof(*p));
	if (!(p->text = strndup(s, n)))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	p->field = field;
	t->n++;
	return 0;
}

/* The fields a date pattern may hold, each a fixed number of digits. */
static const struct {
	const char *token;
	int digits;
} date_tokens[] = {{"yyyy", 4}, {"MM", 2}, {"dd", 2}, {"HH", 2}, {"mm", 2}, {"ss", 2}};

/* The length of the date token at s (n bytes left), or 0. */
static size_t date_token_at(const char *s, size_t n, int *which)
{
	for (int k = 0; k < (int)(sizeof(date_tokens) / sizeof(date_tokens[0])); k++) {
		size_t len = strlen(date_tokens[k].token);
		if (len <= n && memcmp(s, date_tokens[k].token, len) == 0) {
			*which = k;
			return len;
		}
	}
	return 0;
}

/* "yyyy/MM/dd/HH", "yyyyMMddHH": date tokens and the separators / - _ . T,
 * at least one token. Never an arbitrary letter: a typo is refused rather
 * than written into every name as it is. */
static bool date_pattern_valid(const char *s, size_t n)
{
	bool token = false;
	int which;

	for (size_t i = 0; i < n;) {
		size_t len = date_token_at(s + i, n - i, &which);
		if (len) {
			token = true;
			i += len;
		} else if (strchr("/-_.T", s[i]) && s[i]) {
			i++;
		} else {
			return false;
		}
	}
	return token;
}

static int format_date_pattern(struct ecw_buf *out, const char *pattern, int64_t ticks)
{
	int64_t day = ticks / TICKS_PER_DAY, in_day = ticks % TICKS_PER_DAY / ECW_TICKS_PER_SECOND;
	int y, m, d, which, err = 0;

	ecw_clock_civil_from_days(day - 719162, &y, &m, &d);
	const int values[] = {y, m, d, (int)(in_day / 3600), (int)(in_day / 60 % 60), (int)(in_day % 60)};
	for (size_t i = 0, n = strlen(pattern); i < n && err == 0;) {
		size_t len = date_token_at(pattern + i, n - i, &which);
		if (len) {
			err = ecw_buf_printf(out, "%0*d", date_tokens[which].digits, values[which]);
			i += len;
		} else {
			err = ecw_buf_addc(out, pattern[i++]);
		}
	}
	return err;
}

static const struct {
	const char *name;
	enum fmt fmt;
	bool time; /* takes a time, so {now:...} may use it */
} formatters[] = {
	{"inverted_ticks", FMT_INVERTED_TICKS, true},
	{"unix", FMT_UNIX, true},
	{"date_int", FMT_DATE_INT, true},
	{"hash4", FMT_HASH4, false},
};

/* "Name", "Name:F>W" / "Name:F<W", or "Name:formatter". */
static int parse_field(struct ecw_template *t, const char *s, size_t n, const char *what, size_t col,
		       unsigned flags)
{
	const char *colon = memchr(s, ':', n);
	size_t name_len = colon ? (size_t)(colon - s) : n;
	int err;

	if (name_len == 0)
		return ecw_error_set(ECW_EINVALID, "%s: empty {} at column %zu", what, col);
	for (size_t i = 0; i < name_len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (i && c >= '0' && c <= '9') || c >= 0x80))
			/* Not quoted: a configured template may hold a value from
			 * the environment. */
			return ecw_error_set(
				ECW_EINVALID,
				"%s: the name at column %zu is not a property name (letters, digits "
				"and '_', not starting with a digit)",
				what, col);
	}
	if ((err = add_part(t, s, name_len, true)) < 0)
		return err;
	if (colon) {
		struct part *p = &t->parts[t->n - 1];
		const char *spec = colon + 1;
		size_t sn = n - name_len - 1;
		char *end;
		long w;
		for (size_t k = 0; k < sizeof(formatters) / sizeof(formatters[0]); k++) {
			if (strlen(formatters[k].name) != sn || memcmp(formatters[k].name, spec, sn) != 0)
				continue;
			p->fmt = formatters[k].fmt;
			if (strcmp(p->text, "now") != 0)
				return 0;
			if (!formatters[k].time)
				return ecw_error_set(
					ECW_EINVALID,
					"%s: {now:%s} at column %zu: now takes inverted_ticks, unix or "
					"date_int",
					what, formatters[k].name, col);
			if (!(flags & ECW_TEMPLATE_ALLOW_NOW))
				return ecw_error_set(
					ECW_EINVALID,
					"{now:...} is not allowed in %s: a rerun would write another key "
					"(column %zu)",
					what, col);
			p->now = true;
			return 0;
		}
		if (date_pattern_valid(spec, sn)) {
			if (strcmp(p->text, "now") == 0)
				return ecw_error_set(
					ECW_EINVALID,
					"%s: {now:%.*s} at column %zu: now takes inverted_ticks, unix or "
					"date_int",
					what, (int)sn, spec, col);
			if (!(p->pattern = strndup(spec, sn)))
				return ecw_error_set(ECW_ENOMEM, "out of memory");
			p->fmt = FMT_DATE_PATTERN;
			return 0;
		}
		if (sn < 3 || (spec[1] != '>' && spec[1] != '<'))
			return ecw_error_set(
				ECW_EINVALID,
				"%s: format at column %zu must be FILL>WIDTH or FILL<WIDTH, like {Id:0>6}, "
				"one of inverted_ticks, unix, date_int, hash4, or a date pattern of yyyy, "
				"MM, dd, HH, mm, ss and / - _ . like {window:yyyy/MM/dd/HH}",
				what, col);
		w = strtol(spec + 2, &end, 10);
		if (end != spec + sn || w < 1 || w > 255 || spec[2] < '0' || spec[2] > '9')
			return ecw_error_set(ECW_EINVALID, "%s: width at column %zu must be 1..255", what,
					     col);
		p->fmt = FMT_PAD;
		p->fill = spec[0];
		p->left = spec[1] == '>';
		p->width = (int)w;
	}
	return 0;
}

int ecw_template_compile(struct ecw_template **out, const char *text, const char *what)
{
	return ecw_template_compile_flags(out, text, what, 0);
}

/* ---- a filter lexed as OData ------------------------------------------------------------ */

/* What the lexer knows of a filter template so far, walking it as the
 * service will read the rendered text: '...' literals ('' inside is a quote:
 * it closes and reopens, so toggling is exact), and outside them the text
 * around each placeholder. */
struct lex {
	bool on;            /* ECW_TEMPLATE_FILTER: otherwise nothing is checked */
	bool in_string;     /* inside a '...' literal */
	size_t string_col;  /* where it opened */
	char prev;          /* the last literal character outside a placeholder; '\0' at the start */
	size_t operand_col; /* a placeholder outside quotes that awaits its separator; 0: none */
};

bool ecw_template_odata_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int operand_error(const char *what, size_t col, const char *where)
{
	return ecw_error_set(
		ECW_EINVALID,
		"%s: the placeholder at column %zu is outside quotes, so it must be a whole operand "
		"(%s); write '...{Name}...' to put a value inside a string",
		what, col, where);
}

/* A literal character c of the template, at column col. */
static int lex_char(struct lex *x, char c, size_t col, const char *what)
{
	if (!x->on)
		return 0;
	if (x->operand_col && !ecw_template_odata_space(c) && c != ')')
		return operand_error(what, x->operand_col, "followed by the end, a space or ')'");
	x->operand_col = 0;
	if (c == '\'') {
		x->in_string = !x->in_string;
		x->string_col = col;
	} else if (c == '"' && !x->in_string) {
		/* Azurite reads "..." as a string and the service refuses it:
		 * either way a value's quote would be read differently. */
		return ecw_error_set(
			ECW_EINVALID,
			"%s: the \" at column %zu: strings in a filter are written '...' ('' for a "
			"quote)",
			what, col);
	}
	x->prev = c;
	return 0;
}

/* A placeholder at column col: inside a literal it is text; outside, a
 * whole operand, nothing glued to it on either side. */
static int lex_field(struct lex *x, struct part *p, size_t col, const char *what)
{
	if (!x->on || x->in_string)
		return 0;
	if (x->operand_col || !(x->prev == '\0' || ecw_template_odata_space(x->prev) || x->prev == '('))
		return operand_error(what, col, "after the start, a space or '('");
	p->operand = true;
	x->operand_col = col;
	return 0;
}

static int lex_end(const struct lex *x, const char *what)
{
	if (x->on && x->in_string)
		return ecw_error_set(ECW_EINVALID,
				     "%s: the ' at column %zu opens a string that is never closed", what,
				     x->string_col);
	return 0;
}

int ecw_template_compile_flags(struct ecw_template **out, const char *text, const char *what, unsigned flags)
{
	struct ecw_template *t = calloc(1, sizeof(*t));
	struct lex lex = {.on = (flags & ECW_TEMPLATE_FILTER) != 0};
	struct ecw_buf lit;
	size_t i = 0, n = strlen(text);
	int err = 0;

	*out = NULL;
	ecw_buf_init(&lit, 0);
	if (!t || !(t->source = strdup(text))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	t->filter = lex.on;
	while (i < n && err == 0) {
		if ((text[i] == '{' || text[i] == '}') && i + 1 < n && text[i + 1] == text[i]) {
			if ((err = lex_char(&lex, text[i], i + 1, what)) == 0)
				err = ecw_buf_addc(&lit, text[i]);
			i += 2;
		} else if (text[i] == '{') {
			const char *close = strchr(text + i + 1, '}');
			if (!close) {
				err = ecw_error_set(ECW_EINVALID, "%s: '{' at column %zu is never closed",
						    what, i + 1);
				break;
			}
			if (lit.len && (err = add_part(t, lit.ptr, lit.len, false)) < 0)
				break;
			ecw_buf_reset(&lit);
			if ((err = parse_field(t, text + i + 1, (size_t)(close - text - i - 1), what, i + 1,
					       flags)) == 0)
				err = lex_field(&lex, &t->parts[t->n - 1], i + 1, what);
			i = (size_t)(close - text) + 1;
		} else if (text[i] == '}') {
			err = ecw_error_set(ECW_EINVALID,
					    "%s: '}' at column %zu has no '{' (write }} for a brace)", what,
					    i + 1);
		} else if ((err = lex_char(&lex, text[i], i + 1, what)) == 0) {
			err = ecw_buf_addc(&lit, text[i++]);
		}
	}
	if (err == 0 && lit.len)
		err = add_part(t, lit.ptr, lit.len, false);
	if (err == 0)
		err = lex_end(&lex, what);
	if (err == 0 && t->n == 0)
		err = ecw_error_set(ECW_EINVALID, "%s is empty", what);
done:
	ecw_buf_dispose(&lit);
	if (err < 0) {
		ecw_template_free(t);
		return err;
	}
	*out = t;
	return 0;
}

/* The text form of a property's value. */
static int value_text(struct ecw_buf *out, const struct ecw_prop *p)
{
	char num[40];

	switch (p->type) {
	case ECW_EDM_STRING:
	case ECW_EDM_DATETIME:
	case ECW_EDM_GUID: return ecw_buf_add(out, p->v.s, p->len);
	case ECW_EDM_INT32: return ecw_buf_printf(out, "%d", (int)p->v.i32);
	case ECW_EDM_INT64: return ecw_buf_printf(out, "%lld", (long long)p->v.i64);
	case ECW_EDM_BOOLEAN: return ecw_buf_adds(out, p->v.b ? "true" : "false");
	case ECW_EDM_DOUBLE:
		if (!isfinite(p->v.d))
			break;
		for (int prec = 1; prec <= 17; prec++) {
			snprintf(num, sizeof(num), "%.*g", prec, p->v.d);
			if (strtod(num, NULL) == p->v.d)
				break;
		}
		return ecw_buf_adds(out, num);
	case ECW_EDM_BINARY: break;
	}
	return ecw_error_set(ECW_EINVALID, "property '%s' (%s) has no text form for a key or filter", p->name,
			     ecw_entity_edm_name(p->type));
}

/* A formatter's output for the value v (rendered text) of prop (NULL for a
 * key, which is a String) or for the time now_ticks (part->now). */
static int format_value(struct ecw_buf *out, const struct part *p, const struct ecw_prop *prop,
			const struct ecw_buf *v, int64_t now_ticks)
{
	static const char hex[] = "0123456789abcdef";
	struct ecw_prop key;
	int64_t ticks = 0, secs;
	int y, m, d, err;

	if (p->fmt == FMT_HASH4) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int mdlen = 0;
		if (!EVP_Digest(v->ptr ? v->ptr : "", v->len, md, &mdlen, EVP_sha256(), NULL) || mdlen < 2)
			return ecw_error_set(ECW_ERROR, "SHA-256 failed");
		char h[5] = {hex[md[0] >> 4], hex[md[0] & 15], hex[md[1] >> 4], hex[md[1] & 15], '\0'};
		return ecw_buf_adds(out, h);
	}
	if (p->now) {
		ticks = now_ticks;
	} else {
		if (!prop) {
			memset(&key, 0, sizeof(key));
			key.name = p->text;
			key.type = ECW_EDM_STRING;
			key.v.s = ecw_buf_cstr(v);
			key.len = v->len;
			prop = &key;
		}
		if ((err = prop_ticks(&ticks, prop,
				      p->fmt == FMT_UNIX           ? "unix"
				      : p->fmt == FMT_DATE_INT     ? "date_int"
				      : p->fmt == FMT_DATE_PATTERN ? p->pattern
								   : "inverted_ticks")) < 0)
			return err;
	}
	switch (p->fmt) {
	case FMT_INVERTED_TICKS: return ecw_buf_printf(out, "%019" PRId64, ECW_TICKS_MAX - ticks);
	case FMT_UNIX:
		secs = ticks >= ECW_TICKS_UNIX_EPOCH ? (ticks - ECW_TICKS_UNIX_EPOCH) / ECW_TICKS_PER_SECOND
						     : -1;
		/* Ten digits, so that text order is time order: 1970..2286. */
		if (secs < 0 || secs > 9999999999LL)
			return ecw_error_set(ECW_EINVALID,
					     "%s '%s' is outside what :unix holds (10 digits: 1970-01-01 to "
					     "2286-11-20)",
					     p->now ? "the clock" : "property", p->text);
		return ecw_buf_printf(out, "%010" PRId64, secs);
	case FMT_DATE_INT:
		ecw_clock_civil_from_days(ticks / TICKS_PER_DAY - 719162, &y, &m, &d);
		return ecw_buf_printf(out, "%04d%02d%02d", y, m, d);
	case FMT_DATE_PATTERN: return format_date_pattern(out, p->pattern, ticks);
	default: return ecw_error_set(ECW_ERROR, "template: unknown formatter");
	}
}

/* ---- OData literals ---------------------------------------------------------------------- */

/* n bytes of s with every ' doubled: the inside of a '...' literal. */
static int add_doubled(struct ecw_buf *out, const char *s, size_t n)
{
	int err = 0;

	for (size_t k = 0; k < n && err == 0; k++)
		err = s[k] == '\'' ? ecw_buf_adds(out, "''") : ecw_buf_addc(out, s[k]);
	return err;
}

static int add_string_literal(struct ecw_buf *out, const char *s, size_t n)
{
	int err;

	if ((err = ecw_buf_addc(out, '\'')) < 0 || (err = add_doubled(out, s, n)) < 0)
		return err;
	return ecw_buf_addc(out, '\'');
}

/* d (finite) as a Double literal both the service and Azurite read as one:
 * the shortest digits that read back as d, written out positionally with a
 * '.' (Azurite's lexer knows no exponent; an integral 5 without ".0" would
 * be an Int32). At most 1 + 309 + 2 characters (DBL_MAX) or 2 + 324
 * (DBL_TRUE_MIN). */
static int double_literal(struct ecw_buf *out, double d)
{
	char sci[40], digits[24];
	size_t nd = 0;
	int exp10 = 0, err = 0;

	for (int prec = 0; prec <= 16; prec++) {
		snprintf(sci, sizeof(sci), "%.*e", prec, d);
		if (strtod(sci, NULL) == d)
			break;
	}
	/* "-d.ddde+XX": the digits, whatever the locale's decimal point. */
	const char *e = strchr(sci, 'e');
	if (!e)
		return ecw_error_set(ECW_ERROR, "template: %%e gave no exponent");
	for (const char *c = sci; c < e && nd < sizeof(digits); c++)
		if (*c >= '0' && *c <= '9')
			digits[nd++] = *c;
	exp10 = (int)strtol(e + 1, NULL, 10);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	/* The value is 0.DIGITS x 10^point. */
	int point = exp10 + 1;
	if (sci[0] == '-')
		err = ecw_buf_addc(out, '-');
	if (point <= 0) {
		if (err == 0)
			err = ecw_buf_adds(out, "0.");
		for (int k = 0; k < -point && err == 0; k++)
			err = ecw_buf_addc(out, '0');
		return err < 0 ? err : ecw_buf_add(out, digits, nd);
	}
	for (int k = 0; k < point && err == 0; k++)
		err = ecw_buf_addc(out, (size_t)k < nd ? digits[k] : '0');
	if (err == 0)
		err = ecw_buf_addc(out, '.');
	if (err == 0)
		err = (size_t)point < nd ? ecw_buf_add(out, digits + point, nd - (size_t)point)
					 : ecw_buf_addc(out, '0');
	return err;
}

/* 8-4-4-4-12 hex digits. */
static bool guid_text(const char *s, size_t n)
{
	static const int group[] = {8, 4, 4, 4, 12};
	size_t at = 0;

	if (n != 36)
		return false;
	for (int g = 0; g < 5; g++) {
		if (g && s[at++] != '-')
			return false;
		for (int k = 0; k < group[g]; k++, at++)
			if (!strchr("0123456789abcdefABCDEF", s[at]) || !s[at])
				return false;
	}
	return true;
}

/* The DateTime as the service writes it: 0 to 7 fractional digits, trailing
 * zeros trimmed, made here from its ticks rather than copied. */
static int datetime_literal(struct ecw_buf *out, const struct ecw_prop *p)
{
	char iso[ECW_ISO_TICKS_SIZE];
	int64_t ticks;
	size_t end = 27; /* the 'Z' */
	int err;

	if (!iso_to_ticks(&ticks, p->v.s, p->len))
		return ecw_error_set(ECW_EINVALID, "property '%s' (DateTime) is not an ISO-8601 UTC time",
				     p->name);
	if ((err = ecw_template_ticks_to_iso(iso, ticks)) < 0)
		return err;
	while (iso[end - 1] == '0')
		end--;
	if (iso[end - 1] == '.')
		end--;
	if ((err = ecw_buf_adds(out, "datetime'")) < 0 || (err = ecw_buf_add(out, iso, end)) < 0)
		return err;
	return ecw_buf_adds(out, "Z'");
}

static int binary_literal(struct ecw_buf *out, const struct ecw_prop *p)
{
	static const char hex[] = "0123456789abcdef";
	int err = ecw_buf_adds(out, "X'");

	for (size_t k = 0; k < p->len && err == 0; k++) {
		unsigned char b = p->v.bin[k];
		if ((err = ecw_buf_addc(out, hex[b >> 4])) == 0)
			err = ecw_buf_addc(out, hex[b & 15]);
	}
	return err < 0 ? err : ecw_buf_addc(out, '\'');
}

/* A property as one OData literal of its EDM type. Only a string's text is
 * copied (quoted, ' doubled); every other literal is written by this code
 * from the value, so none can hold a space, a quote or a parenthesis that
 * would end it early. */
static int typed_literal(struct ecw_buf *out, const struct ecw_prop *p)
{
	switch (p->type) {
	case ECW_EDM_STRING: return add_string_literal(out, p->v.s, p->len);
	case ECW_EDM_INT32: return ecw_buf_printf(out, "%" PRId32, p->v.i32);
	case ECW_EDM_INT64: return ecw_buf_printf(out, "%" PRId64 "L", p->v.i64);
	case ECW_EDM_BOOLEAN: return ecw_buf_adds(out, p->v.b ? "true" : "false");
	case ECW_EDM_DOUBLE:
		if (!isfinite(p->v.d))
			return ecw_error_set(
				ECW_EINVALID,
				"property '%s' (Double) is NaN or infinite: a filter has no literal "
				"for it",
				p->name);
		return double_literal(out, p->v.d);
	case ECW_EDM_GUID:
		if (!guid_text(p->v.s, p->len))
			return ecw_error_set(ECW_EINVALID, "property '%s' (Guid) is not a GUID", p->name);
		return ecw_buf_printf(out, "guid'%.36s'", p->v.s);
	case ECW_EDM_DATETIME: return datetime_literal(out, p);
	case ECW_EDM_BINARY: return binary_literal(out, p);
	}
	return ecw_error_set(ECW_EINVALID, "property '%s': unknown type", p->name);
}

/* ---- rendering ---------------------------------------------------------------------------- */

/* The property a field names, NULL for the keys and {now:...}. */
static int field_prop(const struct ecw_prop **out, const struct ecw_template *t, const struct part *p,
		      const struct ecw_entity *e)
{
	*out = NULL;
	if (p->now || strcmp(p->text, "PartitionKey") == 0 || strcmp(p->text, "RowKey") == 0)
		return 0;
	if (!(*out = ecw_entity_get(e, p->text)))
		return ecw_error_set(ECW_EINVALID, "template '%s': the source entity has no property '%s'",
				     t->source, p->text);
	return 0;
}

/* A field's text: the value, through its formatter, padded. */
static int field_text(struct ecw_buf *v, struct ecw_buf *f, const struct part *p, const struct ecw_prop *prop,
		      const struct ecw_entity *e, int64_t now_ticks)
{
	int err = 0;

	if (p->now)
		; /* the clock: no value */
	else if (prop)
		err = value_text(v, prop);
	else
		err = ecw_buf_adds(v, strcmp(p->text, "PartitionKey") == 0 ? ecw_entity_pk(e)
									   : ecw_entity_rk(e));
	if (err == 0 && p->fmt != FMT_NONE && p->fmt != FMT_PAD) {
		ecw_buf_reset(f);
		if ((err = format_value(f, p, prop, v, now_ticks)) < 0)
			return err;
		ecw_buf_reset(v);
		err = ecw_buf_add(v, f->ptr, f->len);
	}
	if (err < 0 || !p->fill)
		return err;
	/* Pad to width counting characters, not bytes. */
	size_t chars = 0;
	for (size_t k = 0; k < v->len; k++)
		chars += ((unsigned char)v->ptr[k] & 0xC0) != 0x80;
	ecw_buf_reset(f);
	if (!p->left)
		err = ecw_buf_add(f, v->ptr, v->len);
	for (size_t k = chars; k < (size_t)p->width && err == 0; k++)
		err = ecw_buf_addc(f, p->fill);
	if (err == 0 && p->left)
		err = ecw_buf_add(f, v->ptr, v->len);
	ecw_buf_reset(v);
	return err < 0 ? err : ecw_buf_add(v, f->ptr, f->len);
}

int ecw_template_render(struct ecw_buf *out, const struct ecw_template *t, const struct ecw_entity *e,
			enum ecw_template_mode mode)
{
	struct ecw_buf v, f;
	int64_t now_ticks = 0;
	int err = 0;

	if (mode == ECW_TEMPLATE_ODATA && !t->filter)
		return ecw_error_set(ECW_EINVALID, "template '%s' was not compiled as a filter", t->source);
	ecw_buf_init(&v, 0);
	ecw_buf_init(&f, 0);
	/* One reading of the clock per rendering: two {now:...} agree. */
	for (size_t i = 0; i < t->n; i++)
		if (t->parts[i].now) {
			now_ticks = ecw_clock_wall_ms() * 10000 + ECW_TICKS_UNIX_EPOCH;
			break;
		}
	for (size_t i = 0; i < t->n && err == 0; i++) {
		const struct part *p = &t->parts[i];
		const struct ecw_prop *prop = NULL;
		if (!p->field) {
			err = ecw_buf_adds(out, p->text);
			continue;
		}
		if ((err = field_prop(&prop, t, p, e)) < 0)
			break;
		if (mode == ECW_TEMPLATE_ODATA && p->operand && p->fmt == FMT_NONE && prop) {
			err = typed_literal(out, prop);
			continue;
		}
		ecw_buf_reset(&v);
		if ((err = field_text(&v, &f, p, prop, e, now_ticks)) < 0)
			break;
		if (mode == ECW_TEMPLATE_PLAIN)
			err = ecw_buf_add(out, v.ptr, v.len);
		else if (p->operand) /* a key, or a formatted or padded value: a string */
			err = add_string_literal(out, v.ptr, v.len);
		else
			err = add_doubled(out, v.ptr, v.len);
	}
	ecw_buf_dispose(&v);
	ecw_buf_dispose(&f);
	return err;
}

/* ---- reading a key back into a template's parts (the export audit) ---------------------- */

static bool all_digits(const char *s, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (s[k] < '0' || s[k] > '9')
			return false;
	return true;
}

/* The length of the text a fixed-width part renders at s (n bytes left),
 * checked character by character, or 0 when s holds no such text; *fixed
 * false for a part of any length (a plain or padded value). */
static size_t fixed_text(const struct part *p, const char *s, size_t n, bool *fixed)
{
	size_t w = 0;
	int which;

	*fixed = true;
	switch (p->fmt) {
	case FMT_UNIX: w = 10; break;
	case FMT_DATE_INT: w = 8; break;
	case FMT_INVERTED_TICKS: w = 19; break;
	case FMT_HASH4:
		if (n < 4)
			return 0;
		for (size_t k = 0; k < 4; k++)
			if (!strchr("0123456789abcdef", s[k]) || !s[k])
				return 0;
		return 4;
	case FMT_DATE_PATTERN:
		for (size_t i = 0, pn = strlen(p->pattern); i < pn;) {
			size_t len = date_token_at(p->pattern + i, pn - i, &which);
			if (len) {
				if (w + (size_t)date_tokens[which].digits > n ||
				    !all_digits(s + w, (size_t)date_tokens[which].digits))
					return 0;
				w += (size_t)date_tokens[which].digits;
				i += len;
			} else {
				if (w >= n || s[w] != p->pattern[i])
					return 0;
				w++;
				i++;
			}
		}
		return w;
	default: *fixed = false; return 0;
	}
	return w <= n && all_digits(s, w) ? w : 0;
}

struct split {
	const struct ecw_template *t;
	const char *s;
	size_t len;
	size_t *spans, *tmp;
	long steps; /* left of the budget */
	int found;  /* splits found, 2 meaning "more than one" */
};

static void split_at(struct split *sp, size_t i, size_t at)
{
	const struct part *p;
	bool fixed;
	size_t w;

	if (sp->found > 1)
		return;
	if (--sp->steps < 0) {
		sp->found = 2; /* a key that makes the search this long is ambiguous enough */
		return;
	}
	if (i == sp->t->n) {
		if (at == sp->len && ++sp->found == 1)
			memcpy(sp->spans, sp->tmp, 2 * sp->t->n * sizeof(*sp->spans));
		return;
	}
	p = &sp->t->parts[i];
	sp->tmp[2 * i] = at;
	if (!p->field) {
		w = strlen(p->text);
		if (w <= sp->len - at && memcmp(sp->s + at, p->text, w) == 0) {
			sp->tmp[2 * i + 1] = w;
			split_at(sp, i + 1, at + w);
		}
		return;
	}
	w = fixed_text(p, sp->s + at, sp->len - at, &fixed);
	if (fixed) {
		if (w > 0) {
			sp->tmp[2 * i + 1] = w;
			split_at(sp, i + 1, at + w);
		}
		return;
	}
	for (w = p->fmt == FMT_PAD ? (size_t)p->width : 0; at + w <= sp->len && sp->found < 2; w++) {
		sp->tmp[2 * i + 1] = w;
		split_at(sp, i + 1, at + w);
	}
}

int ecw_template_split(size_t *spans, const struct ecw_template *t, const char *s)
{
	size_t *tmp = calloc(2 * t->n + 1, sizeof(*tmp));
	struct split sp = {
		.t = t, .s = s, .len = strlen(s), .spans = spans, .steps = ECW_TEMPLATE_SPLIT_STEPS};

	if (!tmp)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	sp.tmp = tmp;
	split_at(&sp, 0, 0);
	free(tmp);
	return sp.found;
}

unsigned ecw_template_part_date_fields(const struct ecw_template *t, size_t i)
{
	const struct part *p = &t->parts[i];
	unsigned has = 0;
	int which;

	if (!p->field || p->fill)
		return 0;
	switch (p->fmt) {
	case FMT_UNIX:
	case FMT_INVERTED_TICKS: return 0x3f;
	case FMT_DATE_INT: return 0x7;
	case FMT_DATE_PATTERN:
		for (size_t k = 0, pn = strlen(p->pattern); k < pn;) {
			size_t len = date_token_at(p->pattern + k, pn - k, &which);
			has |= len ? 1u << which : 0;
			k += len ? len : 1;
		}
		return has;
	default: return 0;
	}
}

int ecw_template_part_time(int64_t *out_s, const struct ecw_template *t, size_t i, const char *text,
			   size_t len)
{
	const struct part *p = &t->parts[i];
	int v[6] = {1970, 1, 1, 0, 0, 0}, which;
	bool fixed;
	int64_t n = 0;

	*out_s = 0;
	if (!ecw_template_part_date_fields(t, i) || fixed_text(p, text, len, &fixed) != len)
		return ecw_error_set(ECW_EINVALID, "not a time as {%s} writes it", p->text);
	if (p->fmt == FMT_UNIX || p->fmt == FMT_INVERTED_TICKS) {
		for (size_t k = 0; k < len; k++) {
			if (n > (ECW_TICKS_MAX - (text[k] - '0')) / 10)
				return ecw_error_set(ECW_EINVALID, "%.*s: past DateTime.MaxValue", (int)len,
						     text);
			n = n * 10 + (text[k] - '0');
		}
		if (p->fmt == FMT_INVERTED_TICKS) {
			n = ECW_TICKS_MAX - n - ECW_TICKS_UNIX_EPOCH;
			n = n >= 0 ? n / ECW_TICKS_PER_SECOND
				   : -((-n + ECW_TICKS_PER_SECOND - 1) / ECW_TICKS_PER_SECOND);
		}
		*out_s = n;
		return 0;
	}
	if (p->fmt == FMT_DATE_INT) {
		v[0] = ecw_clock_digits(text, 4);
		v[1] = ecw_clock_digits(text + 4, 2);
		v[2] = ecw_clock_digits(text + 6, 2);
	} else {
		for (size_t k = 0, at = 0, pn = strlen(p->pattern); k < pn;) {
			size_t tl = date_token_at(p->pattern + k, pn - k, &which);
			if (!tl) {
				k++;
				at++;
				continue;
			}
			v[which] = ecw_clock_digits(text + at, date_tokens[which].digits);
			at += (size_t)date_tokens[which].digits;
			k += tl;
		}
	}
	if (!ecw_template_civil_date_valid(v[0], v[1], v[2]) || v[3] > 23 || v[4] > 59 || v[5] > 59)
		return ecw_error_set(ECW_EINVALID, "not a date and time");
	*out_s = ecw_clock_days_from_civil(v[0], v[1], v[2]) * 86400 + v[3] * 3600 + v[4] * 60 + v[5];
	return 0;
}
