/* SPDX-License-Identifier: MIT */
/* ecw_version.h - the program's version and the name a worker goes by in
 * envelopes, schedule claims and logs (worker/base/version.c). */
#ifndef ECW_VERSION_H
#define ECW_VERSION_H

#define ECW_VERSION "0.3.0"

/* "<host> ecworker/<version>", made once; the string is static. */
const char *ecw_version_worker_id(void);

#endif
