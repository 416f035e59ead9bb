/* SPDX-License-Identifier: MIT */
/* circuit.h - the storage circuit breaker: tells a whole-service outage
 * (storage down, unreachable, timing out, or busy for everyone) from a
 * message's own failures, so that an outage does not poison the backlog.
 *
 * The runtime notes the result of every job and every failed receive. Failures of
 * the kinds an outage gives (ecw_circuit_err_is_outage) that follow each
 * other with no success between are counted; at `failures` of them the
 * probe is asked (a cheap request to each service): when storage does not
 * answer it either, the circuit opens. While it is open the runtime
 * receives nothing, runs nothing it holds (each held message is hidden for
 * a backoff, its failure not held against it: outcome.h), and probes at
 * growing intervals (probe_min_ms doubling to probe_max_ms); the first
 * probe that is answered, or any success, closes it. A message whose own
 * request fails with a 500 does not open it: the probe is answered.
 *
 * Opening and closing each log one line and set the gauge
 * ecworker_storage_circuit_open, which /readyz also reads. Thread-safe: one
 * heap object per runtime, freed with ecw_circuit_free after every thread
 * that notes is gone. */
#ifndef ECW_CIRCUIT_H
#define ECW_CIRCUIT_H

#include <stdbool.h>
#include <stdint.h>
#include "ecw_err.h"

struct ecw_circuit_limits {
	int failures;         /* outage-class failures in a row that make it probe; 0: never opens */
	int64_t probe_min_ms; /* first wait between probes while open */
	int64_t probe_max_ms; /* the doubling wait's cap */
};

/* 0 when storage answers (any answer that is not an outage's), else the
 * error. Called by one thread at a time. */
typedef int (*ecw_circuit_probe_fn)(void *payload);

struct ecw_circuit;

int ecw_circuit_new(struct ecw_circuit **out, const struct ecw_circuit_limits *limits,
		    ecw_circuit_probe_fn probe, void *payload) ECW_MUST_USE;
void ecw_circuit_free(struct ecw_circuit *c);

/* The failures an outage gives (after the client's own retries): refused
 * or reset connections, DNS failures, 5xx (ECW_ETRANSIENT), timeouts
 * (ECW_ETIMEOUT), throttling and ServerBusy (ECW_EBUSY). */
bool ecw_circuit_err_is_outage(int err);

/* The result of one job or one receive: 0 (storage answered) or its error.
 * A success closes the circuit; an outage-class failure counts towards
 * `failures` (and probes when it gets there, or waits for a probe another
 * thread is making); any other failure is the message's and changes
 * nothing. Returns true when the circuit is open after this: the failure
 * is the service's. */
bool ecw_circuit_note(struct ecw_circuit *c, int err);

bool ecw_circuit_is_open(struct ecw_circuit *c);

/* While open: milliseconds until the next probe is due (0: now); -1 when
 * it is closed. */
int64_t ecw_circuit_probe_due_in_ms(struct ecw_circuit *c);

/* While open: probes now; an answer closes the circuit, no answer doubles
 * the wait for the next probe. Returns true when it is closed after this. */
bool ecw_circuit_probe(struct ecw_circuit *c);

#endif
