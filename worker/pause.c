/* SPDX-License-Identifier: MIT */
/* pause.c - a queue's fleet-wide pause in its metadata (pause.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecw_codec.h"
#include "pause.h"

#define META_AT "ecworkerpausedat"
#define META_BY "ecworkerpausedby"
#define META_REASON "ecworkerpausereason"

static bool by_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '_' || c == '@' || c == '-';
}

static bool unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_' || c == '.' || c == '~';
}

static int hex_value(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
				      : -1;
}

/* Percent-decodes s into out (n bytes with the NUL); false when s is not
 * what ecw_pause_to_meta writes or does not decode to UTF-8 that fits. */
static bool reason_decode(char *out, size_t n, const char *s)
{
	size_t k = 0;

	for (; *s; s++) {
		int hi, lo;
		char c = *s;

		if (*s == '%') {
			if ((hi = hex_value(s[1])) < 0 || (lo = hex_value(s[2])) < 0)
				return false;
			c = (char)(hi * 16 + lo);
			s += 2;
		} else if (!unreserved((unsigned char)*s))
			return false;
		if (k + 1 >= n || c == '\0')
			return false;
		out[k++] = c;
	}
	out[k] = '\0';
	return ecw_utf8_valid(out, k) != 0;
}

static bool at_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= sizeof(((struct ecw_pause *)0)->at))
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || *s == '-' || *s == ':' || *s == 'T' || *s == 'Z'))
			return false;
	return true;
}

void ecw_pause_from_meta(struct ecw_pause *out, const struct ecw_queue_meta *m)
{
	const char *at = ecw_queue_meta_value(m, META_AT), *by = ecw_queue_meta_value(m, META_BY),
		   *reason = ecw_queue_meta_value(m, META_REASON);

	memset(out, 0, sizeof(*out));
	if (!at)
		return;
	out->paused = true;
	if (at_ok(at))
		snprintf(out->at, sizeof(out->at), "%s", at);
	if (by && strlen(by) <= ECW_PAUSE_BY_MAX) {
		size_t i;
		for (i = 0; by[i] && by_char(by[i]); i++)
			;
		if (!by[i])
			snprintf(out->by, sizeof(out->by), "%s", by);
	}
	if (reason && !reason_decode(out->reason, sizeof(out->reason), reason))
		out->reason[0] = '\0';
}

int ecw_pause_to_meta(struct ecw_queue_meta *m, const struct ecw_pause *p)
{
	char enc[3 * ECW_PAUSE_REASON_MAX + 1];
	size_t k = 0, n = strlen(p->reason);
	int err;

	if (!p->paused) { /* removing a name cannot fail */
		(void)!ecw_queue_meta_put(m, META_AT, NULL);
		(void)!ecw_queue_meta_put(m, META_BY, NULL);
		(void)!ecw_queue_meta_put(m, META_REASON, NULL);
		return 0;
	}
	if (n > ECW_PAUSE_REASON_MAX || !ecw_utf8_valid(p->reason, n))
		return ecw_error_set(ECW_EINVALID, "the reason must be UTF-8 of at most %d bytes",
				     ECW_PAUSE_REASON_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p->reason[i];
		if (unreserved(c))
			enc[k++] = (char)c;
		else
			k += (size_t)snprintf(enc + k, sizeof(enc) - k, "%%%02X", c);
	}
	enc[k] = '\0';
	if ((err = ecw_queue_meta_put(m, META_AT, p->at)) < 0 ||
	    (err = ecw_queue_meta_put(m, META_BY, p->by)) < 0 ||
	    (err = (k ? ecw_queue_meta_put(m, META_REASON, enc) : ecw_queue_meta_put(m, META_REASON, NULL))) <
		    0)
		return err;
	return 0;
}

void ecw_pause_whoami(char *out, size_t n)
{
	const char *user = getenv("USER");
	char host[256] = "";
	size_t k = 0;
	char who[400];

	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	snprintf(who, sizeof(who), "%.128s@%.255s", user && *user ? user : "unknown",
		 host[0] ? host : "unknown");
	/* Only what `by` may hold: anything else becomes '_'. */
	for (size_t i = 0; who[i] && k + 1 < n && k < ECW_PAUSE_BY_MAX; i++)
		out[k++] = by_char(who[i]) ? who[i] : '_';
	if (n)
		out[k < n ? k : n - 1] = '\0';
}
