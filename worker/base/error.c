/* SPDX-License-Identifier: MIT */
/* error.c - the per-thread last error (see ecw_err.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ecw_err.h"

static _Thread_local struct ecw_error last;

const struct ecw_error *ecw_error_last(void)
{
	return &last;
}

static void copy_field(char *dst, size_t cap, const char *src)
{
	if (!src)
		src = "";
	snprintf(dst, cap, "%s", src);
}

/* Messages are one line, safe to print on a terminal: a newline from a
 * service body would split a log line, and a control character (ESC, a C1
 * control such as CSI) from a service's answer or a message's key would
 * reach the operator's terminal through every command that prints an error.
 * Each C0 control and DEL becomes a space, each C1 control (U+0080..U+009F,
 * two bytes in UTF-8) two spaces, and a lone byte 0x80..0x9F after ASCII (an
 * 8-bit C1 control) a space, so the length stays the same. */
static void flatten(char *s)
{
	unsigned char *p = (unsigned char *)s, prev = 0;

	for (; *p; prev = *p++) {
		if (*p < 0x20 || *p == 0x7f)
			*p = ' ';
		else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			p[0] = p[1] = ' ';
		else if (*p >= 0x80 && *p <= 0x9f && prev < 0x80)
			*p = ' '; /* a lone 8-bit C1 control, not inside a UTF-8 sequence */
	}
}

int ecw_error_set(int code, const char *fmt, ...)
{
	va_list ap;

	char msg[sizeof(last.message)];

	/* Format first: the arguments may point into `last` itself (callers
	 * rewrap the last error's message). */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	last.code = code;
	last.http_status = 0;
	last.service_code[0] = '\0';
	last.request_id[0] = '\0';
	last.table[0] = '\0';
	memcpy(last.message, msg, sizeof(msg));
	flatten(last.message);
	return code;
}

int ecw_error_set_http(int code, int http_status, const char *service_code, const char *request_id,
		       const char *fmt, ...)
{
	va_list ap;

	char msg[sizeof(last.message)], sc[sizeof(last.service_code)], rid[sizeof(last.request_id)];

	/* As above: every argument may point into `last`. */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	copy_field(sc, sizeof(sc), service_code);
	copy_field(rid, sizeof(rid), request_id);
	flatten(sc);
	flatten(rid);
	last.code = code;
	last.http_status = http_status;
	memcpy(last.service_code, sc, sizeof(sc));
	memcpy(last.request_id, rid, sizeof(rid));
	last.table[0] = '\0';
	memcpy(last.message, msg, sizeof(msg));
	flatten(last.message);
	return code;
}

void ecw_error_clear(void)
{
	memset(&last, 0, sizeof(last));
}

void ecw_error_set_table(const char *table, size_t len)
{
	if (last.code != ECW_ENOTABLE && last.code != ECW_ENOCONTAINER)
		return;
	if (len >= sizeof(last.table))
		len = sizeof(last.table) - 1;
	memcpy(last.table, table, len);
	last.table[len] = '\0';
	flatten(last.table);
}

const char *ecw_error_name(int code)
{
	switch (code) {
	case ECW_OK: return "ECW_OK";
	case ECW_ERROR: return "ECW_ERROR";
	case ECW_ENOMEM: return "ECW_ENOMEM";
	case ECW_EINVALID: return "ECW_EINVALID";
	case ECW_ENOTFOUND: return "ECW_ENOTFOUND";
	case ECW_ECONFLICT: return "ECW_ECONFLICT";
	case ECW_EPRECONDITION: return "ECW_EPRECONDITION";
	case ECW_EAUTH: return "ECW_EAUTH";
	case ECW_EBUSY: return "ECW_EBUSY";
	case ECW_ETIMEOUT: return "ECW_ETIMEOUT";
	case ECW_ETRANSIENT: return "ECW_ETRANSIENT";
	case ECW_ETOOLARGE: return "ECW_ETOOLARGE";
	case ECW_ENOTABLE: return "ECW_ENOTABLE";
	case ECW_ECANCELED: return "ECW_ECANCELED";
	case ECW_EBLOBNOTFOUND: return "ECW_EBLOBNOTFOUND";
	case ECW_ENOCONTAINER: return "ECW_ENOCONTAINER";
	case ECW_ELATER: return "ECW_ELATER";
	}
	return "ECW_UNKNOWN";
}

bool ecw_error_is_transient(int code)
{
	return code == ECW_EBUSY || code == ECW_ETIMEOUT || code == ECW_ETRANSIENT;
}

bool ecw_error_is_absent(int code)
{
	return code == ECW_ENOTFOUND || code == ECW_ENOTABLE || code == ECW_EBLOBNOTFOUND ||
	       code == ECW_ENOCONTAINER;
}
