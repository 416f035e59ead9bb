/* SPDX-License-Identifier: MIT */
/* config_text.h - what test_config.c and test_node.c share: configuration
 * text parsed as FILE_NAME, expecting no error or exactly so many at given
 * positions, and the environment every case starts from. */
#ifndef ECW_TEST_CONFIG_TEXT_H
#define ECW_TEST_CONFIG_TEXT_H

#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"

#define FILE_NAME "t.yaml"

static inline struct ecw_config *parse_ok(const char *text)
{
	return config_parse_ok(text, FILE_NAME);
}

/* Parses text expecting ECW_EINVALID with exactly nerr errors (left in errs). */
static inline void parse_bad(struct ecw_node_errors *errs, const char *text, size_t nerr)
{
	struct ecw_config *cfg = (struct ecw_config *)1;
	int err;

	ecw_node_errors_init(errs);
	err = ecw_config_parse(&cfg, text, strlen(text), FILE_NAME, errs);
	assert_null(cfg);
	if (err != ECW_EINVALID || errs->n != nerr) {
		config_dump(errs);
		fail_msg("parse of \"%s\" = %s with %zu errors, want ECW_EINVALID with %zu", text,
		         ecw_error_name(err), errs->n, nerr);
	}
}

/* errs->lines[i] is at "LINE:COL" and contains needle. */
static inline void error_is(const struct ecw_node_errors *errs, size_t i, const char *pos, const char *needle)
{
	char prefix[64];

	assert_true(i < errs->n);
	snprintf(prefix, sizeof(prefix), FILE_NAME ":%s: ", pos);
	if (!str_starts(errs->lines[i], prefix) || !str_contains(errs->lines[i], needle)) {
		config_dump(errs);
		fail_msg("error %zu is \"%s\", want \"%s...%s...\"", i, errs->lines[i], prefix, needle);
	}
}

/* text has exactly one error, at pos, containing needle. */
static inline void one_error(const char *text, const char *pos, const char *needle)
{
	struct ecw_node_errors errs;

	parse_bad(&errs, text, 1);
	error_is(&errs, 0, pos, needle);
	ecw_node_errors_dispose(&errs);
}

static inline int setup(void **state)
{
	(void)state;
	unsetenv("AZURE_STORAGE_CONNECTION_STRING");
	unsetenv("AZURE_STORAGE_CONNECTION_STRING_FILE");
	unsetenv("ECW_CONFIG");
	unsetenv("ECW_T_SET");
	unsetenv("ECW_T_UNSET");
	unsetenv("ECW_T_EMPTY");
	unsetenv("ECW_T_SECRET");
	return 0;
}

#endif
