/* schedule.h - `schedules:` in the configuration: jobs enqueued on a
 * timetable by the worker itself (worker/schedule.c). */
#ifndef ECW_SCHEDULE_H
#define ECW_SCHEDULE_H

#include "ecw_config.h"

struct ecw_schedule_set;

/* Reads the `schedules:` section (sec may be NULL: none). Jobs are already
 * parsed in cfg, so a schedule can name them. Problems go to errs and the
 * result is -1. */
int ecw_schedules_parse(struct ecw_schedule_set **out, const struct ecw_node *sec, const struct ecw_config *cfg,
			struct ecw_config_errors *errs);
void ecw_schedules_free(struct ecw_schedule_set *s);

#endif
