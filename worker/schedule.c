/* schedule.c - `schedules:` (see schedule.h). */
#include <stdlib.h>

#include "schedule.h"

int ecw_schedules_parse(struct ecw_schedule_set **out, const struct ecw_node *sec, const struct ecw_config *cfg,
			struct ecw_config_errors *errs)
{
	(void)cfg;
	*out = NULL;
	if (sec)
		ecw_config_error(errs, sec, "schedules: not built yet");
	return sec ? -1 : 0;
}

void ecw_schedules_free(struct ecw_schedule_set *s)
{
	free(s);
}
