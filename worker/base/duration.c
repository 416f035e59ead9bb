/* SPDX-License-Identifier: MIT */
/* duration.c - "250ms", "2s", "5m", "1h" (see ecw_duration.h). */
#include <string.h>

#include "ecw_duration.h"

#define SEC ((int64_t)1000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)

int ecw_duration_parse(int64_t *out_ms, const char *s, bool days)
{
	int64_t n = 0, unit;
	const char *p = s;

	if (strcmp(s, "0") == 0) {
		*out_ms = 0;
		return 0;
	}
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (INT64_MAX - 9) / 10)
			return -2;
		n = n * 10 + (*p - '0');
	}
	if (strcmp(p, "ms") == 0)
		unit = 1;
	else if (strcmp(p, "s") == 0)
		unit = SEC;
	else if (strcmp(p, "m") == 0)
		unit = MIN;
	else if (strcmp(p, "h") == 0)
		unit = HOUR;
	else if (days && strcmp(p, "d") == 0)
		unit = 24 * HOUR;
	else if (days && strcmp(p, "w") == 0)
		unit = 7 * 24 * HOUR;
	else
		return -1;
	if (n > INT64_MAX / unit)
		return -2;
	*out_ms = n * unit;
	return 0;
}
