/* SPDX-License-Identifier: MIT */
/* telemetry_private.h - what the telemetry room's files share, and no
 * other file: what the endpoint (metrics_server.c) asks the counters
 * (metrics.c): the probes' verdicts, read without the counters' lock. */
#ifndef ECW_TELEMETRY_PRIVATE_H
#define ECW_TELEMETRY_PRIVATE_H

#include <stdbool.h>

/* metrics_private.c - what the endpoint (metrics_server.c) asks the counters
 * (metrics.c): the probes' verdicts, read without the counters' lock. */

/* The loop went round within the liveness window (never before its first
 * heartbeat): /healthz. */
bool ecw_metrics_alive(void);
/* A job thread completed no storage call for worker.stall_timeout: /healthz fails. */
bool ecw_metrics_stalled(void);
/* The storage circuit is open, or the worker not ready yet: /readyz fails. */
bool ecw_metrics_circuit_open(void);
bool ecw_metrics_ready(void);

#endif
