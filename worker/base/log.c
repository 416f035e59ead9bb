/* SPDX-License-Identifier: MIT */
/* log.c - structured log lines (see ecw_log.h).
 *
 * A line is built in a heap buffer owned by the ecw_log_line, then, at
 * ecw_log_end, copied once more while every registered secret (and every
 * JWT, and every sig= / AccountKey= / client_assertion= value) is replaced
 * by [REDACTED], and handed to one write(2). The writes share a lock. A line
 * of up to PIPE_BUF (4 KiB) to a pipe, a regular file or a Unix stream socket
 * (journald's stdout, a parent's socketpair) takes it shared, so such lines
 * are written side by side: POSIX makes a pipe write that size atomic (all
 * or nothing, also non-blocking), Linux serializes the writes of one
 * process's threads to a file, and queues a write that size to a Unix stream
 * socket as one buffer. A longer line, or one to anything else (a terminal,
 * a TCP socket), takes it alone: a pipe write of more than PIPE_BUF may be
 * split, and another line must not land in between; it also finishes a
 * short write before the next line starts. (An exclusive lock on every line
 * was the most contended lock at concurrency 64: a pipe write wakes its
 * reader while holding it.)
 *
 * A thread may hold its lines for a moment (ecw_log_hold): the runtime does
 * while it concludes a group of messages, so that the group's lines go out
 * in one write instead of one each. Every write wakes the reader (the
 * container runtime, a shell's pipe): the message lines' writes were 15% of
 * the worker's CPU at concurrency 64 (perf, archive bench). Held lines are
 * whole and redacted; they are written, as one write of at most PIPE_BUF
 * bytes (so the shared lock still applies), when the next line would not
 * fit, and at ecw_log_release. A line that is longer, or held to an fd that
 * does not take small lines whole, is written at once as ever.
 *
 * Bounds: the fields of a line stop at LOG_LINE_MAX bytes. A field that would
 * go past it is dropped whole (never cut, so a secret is never half written
 * where redaction could not recognise it) and the line ends with
 * "truncated":true. Strings that are not valid UTF-8 are written with U+FFFD
 * for each bad byte, so every JSON line is valid JSON.
 *
 * Logging leaves errno alone; only a real out-of-memory can touch the
 * thread's last error. */
#define _GNU_SOURCE /* a writer-preferring rwlock initializer */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ecw_buf.h"
#include "ecw_clock.h"
#include "ecw_codec.h"
#include "ecw_log.h"

#define LOG_LINE_MAX ((size_t)64 * 1024)
#define REDACTED "[REDACTED]"
#define SECRET_MIN_LEN 8
/* Each secret is kept as written and as it appears escaped in a JSON and in a
 * text line (when those differ): at most three patterns per secret. */
#define SECRET_PATTERNS_MAX 192

static _Atomic int g_level = ECW_LOG_INFO;
static _Atomic int g_format = ECW_LOG_JSON;
static _Atomic int g_fd = 2;
/* Writers first, so that a long line is not starved by short ones. */
static pthread_rwlock_t g_write_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
/* Whether g_fd takes a line of up to PIPE_BUF in one piece (see the top of
 * the file): 1 or 0, -1 until write_line looks. */
static _Atomic int g_fd_atomic = -1;

struct secret {
	char *s;
	size_t n;
};

/* Sorted longest first, so a secret that contains another is redacted whole. */
static pthread_rwlock_t g_secrets_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct secret g_secrets[SECRET_PATTERNS_MAX];
static size_t g_nsecrets;
/* The bytes a secret starts with (under g_secrets_lock): ecw_log_redact() looks at
 * the secrets only where one of these stands, so a line costs one table
 * lookup a byte rather than a compare with every secret. */
static bool g_secret_first[256];

struct ecw_log_line {
	enum ecw_log_format format;
	bool truncated;
	struct ecw_buf buf;      /* the line so far */
	struct ecw_buf kscratch; /* a key made valid UTF-8 */
	struct ecw_buf vscratch; /* a value (or the event) made valid UTF-8 */
};

/* The thread's trace fields (ecw_log_set_trace): "" when none. */
static _Thread_local char t_trace_id[33];
static _Thread_local char t_span_id[33];

static const char *const level_json[] = {"debug", "info", "warn", "error"};
static const char *const level_text[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void ecw_log_setup(enum ecw_log_level level, enum ecw_log_format format)
{
	atomic_store(&g_level, (int)level);
	atomic_store(&g_format, format == ECW_LOG_TEXT ? ECW_LOG_TEXT : ECW_LOG_JSON);
}

void ecw_log_set_fd(int fd)
{
	atomic_store(&g_fd, fd >= 0 ? fd : 2);
	atomic_store(&g_fd_atomic, -1);
}

void ecw_log_set_trace(const char *trace_id, const char *span_id)
{
	if (!trace_id || !*trace_id || !span_id || !*span_id) {
		t_trace_id[0] = t_span_id[0] = '\0';
		return;
	}
	snprintf(t_trace_id, sizeof(t_trace_id), "%.32s", trace_id);
	snprintf(t_span_id, sizeof(t_span_id), "%.32s", span_id);
}

/* ---- strings ------------------------------------------------------------ */

/* s itself when it is valid UTF-8, else a copy in scratch with U+FFFD for
 * every byte that does not start a valid sequence. NULL when out of memory. */
static const char *clean_utf8(struct ecw_buf *scratch, const char *s, size_t *n)
{
	uint32_t cp;
	size_t i, k, run;

	if (ecw_utf8_valid(s, *n))
		return s;
	ecw_buf_reset(scratch);
	for (i = 0, run = 0; i < *n; i += k) {
		if ((k = ecw_utf8_decode(s + i, *n - i, &cp)) > 0)
			continue;
		if (ecw_buf_add(scratch, s + run, i - run) < 0 || ecw_buf_adds(scratch, "\xEF\xBF\xBD") < 0)
			return NULL;
		k = 1;
		run = i + 1;
	}
	if (ecw_buf_add(scratch, s + run, *n - run) < 0)
		return NULL;
	*n = scratch->len;
	return ecw_buf_cstr(scratch);
}

static bool text_is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

static bool text_needs_quotes(const char *s, size_t n)
{
	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (s[i] == ' ' || s[i] == '"' || s[i] == '=' || text_is_control((unsigned char)s[i]))
			return true;
	return false;
}

/* Inside quotes: \" \\ \n \r \t, other control bytes as \u00XX. */
static size_t text_escaped_len(const char *s, size_t n)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t')
			len += 2;
		else if (text_is_control(c))
			len += 6;
		else
			len += 1;
	}
	return len;
}

static int text_add_escaped(struct ecw_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, run;
	int err = 0;

	for (i = 0, run = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[7] = {'\\', 0};
		size_t elen = 2;

		if (c == '"' || c == '\\')
			esc[1] = (char)c;
		else if (c == '\n')
			esc[1] = 'n';
		else if (c == '\r')
			esc[1] = 'r';
		else if (c == '\t')
			esc[1] = 't';
		else if (text_is_control(c)) {
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			elen = 6;
		} else
			continue;
		if ((err = ecw_buf_add(b, s + run, i - run)) < 0 || (err = ecw_buf_add(b, esc, elen)) < 0)
			goto done;
		run = i + 1;
	}
	err = ecw_buf_add(b, s + run, n - run);
done:
	return err;
}

/* A text value: as is, or quoted and escaped when it holds a space, a quote,
 * '=', a control character, or nothing at all. */
static size_t text_value_len(const char *s, size_t n)
{
	return text_needs_quotes(s, n) ? text_escaped_len(s, n) + 2 : n;
}

static int text_add_value(struct ecw_buf *b, const char *s, size_t n)
{
	int err;

	if (!text_needs_quotes(s, n))
		return ecw_buf_add(b, s, n);
	if ((err = ecw_buf_addc(b, '"')) < 0 || (err = text_add_escaped(b, s, n)) < 0)
		return err;
	return ecw_buf_addc(b, '"');
}

/* Text keys are written bare: bytes that would break key=value become '_'. */
static int text_add_key(struct ecw_buf *b, const char *s, size_t n)
{
	size_t start = b->len;
	int err;

	if (n == 0)
		return ecw_buf_addc(b, '_');
	if ((err = ecw_buf_add(b, s, n)) < 0)
		return err;
	for (size_t i = start; i < b->len; i++)
		if (b->ptr[i] == ' ' || b->ptr[i] == '"' || b->ptr[i] == '=' ||
		    text_is_control((unsigned char)b->ptr[i]))
			b->ptr[i] = '_';
	return 0;
}

/* The shortest %g form that reads back as the same double. */
static void format_double(char *out, size_t cap, double v)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(out, cap, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			break;
	}
}

/* ---- secrets ------------------------------------------------------------ */

static bool secret_known(const char *s, size_t n)
{
	for (size_t i = 0; i < g_nsecrets; i++)
		if (g_secrets[i].n == n && memcmp(g_secrets[i].s, s, n) == 0)
			return true;
	return false;
}

/* Caller holds the write lock. False when the table is full. */
static bool secret_insert(const char *s, size_t n)
{
	size_t at;
	char *copy;

	if (n < SECRET_MIN_LEN || secret_known(s, n))
		return true;
	if (g_nsecrets == SECRET_PATTERNS_MAX || !(copy = malloc(n + 1)))
		return false;
	memcpy(copy, s, n);
	copy[n] = '\0';
	for (at = 0; at < g_nsecrets && g_secrets[at].n >= n; at++)
		;
	memmove(g_secrets + at + 1, g_secrets + at, (g_nsecrets - at) * sizeof(g_secrets[0]));
	g_secrets[at].s = copy;
	g_secrets[at].n = n;
	g_nsecrets++;
	g_secret_first[(unsigned char)copy[0]] = true;
	return true;
}

/* Caller holds the write lock. Removes the pattern s (wiped as it goes) and
 * works out again which bytes start one. */
static void secret_remove(const char *s, size_t n)
{
	for (size_t i = 0; i < g_nsecrets; i++) {
		if (g_secrets[i].n != n || memcmp(g_secrets[i].s, s, n) != 0)
			continue;
		explicit_bzero(g_secrets[i].s, n);
		free(g_secrets[i].s);
		memmove(g_secrets + i, g_secrets + i + 1, (g_nsecrets - i - 1) * sizeof(g_secrets[0]));
		g_nsecrets--;
		memset(g_secret_first, 0, sizeof(g_secret_first));
		for (size_t k = 0; k < g_nsecrets; k++)
			g_secret_first[(unsigned char)g_secrets[k].s[0]] = true;
		return;
	}
}

/* The forms of a secret a line may hold (see SECRET_PATTERNS_MAX): as
 * written (cleaned as a line's text is, into scratch), escaped in JSON (js,
 * without its quotes) and in a text line (text). NULL when it is too short
 * to register or a buffer could not grow (*failed then). */
static const char *secret_forms(size_t *n, bool *failed, struct ecw_buf *scratch, struct ecw_buf *js,
				struct ecw_buf *text, const char *secret)
{
	const char *raw;

	*failed = false;
	if (!secret || (*n = strlen(secret)) < SECRET_MIN_LEN)
		return NULL;
	if (!(raw = clean_utf8(scratch, secret, n)) || ecw_json_quote(js, raw, *n) < 0 ||
	    text_add_escaped(text, raw, *n) < 0) {
		*failed = true;
		return NULL;
	}
	return raw;
}

/* The forms' buffers held a secret. */
static void secret_forms_dispose(struct ecw_buf *scratch, struct ecw_buf *js, struct ecw_buf *text)
{
	struct ecw_buf *bufs[] = {scratch, js, text};

	for (size_t i = 0; i < 3; i++) {
		if (bufs[i]->ptr)
			explicit_bzero(bufs[i]->ptr, bufs[i]->cap);
		ecw_buf_dispose(bufs[i]);
	}
}

void ecw_log_add_secret(const char *secret)
{
	struct ecw_buf scratch, js, text;
	const char *raw;
	size_t n = 0;
	bool failed, ok = true;
	int saved_errno = errno;

	ecw_buf_init(&scratch, 0);
	ecw_buf_init(&js, 0);
	ecw_buf_init(&text, 0);
	if (!(raw = secret_forms(&n, &failed, &scratch, &js, &text, secret))) {
		ok = !failed;
		goto done;
	}
	pthread_rwlock_wrlock(&g_secrets_lock);
	ok = secret_insert(raw, n) && secret_insert(js.ptr + 1, js.len - 2) &&
	     secret_insert(text.ptr, text.len);
	pthread_rwlock_unlock(&g_secrets_lock);
done:
	secret_forms_dispose(&scratch, &js, &text);
	/* Never silent: a secret that cannot be guarded is worth a line. */
	if (!ok)
		ecw_log_msg(ECW_LOG_ERROR, "log.secret_not_registered",
			    "a secret could not be registered for redaction (table full or out of memory)");
	errno = saved_errno;
}

void ecw_log_forget_secret(const char *secret)
{
	struct ecw_buf scratch, js, text;
	const char *raw;
	size_t n = 0;
	bool failed;
	int saved_errno = errno;

	ecw_buf_init(&scratch, 0);
	ecw_buf_init(&js, 0);
	ecw_buf_init(&text, 0);
	if ((raw = secret_forms(&n, &failed, &scratch, &js, &text, secret))) {
		pthread_rwlock_wrlock(&g_secrets_lock);
		secret_remove(raw, n);
		secret_remove(js.ptr + 1, js.len - 2);
		secret_remove(text.ptr, text.len);
		pthread_rwlock_unlock(&g_secrets_lock);
	}
	secret_forms_dispose(&scratch, &js, &text);
	errno = saved_errno;
}

/* Where the value of a "name=" (matched case-insensitively) ends: it runs to
 * the next '&', ';', whitespace, quote or backslash. Stopping at a backslash
 * keeps JSON escapes whole, so the redacted line is still valid JSON. */
static bool value_stop(char c)
{
	return c == '&' || c == ';' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f' || c == '"' || c == '\'' || c == '\\';
}

static const char *const redacted_params[] = {"sig=", "sig%3D", "AccountKey=", "client_assertion="};

static bool b64url_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_';
}

/* The length of a JWT at s (three base64url parts joined by dots, the first
 * a JSON object: "eyJ"), or 0. Access tokens and federated assertions are
 * JWTs, new ones every hour: too many to register one by one. */
static size_t jwt_len(const char *s, size_t n)
{
	size_t j, dots = 0;

	if (n < 3 || memcmp(s, "eyJ", 3) != 0)
		return 0;
	for (j = 0; j < n && (b64url_char(s[j]) || s[j] == '.'); j++)
		dots += s[j] == '.';
	return dots >= 2 ? j : 0;
}

/* The bytes a redacted parameter's name starts with, in either case. */
static bool g_param_first[256];
static pthread_once_t g_param_first_once = PTHREAD_ONCE_INIT;

static void param_first_init(void)
{
	for (size_t k = 0; k < sizeof(redacted_params) / sizeof(redacted_params[0]); k++) {
		unsigned char c = (unsigned char)redacted_params[k][0];

		g_param_first[c | 0x20] = true;
		g_param_first[c & (unsigned char)~0x20] = true;
	}
}

/* Copies s to out with every registered secret, every JWT, and every sig= /
 * sig%3D / AccountKey= / client_assertion= value replaced by [REDACTED].
 * One pass, left to right. A byte that starts no secret, no JWT ('e') and no
 * parameter name is passed over at the cost of a table lookup. */
int ecw_log_redact(struct ecw_buf *out, const char *s, size_t n)
{
	size_t i = 0, run = 0, j, k;
	int err = 0;

	pthread_once(&g_param_first_once, param_first_init);
	pthread_rwlock_rdlock(&g_secrets_lock);
	while (i < n) {
		size_t skip = 0; /* bytes of s replaced */
		size_t keep = 0; /* of those, bytes kept before [REDACTED] */
		unsigned char c = (unsigned char)s[i];

		if (!g_secret_first[c] && c != 'e' && !g_param_first[c]) {
			i++;
			continue;
		}
		for (k = 0; k < g_nsecrets && !skip; k++)
			if (g_secrets[k].n <= n - i && s[i] == g_secrets[k].s[0] &&
			    memcmp(s + i, g_secrets[k].s, g_secrets[k].n) == 0)
				skip = g_secrets[k].n;
		if (!skip && s[i] == 'e' && (i == 0 || !b64url_char(s[i - 1])))
			skip = jwt_len(s + i, n - i);
		for (k = 0; k < sizeof(redacted_params) / sizeof(redacted_params[0]) && !skip; k++) {
			size_t pn;

			/* Every name starts with two letters: a cheap look first. */
			if ((s[i] | 0x20) != (redacted_params[k][0] | 0x20) || i + 1 >= n ||
			    (s[i + 1] | 0x20) != (redacted_params[k][1] | 0x20))
				continue;
			pn = strlen(redacted_params[k]);
			if (pn > n - i || strncasecmp(s + i, redacted_params[k], pn) != 0)
				continue;
			for (j = i + pn; j < n && !value_stop(s[j]); j++)
				;
			if (j > i + pn)
				keep = pn, skip = j - i;
		}
		if (!skip) {
			i++;
			continue;
		}
		if ((err = ecw_buf_add(out, s + run, i + keep - run)) < 0 ||
		    (err = ecw_buf_adds(out, REDACTED)) < 0)
			goto done;
		i += skip;
		run = i;
	}
	err = ecw_buf_add(out, s + run, n - run);
done:
	pthread_rwlock_unlock(&g_secrets_lock);
	return err;
}

/* ---- lines ------------------------------------------------------------- */

/* "2026-08-19T10:00:00.123Z" (24 characters and a NUL): every line has one,
 * so it is put together digit by digit rather than through snprintf. */
static void format_time(char out[25])
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	memcpy(out, "0000-00-00T00:00:00.000Z", 25);
	ecw_clock_put_digits(out, tm.tm_year + 1900, 4);
	ecw_clock_put_digits(out + 5, tm.tm_mon + 1, 2);
	ecw_clock_put_digits(out + 8, tm.tm_mday, 2);
	ecw_clock_put_digits(out + 11, tm.tm_hour, 2);
	ecw_clock_put_digits(out + 14, tm.tm_min, 2);
	ecw_clock_put_digits(out + 17, tm.tm_sec, 2);
	ecw_clock_put_digits(out + 20, (int)(ts.tv_nsec / 1000000), 3);
}

static void line_free(struct ecw_log_line *l)
{
	if (!l)
		return;
	ecw_buf_dispose(&l->buf);
	ecw_buf_dispose(&l->kscratch);
	ecw_buf_dispose(&l->vscratch);
	free(l);
}

struct ecw_log_line *ecw_log_begin(enum ecw_log_level level, const char *event)
{
	struct ecw_log_line *l = NULL;
	const char *ev;
	char when[25];
	size_t n;
	int err = 0, saved_errno = errno;

	if ((int)level < atomic_load_explicit(&g_level, memory_order_relaxed))
		goto done;
	if ((unsigned)level > ECW_LOG_ERROR)
		level = ECW_LOG_ERROR;
	if (!(l = calloc(1, sizeof(*l))))
		goto done;
	l->format = (enum ecw_log_format)atomic_load(&g_format);
	ecw_buf_init(&l->buf, 0);
	ecw_buf_init(&l->kscratch, 0);
	ecw_buf_init(&l->vscratch, 0);
	format_time(when);
	n = strlen(event ? event : "");
	if (!(ev = clean_utf8(&l->vscratch, event ? event : "", &n))) {
		err = ECW_ENOMEM;
		goto done;
	}
	if (l->format == ECW_LOG_JSON) {
		err = ecw_buf_cat(&l->buf, "{\"time\":\"", when, "\",\"level\":\"", level_json[level],
				  "\",\"event\":", NULL);
		if (err == 0)
			err = ecw_json_quote(&l->buf, ev, n);
	} else {
		err = ecw_buf_cat(&l->buf, when, " ", level_text[level], " ", NULL);
		if (err == 0)
			err = text_add_value(&l->buf, ev, n);
	}
done:
	if (l && err < 0) {
		line_free(l);
		l = NULL;
	}
	errno = saved_errno;
	if (l && t_trace_id[0]) {
		ecw_log_str(l, "trace_id", t_trace_id);
		ecw_log_str(l, "span_id", t_span_id);
	}
	return l;
}

/* Appends one field. Strings (is_string) are quoted in JSON and quoted when
 * needed in text; other values are written as given. A field that does not
 * fit, or that meets an out-of-memory, is left out and the line marked. */
static void add_field(struct ecw_log_line *l, const char *key, const char *value, size_t vn, bool is_string)
{
	const char *k, *v = value;
	size_t kn, len, mark = 0;
	int err = 0, saved_errno = errno;

	if (!l || !key)
		goto done;
	mark = l->buf.len;
	kn = strlen(key);
	if (!(k = clean_utf8(&l->kscratch, key, &kn)) ||
	    (is_string && !(v = clean_utf8(&l->vscratch, value, &vn)))) {
		err = ECW_ENOMEM;
		goto done;
	}
	if (l->format == ECW_LOG_JSON) {
		len = 2 + ecw_json_quote_len(k, kn) + (is_string ? ecw_json_quote_len(v, vn) : vn);
	} else {
		len = 2 + (kn ? kn : 1) + (is_string ? text_value_len(v, vn) : vn);
	}
	if (mark + len > LOG_LINE_MAX) {
		err = ECW_ETOOLARGE;
		goto done;
	}
	if (l->format == ECW_LOG_JSON) {
		if ((err = ecw_buf_addc(&l->buf, ',')) == 0 && (err = ecw_json_quote(&l->buf, k, kn)) == 0 &&
		    (err = ecw_buf_addc(&l->buf, ':')) == 0)
			err = is_string ? ecw_json_quote(&l->buf, v, vn) : ecw_buf_add(&l->buf, v, vn);
	} else {
		if ((err = ecw_buf_addc(&l->buf, ' ')) == 0 && (err = text_add_key(&l->buf, k, kn)) == 0 &&
		    (err = ecw_buf_addc(&l->buf, '=')) == 0)
			err = is_string ? text_add_value(&l->buf, v, vn) : ecw_buf_add(&l->buf, v, vn);
	}
done:
	if (err < 0) {
		l->truncated = true;
		if (l->buf.len > mark) {
			l->buf.len = mark;
			l->buf.ptr[mark] = '\0';
		}
	}
	errno = saved_errno;
}

void ecw_log_str(struct ecw_log_line *l, const char *key, const char *value)
{
	if (value)
		add_field(l, key, value, strlen(value), true);
}

void ecw_log_int(struct ecw_log_line *l, const char *key, int64_t value)
{
	char num[ECW_INT_TEXT_MAX];

	if (!l)
		return;
	add_field(l, key, num, ecw_buf_int_text(num, value), false);
}

/* JSON has no NaN or infinity: those are written as the strings "NaN",
 * "+Inf" and "-Inf" (Prometheus' spelling) rather than as invalid JSON. */
void ecw_log_double(struct ecw_log_line *l, const char *key, double value)
{
	char num[40];

	if (!l)
		return;
	if (isnan(value))
		add_field(l, key, "NaN", 3, true);
	else if (isinf(value))
		add_field(l, key, value > 0 ? "+Inf" : "-Inf", 4, true);
	else {
		format_double(num, sizeof(num), value);
		add_field(l, key, num, strlen(num), false);
	}
}

void ecw_log_bool(struct ecw_log_line *l, const char *key, bool value)
{
	add_field(l, key, value ? "true" : "false", value ? 4 : 5, false);
}

static bool fd_takes_small_lines_whole(int fd)
{
	int k = atomic_load_explicit(&g_fd_atomic, memory_order_relaxed);
	struct stat st;

	if (k < 0) {
		int domain = 0, type = 0;
		socklen_t dl = sizeof(domain), tl = sizeof(type);
		k = fstat(fd, &st) == 0 &&
		    (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) ||
		     (S_ISSOCK(st.st_mode) && getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) == 0 &&
		      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && domain == AF_UNIX &&
		      type == SOCK_STREAM));
		atomic_store_explicit(&g_fd_atomic, k, memory_order_relaxed);
	}
	return k == 1;
}

/* See the top of the file for when the write lock is taken. A failed write
 * (a closed or full non-blocking stderr) drops the rest of the line: there
 * is nowhere to report it. */
static void write_line(const char *p, size_t n)
{
	int fd = atomic_load(&g_fd);

	if (n <= PIPE_BUF && fd_takes_small_lines_whole(fd))
		pthread_rwlock_rdlock(&g_write_lock);
	else
		pthread_rwlock_wrlock(&g_write_lock);
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		p += w; /* the rest of a short write (to a file: a full disk) */
		n -= (size_t)w;
	}
	pthread_rwlock_unlock(&g_write_lock);
}

/* Lines the thread holds (ecw_log_hold): whole and redacted, at most
 * PIPE_BUF bytes. Freed at each release, so an exiting thread leaves none. */
static _Thread_local struct ecw_buf t_held;
static _Thread_local int t_holding;

static void write_held(void)
{
	if (t_held.len)
		write_line(t_held.ptr, t_held.len);
	ecw_buf_reset(&t_held);
}

/* Whether the line out was taken into the thread's held lines (false: the
 * caller writes it now). */
static bool hold_line(const struct ecw_buf *out)
{
	if (t_holding == 0)
		return false;
	bool holdable = out->len <= PIPE_BUF && fd_takes_small_lines_whole(atomic_load(&g_fd));
	/* What is held goes first, so the thread's lines stay in order. */
	if (!holdable || t_held.len + out->len > PIPE_BUF)
		write_held();
	if (holdable && ecw_buf_add(&t_held, out->ptr, out->len) == 0)
		return true;
	write_held(); /* out of memory: the held lines, then this one */
	return false;
}

void ecw_log_hold(void)
{
	if (t_holding++ == 0)
		ecw_buf_init(&t_held, PIPE_BUF);
}

void ecw_log_release(void)
{
	if (t_holding == 0 || --t_holding > 0)
		return;
	int saved_errno = errno;
	write_held();
	ecw_buf_dispose(&t_held);
	errno = saved_errno;
}

void ecw_log_end(struct ecw_log_line *l)
{
	struct ecw_buf out;
	int err, saved_errno = errno;

	ecw_buf_init(&out, 0);
	if (!l)
		goto done;
	if (l->format == ECW_LOG_JSON)
		err = ecw_buf_adds(&l->buf, l->truncated ? ",\"truncated\":true}\n" : "}\n");
	else
		err = ecw_buf_adds(&l->buf, l->truncated ? " truncated=true\n" : "\n");
	/* Nothing unredacted is ever written: a line that cannot be finished or
	 * redacted (out of memory) is dropped. */
	if (err < 0 || ecw_log_redact(&out, l->buf.ptr, l->buf.len) < 0)
		goto done;
	if (!hold_line(&out))
		write_line(out.ptr, out.len);
done:
	ecw_buf_dispose(&out);
	line_free(l);
	errno = saved_errno;
}

void ecw_log_msg(enum ecw_log_level level, const char *event, const char *fmt, ...)
{
	struct ecw_log_line *l;
	va_list ap;
	char *msg = NULL;
	int n;

	if (!(l = ecw_log_begin(level, event)))
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n > LOG_LINE_MAX || !(msg = malloc((size_t)n + 1))) {
		l->truncated = true;
		goto done;
	}
	va_start(ap, fmt);
	vsnprintf(msg, (size_t)n + 1, fmt, ap);
	va_end(ap);
	ecw_log_str(l, "msg", msg);
done:
	free(msg);
	ecw_log_end(l);
}
