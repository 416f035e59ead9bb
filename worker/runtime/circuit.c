/* SPDX-License-Identifier: MIT */
/* circuit.c - the storage circuit breaker (runtime_private.h): a streak counter, a
 * probe made by one thread at a time while the others wait for its verdict,
 * and the open state with its doubling probe interval. */
#include <pthread.h>
#include <stdlib.h>

#include "runtime_private.h"
#include "ecw_clock.h"
#include "ecw_log.h"
#include "telemetry.h"

struct ecw_circuit {
	struct ecw_circuit_limits limits;
	ecw_circuit_probe_fn probe;
	void *payload;

	pthread_mutex_t mu; /* guards everything below */
	pthread_cond_t verdict_cv;
	int streak;      /* outage-class failures since the last success or probe */
	int last_err;    /* the streak's last failure, for the log */
	bool probing;    /* a thread is asking the probe (note) */
	uint64_t probes; /* verdicts given: a waiter sees the one it waited for */
	bool open;
	int64_t opened_ms;
	int64_t next_probe_ms; /* while open */
	int64_t interval_ms;   /* while open: the wait after a probe that got no answer */
	int failed_probes;     /* while open */
};

int ecw_circuit_new(struct ecw_circuit **out, const struct ecw_circuit_limits *limits,
		    ecw_circuit_probe_fn probe, void *payload)
{
	struct ecw_circuit *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	c->limits = *limits;
	if (c->limits.probe_min_ms < 1)
		c->limits.probe_min_ms = 1;
	if (c->limits.probe_max_ms < c->limits.probe_min_ms)
		c->limits.probe_max_ms = c->limits.probe_min_ms;
	c->probe = probe;
	c->payload = payload;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->verdict_cv, NULL);
	ecw_metrics_set_circuit_open(false);
	*out = c;
	return 0;
}

void ecw_circuit_free(struct ecw_circuit *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->verdict_cv);
	free(c);
}

bool ecw_circuit_err_is_outage(int err)
{
	return err == ECW_ETRANSIENT || err == ECW_ETIMEOUT || err == ECW_EBUSY;
}

/* Under c->mu. */
static void open_circuit(struct ecw_circuit *c, int probe_err)
{
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_ERROR, "storage_circuit_open");

	c->open = true;
	c->opened_ms = ecw_clock_now_ms();
	c->interval_ms = c->limits.probe_min_ms;
	c->next_probe_ms = c->opened_ms + c->interval_ms;
	c->failed_probes = 0;
	ecw_log_int(l, "failures", c->streak);
	ecw_log_str(l, "code", ecw_error_name(c->last_err));
	ecw_log_str(l, "probe", ecw_error_name(probe_err));
	ecw_log_str(l, "error",
		    "storage does not answer: receiving stops, held messages wait, "
		    "and their failures do not count towards poisoning until it answers");
	ecw_log_end(l);
	ecw_metrics_set_circuit_open(true);
}

/* Under c->mu. */
static void close_circuit(struct ecw_circuit *c, const char *by)
{
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "storage_circuit_closed");

	c->open = false;
	c->streak = 0;
	ecw_log_str(l, "by", by);
	ecw_log_int(l, "open_ms", ecw_clock_now_ms() - c->opened_ms);
	ecw_log_int(l, "failed_probes", c->failed_probes);
	ecw_log_end(l);
	ecw_metrics_set_circuit_open(false);
}

/* Asks the probe without holding c->mu (it talks to storage); under c->mu
 * on entry and on return, with c->probing set in between so that no other
 * thread probes at the same time. Returns the probe's answer. */
static int ask_probe(struct ecw_circuit *c)
{
	int err;

	c->probing = true;
	pthread_mutex_unlock(&c->mu);
	err = c->probe(c->payload);
	pthread_mutex_lock(&c->mu);
	c->probing = false;
	c->probes++;
	pthread_cond_broadcast(&c->verdict_cv);
	return err;
}

bool ecw_circuit_note(struct ecw_circuit *c, int err)
{
	bool open;

	pthread_mutex_lock(&c->mu);
	if (err == 0) {
		c->streak = 0;
		if (c->open)
			close_circuit(c, "success");
	} else if (ecw_circuit_err_is_outage(err) && c->limits.failures > 0 && !c->open) {
		c->last_err = err;
		if (c->probing) {
			/* Another thread is asking: its verdict is this failure's too. */
			uint64_t seen = c->probes;
			while (c->probing && c->probes == seen)
				pthread_cond_wait(&c->verdict_cv, &c->mu);
		} else if (++c->streak >= c->limits.failures) {
			int probe_err = ask_probe(c);
			if (probe_err != 0 && ecw_circuit_err_is_outage(probe_err)) {
				if (!c->open)
					open_circuit(c, probe_err);
			} else {
				c->streak = 0; /* storage answers: the failures were the messages' */
			}
		}
	}
	open = c->open && err != 0 && ecw_circuit_err_is_outage(err);
	pthread_mutex_unlock(&c->mu);
	return open;
}

bool ecw_circuit_is_open(struct ecw_circuit *c)
{
	bool open;

	pthread_mutex_lock(&c->mu);
	open = c->open;
	pthread_mutex_unlock(&c->mu);
	return open;
}

int64_t ecw_circuit_probe_due_in_ms(struct ecw_circuit *c)
{
	int64_t due = -1;

	pthread_mutex_lock(&c->mu);
	if (c->open) {
		due = c->next_probe_ms - ecw_clock_now_ms();
		if (due < 0)
			due = 0;
	}
	pthread_mutex_unlock(&c->mu);
	return due;
}

bool ecw_circuit_probe(struct ecw_circuit *c)
{
	bool closed;

	pthread_mutex_lock(&c->mu);
	if (c->open && !c->probing) {
		int err = ask_probe(c);
		if (c->open) {
			if (err == 0 || !ecw_circuit_err_is_outage(err)) {
				close_circuit(c, "probe");
			} else {
				c->failed_probes++;
				c->interval_ms = c->interval_ms * 2 > c->limits.probe_max_ms
							 ? c->limits.probe_max_ms
							 : c->interval_ms * 2;
				c->next_probe_ms = ecw_clock_now_ms() + c->interval_ms;
			}
		}
	}
	closed = !c->open;
	pthread_mutex_unlock(&c->mu);
	return closed;
}
