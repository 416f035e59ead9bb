/* runtime.h - `ecworker run`: receive messages, run the jobs they name, and
 * apply the outcome rules, until SIGTERM or SIGINT. */
#ifndef ECW_RUNTIME_H
#define ECW_RUNTIME_H

#include "ecw_config.h"

#define ECW_VERSION "0.2.0"

/* Returns the process exit status: 0 after a clean stop, 1 when the worker
 * could not start (storage unreachable, bad credentials, metrics address in
 * use), 130 after a second signal cut the shutdown short. */
int ecw_runtime_run(const struct ecw_config *cfg);

/* "<host> ecworker/<version>", for envelopes and logs. */
const char *ecw_runtime_worker_id(void);

#endif
