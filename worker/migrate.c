/* migrate.c - `migrations:` and `ecworker migrate` (see migrate.h).
 *
 * The version table holds one entity per migration (PartitionKey
 * "migration", RowKey the version zero-padded to 10 digits). A process claims
 * a migration by inserting that entity with State "running", its owner and a
 * lease (LeaseUntil, wall-clock ms); the insert is conditional, so of two
 * processes one gets 409 and waits. Every later write of the owner is an
 * update with If-Match on the entity's ETag: progress (Step, StepTries, the
 * Cursor of the long steps), heartbeats that extend the lease, and the final
 * State "applied" or "failed". A process that finds the lease expired (the
 * owner was killed) takes the claim over the same way, If-Match, and resumes
 * from the recorded progress; the old owner, should it wake up, gets 412 on
 * its next write and stops.
 *
 * Crash safety, step by step (the process dies right after a write):
 * - Before running step i the owner records Step=i and StepTries+1. A crash
 *   anywhere in step i leaves Step=i, so the next owner runs step i again,
 *   and knows it is a retry (StepTries > 0). Steps before i are never rerun.
 * - create_table: "already exists" is success. delete_table: "not found" is
 *   success. (Azure refuses to create a table for ~40 s after deleting it:
 *   409 TableBeingDeleted, reported as the step's error; rerun later.)
 * - upsert_entity: insert-or-replace, the same result however often it runs.
 * - insert_entity: an insert. On a retry (StepTries > 0) 409 is accepted when
 *   the stored entity equals the one configured (our own write from before
 *   the crash); otherwise 409 fails the step: someone else wrote it.
 * - delete_entity: delete-if-exists.
 * - copy_table: pages of the source in key order, written in entity group
 *   transactions of insert-or-replace (one partition, <= 100 each); after a
 *   batch commits, the Cursor (its last PartitionKey, RowKey) is recorded
 *   (at most once a second, and with each heartbeat). A crash after a batch
 *   but before the cursor write makes the next owner copy those entities
 *   again: insert-or-replace of the same values, harmless. Entities the
 *   source gains after the copy passed them are not copied (as with any
 *   online copy: stop writers first).
 * - set_property: the same walk over the entities matching the filter, each
 *   batch a MERGE (If-Match *, so a deleted entity is not brought back) of the
 *   configured values. Merging the same values twice is harmless; values are
 *   rendered from the entity as stored, and a template may not read a
 *   property the same step sets (checked at parse time), so a repeated batch
 *   writes what the first did.
 * - clear_table, delete_partition: delete every entity (matching), in
 *   batches of If-Match * deletes; a batch that meets an entity already gone
 *   falls back to delete-if-exists one by one. The table is its own progress:
 *   a rerun finds only what is left, so no cursor is needed.
 * - rename_table is copy_table then delete_table, two steps.
 * A failed step records State "failed" and the error; the run stops there and
 * a later run (the configuration fixed or not) resumes at that step. */
#include <errno.h>
#include <getopt.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_clock.h"
#include "ecw_codec.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "ecw_crash.h"
#include "ecw_job.h"
#include "ecw_template.h"
#include "migrate.h"
#include "ecw_progress.h"

#define EXIT_USAGE 2
#define REC_PK "migration"
#define DEFAULT_TABLE "EcwMigrations"
#define MAX_VERSION 2147483647LL

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

static const char *const kind_names[] = {
	"create_table", "delete_table", "clear_table", "copy_table", "rename_table",
	"upsert_entity", "insert_entity", "delete_entity", "delete_partition", "set_property",
};

struct tmpl_prop {
	char *name;
	struct ecw_template *t;
};

struct step {
	enum step_kind kind;
	int pos;                  /* 1-based position in the YAML list */
	const char *phase;        /* rename_table: "copy" or "delete"; else NULL */
	char *table;              /* the table (copy: the source) */
	char *to;                 /* copy: the target */
	char *pk, *rk;            /* delete_entity, delete_partition */
	char *filter;             /* set_property: an OData filter; NULL for all */
	struct ecw_entity *entity; /* upsert/insert: the entity; set_property: the constants */
	struct tmpl_prop *tmpls;  /* set_property: string values (templates) */
	size_t ntmpls;
	char sum[65];             /* this step's definition, hashed */
};

struct migration {
	char *id;
	long long version;
	char *description;
	struct step *steps;
	size_t nsteps;
	size_t nlisted;           /* steps as written (rename_table counts once) */
	char sum[65];
};

struct ecw_migration_set {
	char *table;
	int64_t lease_ms;
	int64_t wait_ms;
	struct migration *list;
	size_t n;
};

/* ---- the definition's checksum ------------------------------------------- */

/* A canonical text of a node: kind, length-prefixed scalars (quoted or not),
 * maps and lists in written order. */
static int canon(struct ecw_buf *b, const struct ecw_node *n)
{
	int err = 0;

	if (!n)
		return ecw_buf_adds(b, "~");
	switch (n->kind) {
	case ECW_NODE_SCALAR:
		return ecw_buf_printf(b, "%c%zu:%s", n->quoted ? 'q' : 's', strlen(n->value ? n->value : ""),
				      n->value ? n->value : "");
	case ECW_NODE_MAP:
		if ((err = ecw_buf_printf(b, "m%zu{", n->n)) < 0)
			return err;
		for (size_t i = 0; i < n->n; i++)
			if ((err = canon(b, n->keys[i])) < 0 || (err = canon(b, n->items[i])) < 0)
				return err;
		return ecw_buf_adds(b, "}");
	case ECW_NODE_SEQ:
		if ((err = ecw_buf_printf(b, "l%zu[", n->n)) < 0)
			return err;
		for (size_t i = 0; i < n->n; i++)
			if ((err = canon(b, n->items[i])) < 0)
				return err;
		return ecw_buf_adds(b, "]");
	}
	return 0;
}

static int sha256_hex(char out[65], const void *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		return ecw_error_set(ECW_ERROR, "SHA-256 failed");
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
	return 0;
}

static int node_sum(char out[65], const char *prefix, const struct ecw_node *n)
{
	struct ecw_buf b;
	int err;

	ecw_buf_init(&b, 0);
	if ((err = ecw_buf_adds(&b, prefix)) >= 0 && (err = canon(&b, n)) >= 0)
		err = sha256_hex(out, b.ptr, b.len);
	ecw_buf_dispose(&b);
	return err;
}

/* ---- parsing --------------------------------------------------------------- */

static void step_dispose(struct step *s)
{
	free(s->table);
	free(s->to);
	free(s->pk);
	free(s->rk);
	free(s->filter);
	ecw_entity_free(s->entity);
	for (size_t i = 0; i < s->ntmpls; i++) {
		free(s->tmpls[i].name);
		ecw_template_free(s->tmpls[i].t);
	}
	free(s->tmpls);
}

void ecw_migrations_free(struct ecw_migration_set *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		struct migration *g = &m->list[i];
		for (size_t k = 0; k < g->nsteps; k++)
			step_dispose(&g->steps[k]);
		free(g->steps);
		free(g->id);
		free(g->description);
	}
	free(m->list);
	free(m->table);
	free(m);
}

static bool is_null(const struct ecw_node *n)
{
	return n->kind == ECW_NODE_SCALAR && !n->quoted &&
	       (!n->value || !*n->value || strcmp(n->value, "~") == 0 || strcmp(n->value, "null") == 0);
}

static bool all_digits(const char *p)
{
	if (*p == '-' || *p == '+')
		p++;
	if (!*p)
		return false;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/* [-+]digits[.digits][(e|E)[-+]digits], with a '.' or an exponent. */
static bool looks_double(const char *p)
{
	bool dot = false, exp = false, digits = false;

	if (*p == '-' || *p == '+')
		p++;
	for (; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits = true;
		else if (*p == '.' && !dot && !exp)
			dot = true;
		else if ((*p == 'e' || *p == 'E') && digits && !exp) {
			exp = true;
			digits = false;
			if (p[1] == '-' || p[1] == '+')
				p++;
		} else
			return false;
	}
	return digits && (dot || exp);
}

static int set_int_text(struct ecw_entity *e, const char *name, const char *s, bool force64)
{
	long long x;
	char *end;

	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno == ERANGE || *end || end == s)
		return ecw_error_set(ECW_EINVALID, "%s: %s is out of the range of Edm.Int64", name, s);
	if (!force64 && x >= INT32_MIN && x <= INT32_MAX)
		return ecw_entity_set_int32(e, name, (int32_t)x);
	return ecw_entity_set_int64(e, name, (int64_t)x);
}

static int set_double_text(struct ecw_entity *e, const char *name, const char *s)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(s, &end);
	if (end == s || *end || errno == ERANGE)
		return ecw_error_set(ECW_EINVALID, "%s: '%s' is not a finite double", name, s);
	return ecw_entity_set_double(e, name, d);
}

/* {type: Edm.X, value: "..."}: the text form the service uses. */
static int set_typed(struct ecw_entity *e, const char *name, const char *type, const char *v)
{
	if (strcmp(type, "Edm.String") == 0)
		return ecw_entity_set_string(e, name, v, strlen(v));
	if (strcmp(type, "Edm.Int32") == 0 || strcmp(type, "Edm.Int64") == 0) {
		if (!all_digits(v))
			return ecw_error_set(ECW_EINVALID, "%s: '%s' is not an integer", name, v);
		if (type[7] == '3') {
			long long x;
			errno = 0;
			x = strtoll(v, NULL, 10);
			if (errno == ERANGE || x < INT32_MIN || x > INT32_MAX)
				return ecw_error_set(ECW_EINVALID, "%s: %s is out of the range of Edm.Int32", name, v);
			return ecw_entity_set_int32(e, name, (int32_t)x);
		}
		return set_int_text(e, name, v, true);
	}
	if (strcmp(type, "Edm.Double") == 0)
		return set_double_text(e, name, v);
	if (strcmp(type, "Edm.Boolean") == 0) {
		if (strcmp(v, "true") && strcmp(v, "false"))
			return ecw_error_set(ECW_EINVALID, "%s: an Edm.Boolean is true or false", name);
		return ecw_entity_set_bool(e, name, v[0] == 't');
	}
	if (strcmp(type, "Edm.DateTime") == 0)
		return ecw_entity_set_datetime(e, name, v);
	if (strcmp(type, "Edm.Guid") == 0)
		return ecw_entity_set_guid(e, name, v);
	if (strcmp(type, "Edm.Binary") == 0) {
		struct ecw_buf b;
		int err;
		ecw_buf_init(&b, 0);
		if ((err = ecw_base64_decode(&b, v, strlen(v))) < 0)
			err = ecw_error_set(ECW_EINVALID, "%s: an Edm.Binary value is base64", name);
		else
			err = ecw_entity_set_binary(e, name, b.ptr ? b.ptr : "", b.len);
		ecw_buf_dispose(&b);
		return err;
	}
	return ecw_error_set(ECW_EINVALID,
			     "%s: unknown type '%s' (Edm.String, Edm.Int32, Edm.Int64, Edm.Double, Edm.Boolean, "
			     "Edm.DateTime, Edm.Guid, Edm.Binary)",
			     name, type);
}

/* One property value: a quoted scalar is a string; a plain one true/false,
 * an integer (Int32 when it fits, else Int64), a decimal (Double) or text;
 * a map {type, value} is explicit. *is_text tells a string apart (for
 * set_property, where strings are templates). */
static int read_value(struct ecw_entity *e, const char *name, const struct ecw_node *v, bool *is_text,
		      struct ecw_node_errors *errs)
{
	static const char *const typed_keys[] = {"type", "value", NULL};
	const char *s = v->value ? v->value : "";
	int err = 0;

	*is_text = false;
	if (v->kind == ECW_NODE_SEQ) {
		ecw_node_error(errs, v, "%s: a property value is a scalar or {type, value}, not a list", name);
		return -1;
	}
	if (v->kind == ECW_NODE_MAP) {
		char *type = NULL, *val = NULL;
		int bad = ecw_node_check_keys(v, typed_keys, name, errs) > 0;
		bad |= ecw_node_string(&type, v, "type", true, errs) < 0;
		bad |= ecw_node_string(&val, v, "value", true, errs) < 0;
		if (!bad && (err = set_typed(e, name, type, val)) < 0)
			ecw_node_error(errs, v, "%s", ecw_error_last()->message);
		*is_text = !bad && strcmp(type, "Edm.String") == 0;
		free(type);
		free(val);
		return bad || err < 0 ? -1 : 0;
	}
	if (is_null(v)) {
		ecw_node_error(errs, v, "%s has no value (leave the property out instead)", name);
		return -1;
	}
	if (v->quoted) {
		*is_text = true;
		err = ecw_entity_set_string(e, name, s, strlen(s));
	} else if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
		err = ecw_entity_set_bool(e, name, s[0] == 't');
	} else if (all_digits(s)) {
		err = set_int_text(e, name, s, false);
	} else if (looks_double(s)) {
		err = set_double_text(e, name, s);
	} else {
		*is_text = true;
		err = ecw_entity_set_string(e, name, s, strlen(s));
	}
	if (err < 0)
		ecw_node_error(errs, v, "%s", ecw_error_last()->message);
	return err < 0 ? -1 : 0;
}

/* {PartitionKey, RowKey, other properties}. */
static int read_entity(struct ecw_entity **out, const struct ecw_node *map, struct ecw_node_errors *errs)
{
	const struct ecw_node *pk = ecw_node_get(map, "PartitionKey"), *rk = ecw_node_get(map, "RowKey");
	bool text;
	int bad = 0;

	*out = NULL;
	if (!map || map->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, map, "entity: expected a map {PartitionKey: ..., RowKey: ..., ...}");
		return -1;
	}
	if (!pk || !rk || pk->kind != ECW_NODE_SCALAR || rk->kind != ECW_NODE_SCALAR) {
		ecw_node_error(errs, map, "entity: PartitionKey and RowKey are required and are text");
		return -1;
	}
	if (ecw_entity_new(out, pk->value ? pk->value : "", rk->value ? rk->value : "") < 0) {
		ecw_node_error(errs, map, "entity: %s", ecw_error_last()->message);
		return -1;
	}
	for (size_t i = 0; i < map->n; i++) {
		const char *name = map->keys[i]->value;
		if (strcmp(name, "PartitionKey") == 0 || strcmp(name, "RowKey") == 0)
			continue;
		bad |= read_value(*out, name, map->items[i], &text, errs) < 0;
	}
	return bad ? -1 : 0;
}

/* Does template text t read property name ({name} or {name:...})? */
static bool reads_prop(const char *t, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = strchr(t, '{'); p; p = strchr(p + 1, '{')) {
		if (p[1] == '{') {
			p++;
			continue;
		}
		if (strncmp(p + 1, name, n) == 0 && (p[1 + n] == '}' || p[1 + n] == ':'))
			return true;
	}
	return false;
}

static int read_set(struct step *s, const struct ecw_node *set, struct ecw_node_errors *errs)
{
	int bad = 0;

	if (!set || set->kind != ECW_NODE_MAP || set->n == 0) {
		ecw_node_error(errs, set, "set_property: set is a map of one or more properties to values");
		return -1;
	}
	if (ecw_entity_new(&s->entity, "k", "k") < 0 || !(s->tmpls = calloc(set->n, sizeof(*s->tmpls)))) {
		ecw_node_error(errs, set, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < set->n; i++) {
		const char *name = set->keys[i]->value;
		bool text = false;
		if (strcmp(name, "PartitionKey") == 0 || strcmp(name, "RowKey") == 0) {
			ecw_node_error(errs, set->keys[i], "set_property: keys cannot be set (copy the table instead)");
			bad = 1;
			continue;
		}
		if (read_value(s->entity, name, set->items[i], &text, errs) < 0) {
			bad = 1;
			continue;
		}
		if (!text)
			continue;
		/* A string is a template over the entity: "{PartitionKey}". */
		const struct ecw_prop *p = ecw_entity_get(s->entity, name);
		struct tmpl_prop *tp = &s->tmpls[s->ntmpls];
		if (ecw_template_compile(&tp->t, p->v.s, name) < 0) {
			ecw_node_error(errs, set->items[i], "set_property: %s", ecw_error_last()->message);
			bad = 1;
		} else if (!(tp->name = strdup(name))) {
			ecw_template_free(tp->t);
			ecw_node_error(errs, set->items[i], "out of memory");
			bad = 1;
		} else {
			s->ntmpls++;
		}
		ecw_entity_remove(s->entity, name);
	}
	/* A value that reads what the step writes would change again on a
	 * rerun of the same batch: not idempotent, so refused. */
	for (size_t i = 0; i < s->ntmpls; i++)
		for (size_t k = 0; k < set->n; k++)
			if (reads_prop(ecw_template_text(s->tmpls[i].t), set->keys[k]->value)) {
				ecw_node_error(errs, ecw_node_get(set, s->tmpls[i].name),
						 "set_property: %s reads {%s}, which the same step sets; a rerun after a "
						 "crash would apply it twice (split it into two steps)",
						 s->tmpls[i].name, set->keys[k]->value);
				bad = 1;
			}
	return bad ? -1 : 0;
}

static int check_key(const char *key, const char *what, const struct ecw_node *at, struct ecw_node_errors *errs)
{
	if (ecw_key_check(key, what) < 0) {
		ecw_node_error(errs, at, "%s", ecw_error_last()->message);
		return -1;
	}
	return 0;
}

/* One item of steps: a map with one key, the step's kind. Appends one step
 * (two for rename_table) to g. */
static int read_step(struct migration *g, const struct ecw_node *item, int pos, struct ecw_node_errors *errs)
{
	static const char *const copy_keys[] = {"from", "to", NULL};
	static const char *const entity_keys[] = {"table", "entity", NULL};
	static const char *const delent_keys[] = {"table", "pk", "rk", NULL};
	static const char *const delpart_keys[] = {"table", "pk", NULL};
	static const char *const set_keys[] = {"table", "filter", "set", NULL};
	struct step s = {.pos = pos};
	const struct ecw_node *v;
	const char *kname;
	size_t k;
	int bad = 0;

	if (item->kind != ECW_NODE_MAP || item->n != 1) {
		ecw_node_error(errs, item,
				 "a step is a map with one key, its kind (create_table, delete_table, clear_table, "
				 "copy_table, rename_table, upsert_entity, insert_entity, delete_entity, "
				 "delete_partition, set_property)");
		return -1;
	}
	kname = item->keys[0]->value;
	v = item->items[0];
	for (k = 0; k < sizeof(kind_names) / sizeof(kind_names[0]) && strcmp(kind_names[k], kname) != 0; k++)
		;
	if (k == sizeof(kind_names) / sizeof(kind_names[0])) {
		ecw_node_error(errs, item->keys[0], "unknown step '%s'", kname);
		return -1;
	}
	s.kind = (enum step_kind)k;
	switch (s.kind) {
	case S_CREATE_TABLE:
	case S_DELETE_TABLE:
	case S_CLEAR_TABLE:
		bad |= ecw_jobcfg_table(&s.table, item, kname, true, errs) < 0;
		break;
	case S_COPY_TABLE:
	case S_RENAME_TABLE:
		if (v->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, v, "%s: expected {from: TABLE, to: TABLE}", kname);
			return -1;
		}
		bad |= ecw_node_check_keys(v, copy_keys, kname, errs) > 0;
		bad |= ecw_jobcfg_table(&s.table, v, "from", true, errs) < 0;
		bad |= ecw_jobcfg_table(&s.to, v, "to", true, errs) < 0;
		if (!bad && strcmp(s.table, s.to) == 0) {
			ecw_node_error(errs, v, "%s: from and to name the same table", kname);
			bad = 1;
		}
		break;
	case S_UPSERT_ENTITY:
	case S_INSERT_ENTITY:
		if (v->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, v, "%s: expected {table: TABLE, entity: {...}}", kname);
			return -1;
		}
		bad |= ecw_node_check_keys(v, entity_keys, kname, errs) > 0;
		bad |= ecw_jobcfg_table(&s.table, v, "table", true, errs) < 0;
		if (!ecw_node_get(v, "entity")) {
			ecw_node_error(errs, v, "%s: missing required key 'entity'", kname);
			bad = 1;
		} else {
			bad |= read_entity(&s.entity, ecw_node_get(v, "entity"), errs) < 0;
		}
		break;
	case S_DELETE_ENTITY:
	case S_DELETE_PARTITION:
		if (v->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, v, "%s: expected {table: TABLE, pk: KEY%s}", kname,
					 s.kind == S_DELETE_ENTITY ? ", rk: KEY" : "");
			return -1;
		}
		bad |= ecw_node_check_keys(v, s.kind == S_DELETE_ENTITY ? delent_keys : delpart_keys, kname, errs) > 0;
		bad |= ecw_jobcfg_table(&s.table, v, "table", true, errs) < 0;
		bad |= ecw_node_string(&s.pk, v, "pk", true, errs) < 0;
		if (s.pk)
			bad |= check_key(s.pk, "pk", ecw_node_get(v, "pk"), errs) < 0;
		if (s.kind == S_DELETE_ENTITY) {
			bad |= ecw_node_string(&s.rk, v, "rk", true, errs) < 0;
			if (s.rk)
				bad |= check_key(s.rk, "rk", ecw_node_get(v, "rk"), errs) < 0;
		}
		break;
	case S_SET_PROPERTY:
		if (v->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, v, "set_property: expected {table: TABLE, filter: ODATA, set: {...}}");
			return -1;
		}
		bad |= ecw_node_check_keys(v, set_keys, kname, errs) > 0;
		bad |= ecw_jobcfg_table(&s.table, v, "table", true, errs) < 0;
		bad |= ecw_node_string(&s.filter, v, "filter", false, errs) < 0;
		if (!ecw_node_get(v, "set")) {
			ecw_node_error(errs, v, "set_property: missing required key 'set'");
			bad = 1;
		} else {
			bad |= read_set(&s, ecw_node_get(v, "set"), errs) < 0;
		}
		break;
	}
	if (!bad && node_sum(s.sum, kname, v) < 0) {
		ecw_node_error(errs, item, "%s", ecw_error_last()->message);
		bad = 1;
	}
	if (bad) {
		step_dispose(&s);
		return -1;
	}
	if (s.kind == S_RENAME_TABLE) {
		struct step del = {.kind = S_DELETE_TABLE, .pos = pos, .phase = "delete"};
		memcpy(del.sum, s.sum, sizeof(s.sum));
		del.sum[0] = del.sum[0] == 'd' ? 'e' : 'd'; /* a step sum of its own */
		if (!(del.table = strdup(s.table))) {
			step_dispose(&s);
			ecw_node_error(errs, item, "out of memory");
			return -1;
		}
		s.kind = S_COPY_TABLE;
		s.phase = "copy";
		g->steps[g->nsteps++] = s;
		g->steps[g->nsteps++] = del;
		return 0;
	}
	g->steps[g->nsteps++] = s;
	return 0;
}

static int read_migration(struct migration *g, const struct ecw_node *item, struct ecw_node_errors *errs)
{
	static const char *const keys[] = {"id", "version", "description", "steps", NULL};
	const struct ecw_node *steps;
	struct ecw_buf pre;
	int bad = 0;

	if (item->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, item, "a migration is a map {id, version, description, steps}");
		return -1;
	}
	bad |= ecw_node_check_keys(item, keys, "migration", errs) > 0;
	bad |= ecw_node_string(&g->id, item, "id", true, errs) < 0;
	bad |= ecw_node_int(&g->version, item, "version", 1, MAX_VERSION, true, errs) < 0;
	bad |= ecw_node_string(&g->description, item, "description", false, errs) < 0;
	if (g->id && (!*g->id || strlen(g->id) > 200 || ecw_key_check(g->id, "id") < 0)) {
		ecw_node_error(errs, ecw_node_get(item, "id"),
				 "id: 1-200 characters, none of / \\ # ? or control characters");
		bad = 1;
	}
	steps = ecw_node_get(item, "steps");
	if (!steps || steps->kind != ECW_NODE_SEQ || steps->n == 0) {
		ecw_node_error(errs, steps ? steps : item, "migration: steps is a list of one or more steps");
		return -1;
	}
	if (!(g->steps = calloc(2 * steps->n, sizeof(*g->steps)))) {
		ecw_node_error(errs, item, "out of memory");
		return -1;
	}
	g->nlisted = steps->n;
	for (size_t i = 0; i < steps->n; i++)
		bad |= read_step(g, steps->items[i], (int)i + 1, errs) < 0;
	if (bad)
		return -1;
	ecw_buf_init(&pre, 0);
	if (ecw_buf_printf(&pre, "%s%c%lld%c", g->id, 0, g->version, 0) < 0 || node_sum(g->sum, ecw_buf_cstr(&pre), steps) < 0) {
		ecw_node_error(errs, item, "%s", ecw_error_last()->message);
		bad = 1;
	}
	ecw_buf_dispose(&pre);
	return bad ? -1 : 0;
}

int ecw_migrations_parse(struct ecw_migration_set **out, const struct ecw_node *sec,
			 struct ecw_node_errors *errs)
{
	static const char *const keys[] = {"table", "lease", "wait", "list", NULL};
	struct ecw_migration_set *m;
	const struct ecw_node *list;
	int bad = 0;

	*out = NULL;
	if (!sec || is_null(sec))
		return 0;
	if (sec->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, sec, "migrations: expected a map {table, lease, wait, list}");
		return -1;
	}
	if (!(m = calloc(1, sizeof(*m))) || !(m->table = strdup(DEFAULT_TABLE))) {
		free(m);
		ecw_node_error(errs, sec, "out of memory");
		return -1;
	}
	m->lease_ms = 30000;
	m->wait_ms = 120000;
	bad |= ecw_node_check_keys(sec, keys, "migrations", errs) > 0;
	bad |= ecw_jobcfg_table(&m->table, sec, "table", false, errs) < 0;
	bad |= ecw_node_duration(&m->lease_ms, sec, "lease", 1000, 3600000, false, errs) < 0;
	bad |= ecw_node_duration(&m->wait_ms, sec, "wait", 0, 86400000, false, errs) < 0;
	list = ecw_node_get(sec, "list");
	if (!list || list->kind != ECW_NODE_SEQ) {
		ecw_node_error(errs, list ? list : sec, "migrations: list is a list of migrations");
		ecw_migrations_free(m);
		return -1;
	}
	if (list->n && !(m->list = calloc(list->n, sizeof(*m->list)))) {
		ecw_node_error(errs, sec, "out of memory");
		ecw_migrations_free(m);
		return -1;
	}
	for (size_t i = 0; i < list->n; i++) {
		struct migration *g = &m->list[m->n++];
		if (read_migration(g, list->items[i], errs) < 0) {
			bad = 1;
			continue;
		}
		for (size_t k = 0; k + 1 < m->n; k++) {
			const struct migration *p = &m->list[k];
			if (p->id && strcmp(p->id, g->id) == 0) {
				ecw_node_error(errs, ecw_node_get(list->items[i], "id"), "id '%s' appears twice",
						 g->id);
				bad = 1;
			}
		}
		for (size_t k = m->n - 1; k-- > 0;) {
			if (!m->list[k].id)
				continue;
			if (m->list[k].version >= g->version) {
				ecw_node_error(errs, ecw_node_get(list->items[i], "version"),
						 "version %lld must be greater than %lld (of '%s'): versions increase "
						 "strictly in list order",
						 g->version, m->list[k].version, m->list[k].id);
				bad = 1;
			}
			break;
		}
	}
	if (bad) {
		ecw_migrations_free(m);
		return -1;
	}
	*out = m;
	return 0;
}

size_t ecw_migrations_count(const struct ecw_migration_set *m)
{
	return m ? m->n : 0;
}

const char *ecw_migrations_table(const struct ecw_migration_set *m)
{
	return m->table;
}

const char *ecw_migration_id(const struct ecw_migration_set *m, size_t i)
{
	return m->list[i].id;
}

const char *ecw_migration_checksum(const struct ecw_migration_set *m, size_t i)
{
	return m->list[i].sum;
}

/* "copy_table Readings -> TankTelemetry" and the like. */
static int describe_step(struct ecw_buf *out, const struct step *s)
{
	int err;

	if (s->phase)
		return s->kind == S_COPY_TABLE ? ecw_buf_printf(out, "rename_table %s -> %s (copy)", s->table, s->to)
					       : ecw_buf_printf(out, "rename_table (delete %s)", s->table);
	if ((err = ecw_buf_printf(out, "%s %s", kind_names[s->kind], s->table)) < 0)
		return err;
	switch (s->kind) {
	case S_COPY_TABLE:
		return ecw_buf_printf(out, " -> %s", s->to);
	case S_UPSERT_ENTITY:
	case S_INSERT_ENTITY:
		return ecw_buf_printf(out, " (%s, %s)", ecw_entity_pk(s->entity), ecw_entity_rk(s->entity));
	case S_DELETE_ENTITY:
		return ecw_buf_printf(out, " (%s, %s)", s->pk, s->rk);
	case S_DELETE_PARTITION:
		return ecw_buf_printf(out, " (%s)", s->pk);
	case S_SET_PROPERTY:
		if ((err = ecw_buf_printf(out, " where %s:", s->filter ? s->filter : "(all)")) < 0)
			return err;
		for (size_t i = 0; i < ecw_entity_count(s->entity); i++)
			if ((err = ecw_buf_printf(out, " %s", ecw_entity_at(s->entity, i)->name)) < 0)
				return err;
		for (size_t i = 0; i < s->ntmpls; i++)
			if ((err = ecw_buf_printf(out, " %s=\"%s\"", s->tmpls[i].name, ecw_template_text(s->tmpls[i].t))) < 0)
				return err;
		return 0;
	default:
		return 0;
	}
}

int ecw_migration_plan(struct ecw_buf *out, const struct ecw_migration_set *m, size_t i, size_t from)
{
	const struct migration *g = &m->list[i];
	int err;

	if ((err = ecw_buf_printf(out, "%lld %s%s%s\n", g->version, g->id, g->description ? ": " : "",
				  g->description ? g->description : "")) < 0)
		return err;
	for (size_t k = from; k < g->nsteps; k++) {
		if ((err = ecw_buf_printf(out, "  step %d/%zu: ", g->steps[k].pos, g->nlisted)) < 0 ||
		    (err = describe_step(out, &g->steps[k])) < 0 || (err = ecw_buf_adds(out, "\n")) < 0)
			return err;
	}
	return 0;
}

/* ---- the version table ------------------------------------------------------ */

static const char *rec_str(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = e ? ecw_entity_get(e, name) : NULL;

	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

static long long rec_int(const struct ecw_entity *e, const char *name, long long dflt)
{
	const struct ecw_prop *p = e ? ecw_entity_get(e, name) : NULL;

	if (p && p->type == ECW_EDM_INT32)
		return p->v.i32;
	if (p && p->type == ECW_EDM_INT64)
		return p->v.i64;
	return dflt;
}

static bool rec_is(const struct ecw_entity *e, const char *state)
{
	const char *s = rec_str(e, "State");

	return s && strcmp(s, state) == 0;
}

static void rowkey(char out[16], long long version)
{
	snprintf(out, 16, "%010lld", version);
}

/* "2026-08-19T10:00:00.123Z" */
static void iso_now(char out[40])
{
	int64_t ms = ecw_wall_ms();
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	size_t n;

	gmtime_r(&t, &tm);
	n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 40 - n, ".%03dZ", (int)(ms % 1000));
}

/* Every record, or none when the table does not exist yet. */
static int read_records(struct ecw_entity ***out, size_t *n, struct ecw_client *c, const char *table)
{
	struct ecw_query_options qo = {.filter = "PartitionKey eq '" REC_PK "'", .top = 1000};
	struct ecw_table_query *q = NULL;
	struct ecw_entity **v = NULL, *e = NULL;
	size_t cap = 0;
	int err;

	*out = NULL;
	*n = 0;
	if ((err = ecw_table_query_new(&q, c, table, &qo)) < 0)
		return err;
	for (;;) {
		if ((err = ecw_table_query_next(&e, q)) < 0 || !e)
			break;
		if (*n == cap) {
			struct ecw_entity **nv = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof(*v));
			if (!nv) {
				ecw_entity_free(e);
				err = ecw_error_set(ECW_ENOMEM, "out of memory");
				break;
			}
			v = nv;
		}
		v[(*n)++] = e;
	}
	ecw_table_query_free(q);
	if (err == ECW_ENOTFOUND) /* no version table: nothing applied yet */
		err = 0;
	if (err < 0) {
		for (size_t i = 0; i < *n; i++)
			ecw_entity_free(v[i]);
		free(v);
		*n = 0;
		return err;
	}
	*out = v;
	return 0;
}

static void records_free(struct ecw_entity **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(v[i]);
	free(v);
}

static const struct ecw_entity *find_record(struct ecw_entity **v, size_t n, long long version)
{
	char rk[16];

	rowkey(rk, version);
	for (size_t i = 0; i < n; i++)
		if (strcmp(ecw_entity_rk(v[i]), rk) == 0)
			return v[i];
	return NULL;
}

/* ---- applying ------------------------------------------------------------------- */

struct run {
	const struct ecw_migration_set *m;
	const struct migration *g;
	struct ecw_client *c;
	struct ecw_entity *rec;   /* the record as we last wrote it */
	char *etag;               /* its ETag: every write is If-Match on it */
	char owner[300];
	int64_t saved_ms;         /* monotonic time of the last write */
	uint64_t done;            /* entities handled in this step, resumes included */
	struct ecw_progress prog;
	bool progress;
};

static int set_str(struct ecw_entity *e, const char *name, const char *v)
{
	return ecw_entity_set_string(e, name, v, strlen(v));
}

/* Writes the record with If-Match, extending the lease. 412 means another
 * process took the claim over: this one must stop writing. */
static int save(struct run *r)
{
	char *etag = NULL;
	int err;

	if ((err = ecw_entity_set_int64(r->rec, "LeaseUntil", ecw_wall_ms() + r->m->lease_ms)) < 0)
		return err;
	err = ecw_table_write(&etag, r->c, r->m->table, r->rec, ECW_WRITE_UPDATE, r->etag);
	if (err == ECW_EPRECONDITION)
		return ecw_error_set(ECW_EPRECONDITION,
				     "lost the claim on migration %s: its lease ran out and another process took "
				     "it over; stopping",
				     r->g->id);
	if (err < 0)
		return err;
	free(r->etag);
	r->etag = etag;
	r->saved_ms = ecw_now_ms();
	return 0;
}

/* After a batch: records how far the step got, at most every so often (and
 * so extends the lease well before it runs out). */
static int checkpoint(struct run *r, const char *pk, const char *rk)
{
	int64_t every = r->m->lease_ms / 3 < 1000 ? r->m->lease_ms / 3 : 1000;
	int err;

	if (ecw_now_ms() - r->saved_ms < every)
		return 0;
	if (pk && ((err = set_str(r->rec, "CursorPK", pk)) < 0 || (err = set_str(r->rec, "CursorRK", rk)) < 0))
		return err;
	if ((err = ecw_entity_set_int64(r->rec, "Done", (int64_t)r->done)) < 0)
		return err;
	return save(r);
}

static void show(struct run *r, bool final)
{
	ecw_progress_show(&r->prog, r->done, "", final);
}

/* (PartitionKey, RowKey) > cursor, and the step's own filter. */
static int cursor_filter(struct ecw_buf *f, const char *user, const char *pk, const char *rk)
{
	int err = 0;

	if (user && (err = ecw_buf_printf(f, "(%s)%s", user, pk ? " and " : "")) < 0)
		return err;
	if (!pk)
		return 0;
	if ((err = ecw_buf_adds(f, "(PartitionKey gt ")) < 0 || (err = ecw_filter_add_string(f, pk)) < 0 ||
	    (err = ecw_buf_adds(f, " or (PartitionKey eq ")) < 0 || (err = ecw_filter_add_string(f, pk)) < 0 ||
	    (err = ecw_buf_adds(f, " and RowKey gt ")) < 0 || (err = ecw_filter_add_string(f, rk)) < 0)
		return err;
	return ecw_buf_adds(f, "))");
}

enum walk_kind { WALK_COPY, WALK_SET, WALK_DELETE };

/* The entity set_property merges into e: its keys and the configured values. */
static int merge_entity(struct ecw_entity **out, const struct step *s, const struct ecw_entity *e)
{
	struct ecw_buf b;
	int err;

	ecw_buf_init(&b, 64 * 1024);
	if ((err = ecw_entity_new(out, ecw_entity_pk(e), ecw_entity_rk(e))) < 0)
		goto done;
	for (size_t i = 0; i < ecw_entity_count(s->entity); i++)
		if ((err = ecw_entity_set_prop(*out, ecw_entity_at(s->entity, i))) < 0)
			goto done;
	for (size_t i = 0; i < s->ntmpls; i++) {
		ecw_buf_reset(&b);
		if ((err = ecw_template_render(&b, s->tmpls[i].t, e, ECW_TEMPLATE_PLAIN)) < 0 ||
		    (err = ecw_entity_set_string(*out, s->tmpls[i].name, ecw_buf_cstr(&b), b.len)) < 0) {
			err = ecw_error_set(err, "entity (%s, %s): %s", ecw_entity_pk(e), ecw_entity_rk(e),
					    ecw_error_last()->message);
			goto done;
		}
	}
done:
	if (err < 0) {
		ecw_entity_free(*out);
		*out = NULL;
	}
	ecw_buf_dispose(&b);
	return err;
}

/* Writes pending[0..n) (one partition) as one entity group transaction. */
static int flush(struct run *r, const char *table, enum walk_kind kind, struct ecw_entity **pending, size_t *n,
		 bool use_cursor)
{
	static const enum ecw_batch_op ops[] = {ECW_BATCH_INSERT_OR_REPLACE, ECW_BATCH_MERGE, ECW_BATCH_DELETE};
	const char *if_match = kind == WALK_COPY ? NULL : "*";
	struct ecw_batch *b = NULL;
	int err;

	if (*n == 0)
		return 0;
	if ((err = ecw_batch_new(&b, table)) < 0)
		goto done;
	for (size_t i = 0; i < *n; i++)
		if ((err = ecw_batch_add(b, ops[kind], pending[i], if_match)) < 0)
			goto done;
	err = ecw_batch_submit(r->c, b);
	if (err == ECW_ENOTFOUND && kind != WALK_COPY && strcmp(ecw_error_last()->service_code, "TableNotFound") != 0) {
		/* An entity went away since the query read it: one by one,
		 * and what is gone stays gone. */
		err = 0;
		for (size_t i = 0; i < *n && err == 0; i++) {
			if (kind == WALK_DELETE)
				err = ecw_table_delete_if_exists(NULL, r->c, table, ecw_entity_pk(pending[i]),
								 ecw_entity_rk(pending[i]));
			else if ((err = ecw_table_write(NULL, r->c, table, pending[i], ECW_WRITE_MERGE, "*")) ==
				 ECW_ENOTFOUND)
				err = 0;
		}
	}
	if (err < 0)
		goto done;
	r->done += *n;
	ecw_crash_point("migrate.batch");
	err = checkpoint(r, use_cursor ? ecw_entity_pk(pending[*n - 1]) : NULL,
			 use_cursor ? ecw_entity_rk(pending[*n - 1]) : NULL);
	show(r, false);
done:
	for (size_t i = 0; i < *n; i++)
		ecw_entity_free(pending[i]);
	*n = 0;
	ecw_batch_free(b);
	return err;
}

/* Streams src (pages of up to 1000, key order) and writes to dst in batches
 * of one partition and at most 100 operations. */
static int walk(struct run *r, const struct step *s, enum walk_kind kind, const char *src, const char *dst,
		const char *pk_filter)
{
	struct ecw_entity *pending[ECW_BATCH_MAX_OPS];
	struct ecw_query_options qo = {.top = 1000};
	struct ecw_table_query *q = NULL;
	bool use_cursor = kind != WALK_DELETE;
	const char *cpk = use_cursor ? rec_str(r->rec, "CursorPK") : NULL;
	const char *crk = use_cursor ? rec_str(r->rec, "CursorRK") : NULL;
	struct ecw_buf f;
	size_t n = 0;
	int err;

	ecw_buf_init(&f, 0);
	if (!crk)
		cpk = NULL;
	if ((err = cursor_filter(&f, pk_filter ? pk_filter : s->filter, cpk, crk)) < 0)
		goto done;
	qo.filter = f.len ? f.ptr : NULL;
	qo.select = kind == WALK_DELETE ? "PartitionKey,RowKey" : NULL;
	if ((err = ecw_table_query_new(&q, r->c, src, &qo)) < 0)
		goto done;
	for (;;) {
		struct ecw_entity *e = NULL, *w = NULL;
		if ((err = ecw_table_query_next(&e, q)) < 0)
			goto done;
		if (!e)
			break;
		if (n && (n == ECW_BATCH_MAX_OPS || strcmp(ecw_entity_pk(pending[0]), ecw_entity_pk(e)) != 0) &&
		    (err = flush(r, dst, kind, pending, &n, use_cursor)) < 0) {
			ecw_entity_free(e);
			goto done;
		}
		if (kind == WALK_SET) {
			err = merge_entity(&w, s, e);
			ecw_entity_free(e);
			if (err < 0)
				goto done;
			e = w;
		}
		pending[n++] = e;
	}
	err = flush(r, dst, kind, pending, &n, use_cursor);
done:
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(pending[i]);
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return err;
}

/* insert_entity on a retry: our own earlier write is success. */
static int insert_entity(struct run *r, const struct step *s, bool retry)
{
	struct ecw_entity *cur = NULL;
	int err = ecw_table_write(NULL, r->c, s->table, s->entity, ECW_WRITE_INSERT, NULL);

	if (err != ECW_ECONFLICT)
		return err;
	if (!retry)
		return ecw_error_set(ECW_ECONFLICT, "insert_entity: (%s, %s) already exists in %s",
				     ecw_entity_pk(s->entity), ecw_entity_rk(s->entity), s->table);
	if ((err = ecw_table_get(&cur, r->c, s->table, ecw_entity_pk(s->entity), ecw_entity_rk(s->entity))) < 0)
		return err;
	err = ecw_entity_equal(cur, s->entity)
		      ? 0
		      : ecw_error_set(ECW_ECONFLICT, "insert_entity: (%s, %s) already exists in %s with other values",
				      ecw_entity_pk(s->entity), ecw_entity_rk(s->entity), s->table);
	ecw_entity_free(cur);
	return err;
}

static int run_step(struct run *r, const struct step *s, bool retry)
{
	struct ecw_buf f;
	int err;

	switch (s->kind) {
	case S_CREATE_TABLE:
		return ecw_table_create(NULL, r->c, s->table);
	case S_DELETE_TABLE:
		err = ecw_table_delete_table(r->c, s->table);
		return err == ECW_ENOTFOUND ? 0 : err;
	case S_CLEAR_TABLE:
		return walk(r, s, WALK_DELETE, s->table, s->table, NULL);
	case S_COPY_TABLE:
		if ((err = ecw_table_create(NULL, r->c, s->to)) < 0)
			return err;
		return walk(r, s, WALK_COPY, s->table, s->to, NULL);
	case S_UPSERT_ENTITY:
		return ecw_table_write(NULL, r->c, s->table, s->entity, ECW_WRITE_INSERT_OR_REPLACE, NULL);
	case S_INSERT_ENTITY:
		return insert_entity(r, s, retry);
	case S_DELETE_ENTITY:
		return ecw_table_delete_if_exists(NULL, r->c, s->table, s->pk, s->rk);
	case S_DELETE_PARTITION:
		ecw_buf_init(&f, 0);
		if ((err = ecw_buf_adds(&f, "PartitionKey eq ")) >= 0 && (err = ecw_filter_add_string(&f, s->pk)) >= 0)
			err = walk(r, s, WALK_DELETE, s->table, s->table, f.ptr);
		ecw_buf_dispose(&f);
		return err;
	case S_SET_PROPERTY:
		return walk(r, s, WALK_SET, s->table, s->table, NULL);
	case S_RENAME_TABLE:
		break;
	}
	return ecw_error_set(ECW_ERROR, "unexpected step kind %d", (int)s->kind);
}

/* A fresh "running" record for g, owned by r->owner. */
static int new_record(struct ecw_entity **out, const struct run *r)
{
	char rk[16], now[40];
	int err;

	rowkey(rk, r->g->version);
	iso_now(now);
	if ((err = ecw_entity_new(out, REC_PK, rk)) < 0)
		return err;
	if ((err = set_str(*out, "Id", r->g->id)) < 0 || (err = ecw_entity_set_int64(*out, "Version", r->g->version)) < 0 ||
	    (err = set_str(*out, "Description", r->g->description ? r->g->description : "")) < 0 ||
	    (err = set_str(*out, "Checksum", r->g->sum)) < 0 || (err = set_str(*out, "State", "running")) < 0 ||
	    (err = set_str(*out, "Owner", r->owner)) < 0 ||
	    (err = ecw_entity_set_int64(*out, "LeaseUntil", ecw_wall_ms() + r->m->lease_ms)) < 0 ||
	    (err = ecw_entity_set_int32(*out, "Step", 0)) < 0 || (err = ecw_entity_set_int32(*out, "StepTries", 0)) < 0 ||
	    (err = ecw_entity_set_datetime(*out, "StartedAt", now)) < 0) {
		ecw_entity_free(*out);
		*out = NULL;
	}
	return err;
}

enum claim { CLAIMED, ALREADY_APPLIED };

/* Claims r->g: inserts its record, or takes over a failed one or one whose
 * lease ran out; waits (up to migrations.wait) while another process holds a
 * live claim. On return with CLAIMED, r->rec and r->etag are ours. */
static int claim(enum claim *out, struct run *r)
{
	const struct migration *g = r->g;
	int64_t deadline = ecw_now_ms() + r->m->wait_ms;
	bool told = false;
	char rk[16];
	int err;

	rowkey(rk, g->version);
	for (;;) {
		struct ecw_entity *e = NULL;
		char *etag = NULL;

		if ((err = ecw_table_get(&e, r->c, r->m->table, REC_PK, rk)) == ECW_ENOTFOUND) {
			if (strcmp(ecw_error_last()->service_code, "TableNotFound") == 0) {
				if ((err = ecw_table_create(NULL, r->c, r->m->table)) < 0)
					return err;
				continue;
			}
			if ((err = new_record(&e, r)) < 0)
				return err;
			err = ecw_table_write(&etag, r->c, r->m->table, e, ECW_WRITE_INSERT, NULL);
			if (err == ECW_ECONFLICT) { /* another process claimed it first */
				ecw_entity_free(e);
				continue;
			}
			if (err < 0) {
				ecw_entity_free(e);
				return err;
			}
			r->rec = e;
			r->etag = etag;
			r->saved_ms = ecw_now_ms();
			*out = CLAIMED;
			return 0;
		}
		if (err < 0)
			return err;
		if (rec_is(e, "applied")) {
			const char *sum = rec_str(e, "Checksum");
			err = sum && strcmp(sum, g->sum) != 0
				      ? ecw_error_set(ECW_EINVALID, "migration %s was applied with another definition", g->id)
				      : 0;
			ecw_entity_free(e);
			*out = ALREADY_APPLIED;
			return err;
		}
		if (rec_is(e, "running") && rec_int(e, "LeaseUntil", 0) > ecw_wall_ms()) {
			const char *owner = rec_str(e, "Owner");
			if (ecw_now_ms() >= deadline) {
				err = ecw_error_set(ECW_EBUSY,
						    "migration %s is being applied by %s; gave up after waiting %lld s "
						    "(migrations.wait)",
						    g->id, owner ? owner : "another process", (long long)(r->m->wait_ms / 1000));
				ecw_entity_free(e);
				return err;
			}
			if (!told) {
				printf("%s: being applied by %s; waiting for it (up to %lld s)\n", g->id,
				       owner ? owner : "another process", (long long)(r->m->wait_ms / 1000));
				fflush(stdout);
				told = true;
			}
			ecw_entity_free(e);
			ecw_sleep_ms(r->m->lease_ms / 4 < 1000 ? r->m->lease_ms / 4 : 1000);
			continue;
		}
		/* Failed, or running with its lease run out (the owner died):
		 * take it over, keeping its progress. */
		const char *prev = rec_str(e, "Owner");
		bool was_running = rec_is(e, "running");
		char prev_owner[300];
		snprintf(prev_owner, sizeof(prev_owner), "%s", prev ? prev : "?");
		if ((err = set_str(e, "State", "running")) < 0 || (err = set_str(e, "Owner", r->owner)) < 0 ||
		    (err = ecw_entity_set_int64(e, "LeaseUntil", ecw_wall_ms() + r->m->lease_ms)) < 0) {
			ecw_entity_free(e);
			return err;
		}
		ecw_entity_remove(e, "Error");
		ecw_entity_remove(e, "FailedStep");
		err = ecw_table_write(&etag, r->c, r->m->table, e, ECW_WRITE_UPDATE, ecw_entity_etag(e));
		if (err == ECW_EPRECONDITION) { /* someone else took it: look again */
			ecw_entity_free(e);
			continue;
		}
		if (err < 0) {
			ecw_entity_free(e);
			return err;
		}
		printf("%s: %s (step %lld was in progress)\n", g->id,
		       was_running ? "taking over from a claim whose lease expired" : "resuming after a failed attempt",
		       rec_int(e, "Step", 0) + 1);
		if (was_running)
			printf("%s: the previous owner was %s\n", g->id, prev_owner);
		r->rec = e;
		r->etag = etag;
		r->saved_ms = ecw_now_ms();
		*out = CLAIMED;
		return 0;
	}
}

/* Records the failure of step k (best effort: the error reported is the
 * step's either way). */
static void record_failure(struct run *r, const struct step *s, const char *msg)
{
	struct ecw_error step_err = *ecw_error_last();

	if (set_str(r->rec, "State", "failed") < 0 || set_str(r->rec, "Error", msg) < 0 ||
	    ecw_entity_set_int32(r->rec, "FailedStep", s->pos) < 0 || save(r) < 0)
		fprintf(stderr, "migrate: %s: could not record the failure: %s\n", r->g->id, ecw_error_last()->message);
	/* Keep the step's error as the last one. */
	ecw_error_set_http(step_err.code, step_err.http_status, step_err.service_code, step_err.request_id, "%s",
			   step_err.message);
}

/* Applies r->g from the recorded step on. */
static int apply_steps(struct run *r)
{
	const struct migration *g = r->g;
	size_t from = (size_t)rec_int(r->rec, "Step", 0);
	struct ecw_buf what;
	int err = 0;

	ecw_buf_init(&what, 0);
	if (from > g->nsteps)
		from = 0;
	if (rec_str(r->rec, "Checksum") && strcmp(rec_str(r->rec, "Checksum"), g->sum) != 0) {
		printf("%s: the definition changed since the last attempt; steps before step %d stay as they are\n",
		       g->id, from < g->nsteps ? g->steps[from].pos : g->steps[g->nsteps - 1].pos);
		if ((err = set_str(r->rec, "Checksum", g->sum)) < 0)
			goto done;
	}
	for (size_t k = from; k < g->nsteps; k++) {
		const struct step *s = &g->steps[k];
		const char *ssum = rec_str(r->rec, "StepSum");
		long long tries;
		bool same = (size_t)rec_int(r->rec, "Step", 0) == k && ssum && strcmp(ssum, s->sum) == 0;

		ecw_buf_reset(&what);
		if ((err = describe_step(&what, s)) < 0)
			goto done;
		if (!same) {
			ecw_entity_remove(r->rec, "CursorPK");
			ecw_entity_remove(r->rec, "CursorRK");
			if ((err = ecw_entity_set_int32(r->rec, "Step", (int32_t)k)) < 0 ||
			    (err = ecw_entity_set_int32(r->rec, "StepTries", 0)) < 0 ||
			    (err = ecw_entity_set_int64(r->rec, "Done", 0)) < 0 || (err = set_str(r->rec, "StepSum", s->sum)) < 0)
				goto done;
		}
		tries = rec_int(r->rec, "StepTries", 0);
		r->done = (uint64_t)rec_int(r->rec, "Done", 0);
		if ((err = ecw_entity_set_int32(r->rec, "StepTries", (int32_t)(tries + 1))) < 0 || (err = save(r)) < 0)
			goto done;
		if (rec_str(r->rec, "CursorRK"))
			printf("%s: step %d/%zu %s: resuming after (%s, %s), %llu entities done before\n", g->id, s->pos,
			       g->nlisted, ecw_buf_cstr(&what), rec_str(r->rec, "CursorPK"), rec_str(r->rec, "CursorRK"),
			       (unsigned long long)r->done);
		fflush(stdout);
		ecw_crash_point("migrate.step");
		ecw_progress_init(&r->prog, ecw_buf_cstr(&what), r->progress, 0);
		err = run_step(r, s, tries > 0);
		if (s->kind == S_COPY_TABLE || s->kind == S_SET_PROPERTY || s->kind == S_CLEAR_TABLE ||
		    s->kind == S_DELETE_PARTITION)
			show(r, true);
		if (err < 0) {
			char msg[700];
			if (err == ECW_EPRECONDITION && strstr(ecw_error_last()->message, "lost the claim"))
				goto done; /* not ours to record any more */
			snprintf(msg, sizeof(msg), "step %d/%zu (%s): %s", s->pos, g->nlisted, ecw_buf_cstr(&what),
				 ecw_error_last()->message);
			record_failure(r, s, msg);
			ecw_error_set_http(err, ecw_error_last()->http_status, ecw_error_last()->service_code,
					   ecw_error_last()->request_id, "%s", msg);
			goto done;
		}
		if (s->kind == S_COPY_TABLE || s->kind == S_SET_PROPERTY || s->kind == S_CLEAR_TABLE ||
		    s->kind == S_DELETE_PARTITION)
			printf("%s: step %d/%zu %s: done (%llu entities)\n", g->id, s->pos, g->nlisted, ecw_buf_cstr(&what),
			       (unsigned long long)r->done);
		else
			printf("%s: step %d/%zu %s: done\n", g->id, s->pos, g->nlisted, ecw_buf_cstr(&what));
		fflush(stdout);
	}
	/* Applied: the record says so, with when and by whom. */
	char now[40];
	iso_now(now);
	ecw_entity_remove(r->rec, "CursorPK");
	ecw_entity_remove(r->rec, "CursorRK");
	if ((err = set_str(r->rec, "State", "applied")) < 0 || (err = ecw_entity_set_datetime(r->rec, "AppliedAt", now)) < 0 ||
	    (err = set_str(r->rec, "AppliedBy", r->owner)) < 0 || (err = ecw_entity_set_int32(r->rec, "Step", (int32_t)g->nsteps)) < 0 ||
	    (err = save(r)) < 0)
		goto done;
	ecw_crash_point("migrate.applied");
done:
	ecw_buf_dispose(&what);
	return err;
}

/* ---- the commands ------------------------------------------------------------------ */

static void owner_name(char *out, size_t cap)
{
	char host[256] = "";

	if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
		snprintf(host, sizeof(host), "unknown-host");
	snprintf(out, cap, "%s pid %ld", host, (long)getpid());
}

/* Refuses what must not be applied: an applied migration whose definition
 * changed, or a pending one older than an applied one. Prints why. */
static int check_history(const struct ecw_migration_set *m, struct ecw_entity **recs, size_t n)
{
	long long newest_applied = 0;
	const char *newest_id = NULL;
	int bad = 0;

	for (size_t i = 0; i < m->n; i++) {
		const struct ecw_entity *e = find_record(recs, n, m->list[i].version);
		const char *sum = rec_str(e, "Checksum");
		if (e && rec_is(e, "applied")) {
			if (sum && strcmp(sum, m->list[i].sum) != 0) {
				fprintf(stderr,
					"migrate: %s (version %lld) was applied with another definition (checksum %.12s, "
					"now %.12s): restore it as it was and put the change in a new migration\n",
					m->list[i].id, m->list[i].version, sum, m->list[i].sum);
				bad = 1;
			}
			newest_applied = m->list[i].version;
			newest_id = m->list[i].id;
		}
	}
	for (size_t i = 0; i < m->n; i++) {
		const struct ecw_entity *e = find_record(recs, n, m->list[i].version);
		if ((!e || !rec_is(e, "applied")) && m->list[i].version < newest_applied) {
			fprintf(stderr,
				"migrate: %s (version %lld) is not applied but %s (version %lld) is: a migration must "
				"come after every applied one (give it a higher version)\n",
				m->list[i].id, m->list[i].version, newest_id, newest_applied);
			bad = 1;
		}
	}
	for (size_t k = 0; k < n; k++) {
		long long v = rec_int(recs[k], "Version", -1);
		size_t i;
		for (i = 0; i < m->n && m->list[i].version != v; i++)
			;
		if (i == m->n)
			fprintf(stderr, "migrate: warning: the version table records %s (version %lld), which the "
					"configuration no longer lists\n",
				rec_str(recs[k], "Id") ? rec_str(recs[k], "Id") : "?", v);
	}
	return bad ? ecw_error_set(ECW_EINVALID, "refusing to migrate (see above)") : 0;
}

static int migrate_status(int argc, char **argv);

int ecw_cmd_migrate(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker migrate [-c FILE] [--dry-run]\n"
		"       ecworker migrate status [-c FILE]\n\n"
		"Applies the configuration's pending migrations (migrations.list) in version\n"
		"order, each once per environment, recording them in the version table\n"
		"(migrations.table, default EcwMigrations). Stops at the first failing step;\n"
		"the next run resumes there. A migration another process is applying is\n"
		"waited for (up to migrations.wait), then taken over if its lease ran out.\n"
		"`migrate status` lists every migration and its state, and changes nothing.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"  -n, --dry-run       print the pending migrations and their steps; write nothing\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 all applied (or shown), 1 a migration failed or storage could\n"
		"not be read, 2 usage or configuration error.\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
		{"dry-run", no_argument, NULL, 'n'}, {NULL, 0, NULL, 0},
	};
	const char *path = NULL;
	bool dry = false;
	struct ecw_config *cfg = NULL;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_entity **recs = NULL;
	size_t nrecs = 0, applied = 0, already = 0;
	const struct ecw_migration_set *m;
	struct run r;
	int ch, rc = EXIT_USAGE;

	if (argc >= 2 && strcmp(argv[1], "status") == 0)
		return migrate_status(argc - 1, argv + 1);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:hn", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'n': dry = true; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "migrate: unexpected argument '%s'\n", argv[optind]);
		fputs(help, stderr);
		return EXIT_USAGE;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		return EXIT_USAGE;
	if (!(m = cfg->migrations) || m->n == 0) {
		printf("%s: no migrations configured (migrations.list)\n", cfg->file);
		rc = 0;
		goto done;
	}
	ecw_log_setup(cfg->log.level, cfg->log.format);
	rc = 1;
	if (ecw_connect(&acct, &c, cfg) < 0 || read_records(&recs, &nrecs, c, m->table) < 0) {
		fprintf(stderr, "migrate: %s\n", ecw_error_last()->message);
		goto done;
	}
	if (check_history(m, recs, nrecs) < 0)
		goto done;
	if (dry) {
		struct ecw_buf plan;
		size_t pending = 0;
		ecw_buf_init(&plan, 0);
		for (size_t i = 0; i < m->n; i++) {
			const struct ecw_entity *e = find_record(recs, nrecs, m->list[i].version);
			size_t from = e ? (size_t)rec_int(e, "Step", 0) : 0;
			if (e && rec_is(e, "applied"))
				continue;
			if (from >= m->list[i].nsteps)
				from = 0;
			pending++;
			if (e && ecw_buf_printf(&plan, "(%s, resumes at step %d)\n", rec_str(e, "State") ? rec_str(e, "State") : "?",
						m->list[i].steps[from].pos) < 0)
				break;
			if (ecw_migration_plan(&plan, m, i, from) < 0)
				break;
		}
		printf("dry run: %zu of %zu migration%s pending in %s; nothing written\n%s", pending, m->n,
		       m->n == 1 ? "" : "s", m->table, ecw_buf_cstr(&plan));
		ecw_buf_dispose(&plan);
		rc = 0;
		goto done;
	}
	memset(&r, 0, sizeof(r));
	r.m = m;
	r.c = c;
	r.progress = isatty(2);
	owner_name(r.owner, sizeof(r.owner));
	for (size_t i = 0; i < m->n; i++) {
		const struct ecw_entity *e = find_record(recs, nrecs, m->list[i].version);
		enum claim how;
		int err;

		if (e && rec_is(e, "applied")) {
			already++;
			continue;
		}
		r.g = &m->list[i];
		if ((err = claim(&how, &r)) < 0) {
			fprintf(stderr, "migrate: %s (version %lld): %s\n", r.g->id, r.g->version, ecw_error_last()->message);
			goto done;
		}
		if (how == ALREADY_APPLIED) {
			printf("%s: applied by another process\n", r.g->id);
			already++;
			continue;
		}
		printf("%s: applying (version %lld, %zu step%s)\n", r.g->id, r.g->version, r.g->nlisted,
		       r.g->nlisted == 1 ? "" : "s");
		err = apply_steps(&r);
		ecw_entity_free(r.rec);
		free(r.etag);
		r.rec = NULL;
		r.etag = NULL;
		if (err < 0) {
			fprintf(stderr, "migrate: %s (version %lld) failed: %s\n", r.g->id, r.g->version,
				ecw_error_last()->message);
			if (i + 1 < m->n)
				fprintf(stderr, "migrate: %zu later migration%s not attempted; fix the cause and run migrate "
						"again: it resumes at that step\n",
					m->n - i - 1, m->n - i - 1 == 1 ? "" : "s");
			goto done;
		}
		printf("%s: applied\n", r.g->id);
		applied++;
	}
	printf("migrate: %zu applied now, %zu already applied, %zu in all\n", applied, already, m->n);
	rc = 0;
done:
	records_free(recs, nrecs);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}

/* One line of status for migration g (or, g NULL, a record the
 * configuration no longer lists). */
static int state_line(struct ecw_buf *out, const struct migration *g, const struct ecw_entity *e)
{
	const char *st = rec_str(e, "State");
	char left[32];

	if (!e)
		return ecw_buf_adds(out, "pending");
	if (!st)
		return ecw_buf_adds(out, "unknown (the record has no State)");
	if (strcmp(st, "applied") == 0) {
		const struct ecw_prop *at = ecw_entity_get(e, "AppliedAt");
		if (ecw_buf_printf(out, "applied %s by %s", at && at->type == ECW_EDM_DATETIME ? at->v.s : "?",
				   rec_str(e, "AppliedBy") ? rec_str(e, "AppliedBy") : "?") < 0)
			return ECW_ENOMEM;
	} else if (strcmp(st, "failed") == 0) {
		if (ecw_buf_printf(out, "failed at step %lld: %s", rec_int(e, "FailedStep", 0),
				   rec_str(e, "Error") ? rec_str(e, "Error") : "?") < 0)
			return ECW_ENOMEM;
	} else {
		long long step = rec_int(e, "Step", 0);
		int64_t lease = rec_int(e, "LeaseUntil", 0) - ecw_wall_ms();
		ecw_human_age(left, sizeof(left), (lease < 0 ? -lease : lease) / 1000);
		if (ecw_buf_printf(out, "running by %s, at step %lld, %lld entities done in it (%s %s%s)",
				   rec_str(e, "Owner") ? rec_str(e, "Owner") : "?",
				   g && step >= 0 && (size_t)step < g->nsteps ? (long long)g->steps[step].pos : step + 1,
				   rec_int(e, "Done", 0), lease > 0 ? "lease ends in" : "lease expired",
				   left, lease > 0 ? "" : " ago: the next migrate takes over") < 0)
			return ECW_ENOMEM;
	}
	if (g && rec_str(e, "Checksum") && strcmp(rec_str(e, "Checksum"), g->sum) != 0 &&
	    ecw_buf_adds(out, " [definition changed since]") < 0)
		return ECW_ENOMEM;
	return 0;
}

static int migrate_status(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker migrate status [-c FILE]\n\n"
		"Lists each migration once, in version order: applied (when and by whom),\n"
		"pending, running (by whom, at which step, the lease) or failed (at which step,\n"
		"the error). Reads the version table; creates and changes nothing.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 shown, 1 storage could not be read, 2 usage.\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
	};
	const char *path = NULL;
	struct ecw_config *cfg = NULL;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_entity **recs = NULL;
	size_t nrecs = 0;
	const struct ecw_migration_set *m;
	struct ecw_buf line;
	int ch, rc = EXIT_USAGE;

	ecw_buf_init(&line, 0);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "migrate status: unexpected argument '%s'\n", argv[optind]);
		fputs(help, stderr);
		return EXIT_USAGE;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		return EXIT_USAGE;
	if (!(m = cfg->migrations)) {
		printf("%s: no migrations configured (migrations.list)\n", cfg->file);
		rc = 0;
		goto done;
	}
	rc = 1;
	if (ecw_connect(&acct, &c, cfg) < 0 || read_records(&recs, &nrecs, c, m->table) < 0) {
		fprintf(stderr, "migrate status: %s\n", ecw_error_last()->message);
		goto done;
	}
	printf("%-10s %-30s %s\n", "VERSION", "ID", "STATE");
	for (size_t i = 0; i < m->n; i++) {
		ecw_buf_reset(&line);
		if (state_line(&line, &m->list[i], find_record(recs, nrecs, m->list[i].version)) < 0)
			goto done;
		printf("%-10lld %-30s %s\n", m->list[i].version, m->list[i].id, ecw_buf_cstr(&line));
	}
	for (size_t k = 0; k < nrecs; k++) {
		long long v = rec_int(recs[k], "Version", -1);
		size_t i;
		for (i = 0; i < m->n && m->list[i].version != v; i++)
			;
		if (i < m->n)
			continue;
		ecw_buf_reset(&line);
		if (state_line(&line, NULL, recs[k]) < 0)
			goto done;
		printf("%-10lld %-30s %s (not in the configuration)\n", v, rec_str(recs[k], "Id") ? rec_str(recs[k], "Id") : "?",
		       ecw_buf_cstr(&line));
	}
	rc = 0;
done:
	ecw_buf_dispose(&line);
	records_free(recs, nrecs);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}
