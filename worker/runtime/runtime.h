/* SPDX-License-Identifier: MIT */
/* runtime.h - `ecworker run`: receive messages, run the jobs they name, and
 * apply the outcome rules, until SIGTERM or SIGINT. */
#ifndef ECW_RUNTIME_H
#define ECW_RUNTIME_H

#include <stdbool.h>
#include "ecw_config.h"

/* Returns the process exit status: 0 after a clean stop, 1 when the worker
 * could not start (storage unreachable, bad credentials, metrics address in
 * use), 130 after a second signal cut the shutdown short. *threads_done is
 * false when job threads still run (shutdown_grace ran out, or a second
 * signal): then cfg must stay alive until the process exits. */
int ecw_runtime_run(const struct ecw_config *cfg, bool *threads_done);

#endif
