/* SPDX-License-Identifier: MIT */
/* version.c - the name a worker goes by (include/ecw_version.h). */
#include <stdio.h>
#include <unistd.h>

#include "ecw_version.h"

static char worker_id[200];

const char *ecw_version_worker_id(void)
{
	if (!worker_id[0]) {
		char host[128] = "unknown";
		gethostname(host, sizeof(host) - 1);
		host[sizeof(host) - 1] = '\0';
		snprintf(worker_id, sizeof(worker_id), "%s ecworker/%s", host, ECW_VERSION);
	}
	return worker_id;
}
