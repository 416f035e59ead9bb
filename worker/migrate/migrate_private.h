/* SPDX-License-Identifier: MIT */
/* migrate_private.h - what the migrations room's files share, and no other
 * file: a step's text, which worker/migrate/migrate.c writes for the plan and
 * worker/migrate/migrate_apply.c for its progress lines. The set they read is
 * the configuration's (ecw_config.h). */
#ifndef ECW_MIGRATE_PRIVATE_H
#define ECW_MIGRATE_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "ecw_buf.h"
#include "ecw_config.h"
#include "migrate.h"

/* "copy_table Readings -> TankTelemetry" and the like: one step as the plan
 * and the progress messages name it, appended to out. */
int ecw_migrate_describe_step(struct ecw_buf *out, const struct ecw_migration_step *s) ECW_MUST_USE;

#endif
