/* SPDX-License-Identifier: MIT */
/* migrate_private.h - what the two halves of the migrations share, and no one
 * else: worker/migrate/migrate.c parses the `migrations:` section into these structs,
 * worker/migrate/migrate_apply.c applies them. The set is a heap object owned by the
 * configuration (ecw_migrate_free); everything in it is the set's. */
#ifndef ECW_MIGRATE_PRIVATE_H
#define ECW_MIGRATE_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_template.h"
#include "migrate.h"

enum step_kind {
	S_CREATE_TABLE,
	S_DELETE_TABLE,
	S_CLEAR_TABLE,
	S_COPY_TABLE,
	S_RENAME_TABLE, /* only while parsing: becomes COPY + DELETE */
	S_UPSERT_ENTITY,
	S_INSERT_ENTITY,
	S_DELETE_ENTITY,
	S_DELETE_PARTITION,
	S_SET_PROPERTY,
};

struct tmpl_prop {
	char *name;
	struct ecw_template *t;
};

struct step {
	enum step_kind kind;
	int pos;                   /* 1-based position in the YAML list */
	const char *phase;         /* rename_table: "copy" or "delete"; else NULL */
	char *table;               /* the table (copy: the source) */
	char *to;                  /* copy: the target */
	char *pk, *rk;             /* delete_entity, delete_partition */
	char *filter;              /* set_property: an OData filter; NULL for all */
	struct ecw_entity *entity; /* upsert/insert: the entity; set_property: the constants */
	struct tmpl_prop *tmpls;   /* set_property: string values (templates) */
	size_t ntmpls;
	char sum[65]; /* this step's definition, hashed */
};

struct migration {
	char *id;
	long long version;
	char *description;
	struct step *steps;
	size_t nsteps;
	size_t nlisted; /* steps as written (rename_table counts once) */
	char sum[65];
};

struct ecw_migration_set {
	char *table;
	int64_t lease_ms;
	int64_t wait_ms;
	struct migration *list;
	size_t n;
};

/* "copy_table Readings -> TankTelemetry" and the like: one step as the plan
 * and the progress messages name it, appended to out. */
int ecw_migrate_describe_step(struct ecw_buf *out, const struct step *s) ECW_MUST_USE;

#endif
