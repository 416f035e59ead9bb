/* SPDX-License-Identifier: MIT */
/* version.c - `ecworker version` (also --version): the version, the commit
 * the program was built from, the compiler, and for each library the version
 * its headers had at build time beside the one loaded now (a distribution's
 * security update changes the second without a rebuild).
 *
 * The commit and the build-time library versions come from
 * BUILD/gen/ecw_build_info.h, which the Makefile writes (from git and
 * pkg-config) and rewrites only when a value changes. */
#include <curl/curl.h>
#include <expat.h>
#include <json-c/json.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>
#include <zlib.h>

#include "cmd.h"
#include "ecw_build_info.h"
#include "ecw_version.h"

/* expat's "expat_2.5.0" as "2.5.0". */
static const char *expat_version(void)
{
	const char *v = XML_ExpatVersion();

	return strncmp(v, "expat_", 6) == 0 ? v + 6 : v;
}

/* OpenSSL's text is "OpenSSL 3.0.17 1 Jul 2025": the number only. */
static void openssl_number(char *out, size_t cap, const char *text)
{
	const char *p = strncmp(text, "OpenSSL ", 8) == 0 ? text + 8 : text;

	snprintf(out, cap, "%.*s", (int)strcspn(p, " "), p);
}

int ecw_cmd_version(int argc, char **argv)
{
	char ssl[64];

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: ecworker version\n\nThe version, the git commit it was built from, the compiler, and\n"
		       "each library's version at build time and now.\n");
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "version: takes no arguments (see ecworker version --help)\n");
		return ECW_EXIT_USAGE;
	}
	openssl_number(ssl, sizeof(ssl), OpenSSL_version(OPENSSL_VERSION));
	printf("ecworker %s\n", ECW_VERSION);
	printf("commit %s\n", ECW_BUILD_COMMIT);
	printf("compiler %s\n", ECW_BUILD_COMPILER);
	printf("libraries (built with / running with):\n");
	printf("  %-14s %s / %s\n", "libcurl", ECW_BUILT_WITH_LIBCURL,
	       curl_version_info(CURLVERSION_NOW)->version);
	printf("  %-14s %s / %s\n", "openssl", ECW_BUILT_WITH_OPENSSL, ssl);
	printf("  %-14s %s / %s\n", "json-c", ECW_BUILT_WITH_JSON_C, json_c_version());
	printf("  %-14s %s / %s\n", "libyaml", ECW_BUILT_WITH_YAML, yaml_get_version_string());
	printf("  %-14s %s / %s\n", "expat", ECW_BUILT_WITH_EXPAT, expat_version());
	printf("  %-14s %s / %s\n", "libmicrohttpd", ECW_BUILT_WITH_LIBMICROHTTPD, MHD_get_version());
	printf("  %-14s %s / %s\n", "zlib", ECW_BUILT_WITH_ZLIB, zlibVersion());
	return 0;
}
