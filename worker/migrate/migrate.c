/* SPDX-License-Identifier: MIT */
/* migrate.c - a parsed `migrations:` set (ecw_config.h; the section is read
 * by worker/config/migrations.c) as the plan prints it: one line per step.
 * Applying it is worker/migrate/migrate_apply.c's; `ecworker migrate` is
 * worker/cmd/migrate.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_template.h"
#include "migrate_private.h"

int ecw_migrate_describe_step(struct ecw_buf *out, const struct ecw_migration_step *s)
{
	int err;

	if (s->phase)
		return s->kind == ECW_MIGRATION_COPY_TABLE
			       ? ecw_buf_printf(out, "rename_table %s -> %s (copy)", s->table, s->to)
			       : ecw_buf_printf(out, "rename_table (delete %s)", s->table);
	if ((err = ecw_buf_printf(out, "%s %s", ecw_migrations_step_name(s->kind), s->table)) < 0)
		return err;
	switch (s->kind) {
	case ECW_MIGRATION_COPY_TABLE: return ecw_buf_printf(out, " -> %s", s->to);
	case ECW_MIGRATION_UPSERT_ENTITY:
	case ECW_MIGRATION_INSERT_ENTITY:
		return ecw_buf_printf(out, " (%s, %s)", ecw_entity_pk(s->entity), ecw_entity_rk(s->entity));
	case ECW_MIGRATION_DELETE_ENTITY: return ecw_buf_printf(out, " (%s, %s)", s->pk, s->rk);
	case ECW_MIGRATION_DELETE_PARTITION: return ecw_buf_printf(out, " (%s)", s->pk);
	case ECW_MIGRATION_SET_PROPERTY:
		if ((err = ecw_buf_printf(out, " where %s:", s->filter ? s->filter : "(all)")) < 0)
			return err;
		for (size_t i = 0; i < ecw_entity_count(s->entity); i++)
			if ((err = ecw_buf_printf(out, " %s", ecw_entity_at(s->entity, i)->name)) < 0)
				return err;
		for (size_t i = 0; i < s->ntmpls; i++)
			if ((err = ecw_buf_printf(out, " %s=\"%s\"", s->tmpls[i].name,
						  ecw_template_text(s->tmpls[i].t))) < 0)
				return err;
		return 0;
	default: return 0;
	}
}

int ecw_migrate_plan(struct ecw_buf *out, const struct ecw_migration_set *m, size_t i, size_t from)
{
	const struct ecw_migration *g = &m->list[i];
	int err;

	if ((err = ecw_buf_printf(out, "%lld %s%s%s\n", g->version, g->id, g->description ? ": " : "",
				  g->description ? g->description : "")) < 0)
		return err;
	for (size_t k = from; k < g->nsteps; k++) {
		if ((err = ecw_buf_printf(out, "  step %d/%zu: ", g->steps[k].pos, g->nlisted)) < 0 ||
		    (err = ecw_migrate_describe_step(out, &g->steps[k])) < 0 ||
		    (err = ecw_buf_adds(out, "\n")) < 0)
			return err;
	}
	return 0;
}
