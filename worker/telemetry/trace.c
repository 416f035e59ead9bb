/* SPDX-License-Identifier: MIT */
/* trace.c - W3C traceparent and the span ids of a run (see telemetry.h). */
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "ecw_clock.h"
#include "telemetry.h"

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* uppercase too: the spec allows lowercase only */
}

/* 2n lowercase hex digits at s into n bytes; false on any other character. */
static bool hex_bytes(uint8_t *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int ecw_trace_parent_parse(struct ecw_trace_ctx *out, const char *text, size_t len)
{
	uint8_t version;

	memset(out, 0, sizeof(*out));
	if (len < 2 || !hex_bytes(&version, text, 1))
		return ecw_error_set(ECW_EINVALID,
				     "traceparent: the version is not two lowercase hex digits");
	if (version == 0xff)
		return ecw_error_set(ECW_EINVALID, "traceparent: version ff is invalid");
	if (version == 0 ? len != ECW_TRACEPARENT_LEN
			 : len < ECW_TRACEPARENT_LEN ||
				   (len > ECW_TRACEPARENT_LEN && text[ECW_TRACEPARENT_LEN] != '-'))
		return ecw_error_set(ECW_EINVALID, "traceparent: %zu characters, not %d", len,
				     ECW_TRACEPARENT_LEN);
	if (text[2] != '-' || text[35] != '-' || text[52] != '-')
		return ecw_error_set(ECW_EINVALID, "traceparent: the fields are not separated by '-'");
	if (!hex_bytes(out->trace_id, text + 3, 16) || !hex_bytes(out->span_id, text + 36, 8) ||
	    !hex_bytes(&out->flags, text + 53, 1)) {
		memset(out, 0, sizeof(*out));
		return ecw_error_set(ECW_EINVALID, "traceparent: a field is not lowercase hex");
	}
	if (all_zero(out->trace_id, 16) || all_zero(out->span_id, 8)) {
		bool trace = all_zero(out->trace_id, 16);
		memset(out, 0, sizeof(*out));
		return ecw_error_set(ECW_EINVALID, "traceparent: the %s is all zeros",
				     trace ? "trace-id" : "parent-id");
	}
	return 0;
}

void ecw_trace_hex(char *out, const uint8_t *bytes, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * n] = '\0';
}

void ecw_trace_parent_format(char out[ECW_TRACEPARENT_LEN + 1], const struct ecw_trace_ctx *ctx)
{
	memcpy(out, "00-", 3);
	ecw_trace_hex(out + 3, ctx->trace_id, 16);
	out[35] = '-';
	ecw_trace_hex(out + 36, ctx->span_id, 8);
	out[52] = '-';
	ecw_trace_hex(out + 53, &ctx->flags, 1);
}

void ecw_trace_child_context(struct ecw_trace_ctx *out, const struct ecw_span_ids *span)
{
	memcpy(out->trace_id, span->trace_id, sizeof(out->trace_id));
	memcpy(out->span_id, span->span_id, sizeof(out->span_id));
	out->flags = span->flags;
}

void ecw_trace_random(uint8_t *out, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = getrandom(out + got, n - got, GRND_NONBLOCK);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	/* Early boot without entropy: ids need to be unique, not secret. */
	for (; got < n; got++)
		out[got] = (uint8_t)(ecw_clock_random_u32() ^ (uint32_t)ecw_clock_now_ms());
	if (all_zero(out, n))
		out[n - 1] = 1;
}

/* A GUID ("8-4-4-4-12" hex digits, either case) as 16 bytes. */
static bool guid_bytes(uint8_t out[16], const char *id)
{
	char hex[32];
	size_t k = 0;

	if (!id || strlen(id) != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		char c = id[i];
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				return false;
			continue;
		}
		hex[k++] = c >= 'A' && c <= 'F' ? (char)(c - 'A' + 'a') : c;
	}
	return hex_bytes(out, hex, 16) && !all_zero(out, 16);
}

void ecw_trace_span_start(struct ecw_span_ids *out, const struct ecw_trace_ctx *parent,
			  const char *message_id)
{
	memset(out, 0, sizeof(*out));
	if (parent) {
		memcpy(out->trace_id, parent->trace_id, sizeof(out->trace_id));
		memcpy(out->parent_id, parent->span_id, sizeof(out->parent_id));
		out->has_parent = true;
		out->flags = parent->flags & ECW_TRACE_FLAG_SAMPLED; /* level 1 defines no other bit */
	} else {
		if (!guid_bytes(out->trace_id, message_id))
			ecw_trace_random(out->trace_id, sizeof(out->trace_id));
		out->flags = ECW_TRACE_FLAG_SAMPLED;
	}
	do
		ecw_trace_random(out->span_id, sizeof(out->span_id));
	while (out->has_parent && memcmp(out->span_id, out->parent_id, sizeof(out->span_id)) == 0);
	ecw_trace_hex(out->trace_hex, out->trace_id, sizeof(out->trace_id));
	ecw_trace_hex(out->span_hex, out->span_id, sizeof(out->span_id));
}
