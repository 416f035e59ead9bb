/* poison.h - the poison envelope: what the worker puts on the poison queue
 * for a message it gives up on, so people can see what failed and why and
 * replay `original` byte for byte. */
#ifndef ECW_POISON_H
#define ECW_POISON_H

#include <time.h>
#include "ecw_buf.h"
#include "ecw_err.h"

struct ecw_poison_info {
	const char *original;         /* the message text exactly as received */
	size_t original_len;
	const char *queue;
	const char *message_id;
	time_t inserted_at;
	long dequeue_count;
	time_t failed_at;
	const char *reason;           /* "permanent" | "max-dequeue" */
	const char *error;            /* one line */
	const char *job, *pk, *rk;    /* NULL when not decodable */
	const char *worker;           /* "<host> ecworker/<version>" */
};

/* {"ecw_poison":1,"original":...,"queue":...,"message_id":...,"inserted_at":...,
 *  "dequeue_count":...,"failed_at":...,"reason":...,"error":...,"job":...,
 *  "pk":...,"rk":...,"worker":...} on one line. */
int ecw_poison_envelope(struct ecw_buf *out, const struct ecw_poison_info *info) ECW_MUST_USE;

#endif
