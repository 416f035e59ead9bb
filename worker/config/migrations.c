/* SPDX-License-Identifier: MIT */
/* migrations.c - the `migrations:` section of the configuration (see
 * ecw_config.h): its checks, each definition's checksum, and the parsed set
 * the migrations room applies (worker/migrate/: the plan's text and
 * migrate_apply.c; `ecworker migrate` is worker/cmd/migrate.c).
 *
 * A migration is an id, a version (versions increase strictly in list order)
 * and a list of steps, each a map with one key, its kind. Table names, keys
 * and values are checked here, before anything is applied. rename_table
 * becomes two steps, copy_table then delete_table, each with a checksum of
 * its own. set_property's string values are templates over the entity; one
 * that reads a property the same step sets is refused (a rerun of a batch
 * after a crash would apply it twice).
 *
 * A migration's checksum covers its id, version and steps as written (a
 * canonical text of the nodes, quoting included), not its description: the
 * version table records it, and an applied migration whose steps changed is
 * refused. Each step has a checksum too, so a rerun knows whether the step
 * recorded as in progress is still the same one. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_codec.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "ecw_node.h"
#include "ecw_template.h"

#define DEFAULT_TABLE "EcwMigrations"
#define MAX_VERSION 2147483647LL

static const char *const kind_names[] = {
	"create_table",  "delete_table",  "clear_table",   "copy_table",       "rename_table",
	"upsert_entity", "insert_entity", "delete_entity", "delete_partition", "set_property",
};

const char *ecw_migrations_step_name(enum ecw_migration_step_kind kind)
{
	return (size_t)kind < sizeof(kind_names) / sizeof(kind_names[0]) ? kind_names[kind] : "?";
}

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

static void step_dispose(struct ecw_migration_step *s)
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
		struct ecw_migration *g = &m->list[i];
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
				return ecw_error_set(ECW_EINVALID, "%s: %s is out of the range of Edm.Int32",
						     name, v);
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
	return ecw_error_set(
		ECW_EINVALID,
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
		ecw_node_error(errs, v, "%s: a property value is a scalar or {type, value}, not a list",
			       name);
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

static int read_set(struct ecw_migration_step *s, const struct ecw_node *set, struct ecw_node_errors *errs)
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
			ecw_node_error(errs, set->keys[i],
				       "set_property: keys cannot be set (copy the table instead)");
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
		struct ecw_migration_template *tp = &s->tmpls[s->ntmpls];
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
				ecw_node_error(
					errs, ecw_node_get(set, s->tmpls[i].name),
					"set_property: %s reads {%s}, which the same step sets; a rerun after a "
					"crash would apply it twice (split it into two steps)",
					s->tmpls[i].name, set->keys[k]->value);
				bad = 1;
			}
	return bad ? -1 : 0;
}

static int check_key(const char *key, const char *what, const struct ecw_node *at,
		     struct ecw_node_errors *errs)
{
	if (ecw_entity_key_check(key, what) < 0) {
		ecw_node_error(errs, at, "%s", ecw_error_last()->message);
		return -1;
	}
	return 0;
}

/* One item of steps: a map with one key, the step's kind. Appends one step
 * (two for rename_table) to g. */
static int read_step(struct ecw_migration *g, const struct ecw_node *item, int pos,
		     struct ecw_node_errors *errs)
{
	static const char *const copy_keys[] = {"from", "to", NULL};
	static const char *const entity_keys[] = {"table", "entity", NULL};
	static const char *const delent_keys[] = {"table", "pk", "rk", NULL};
	static const char *const delpart_keys[] = {"table", "pk", NULL};
	static const char *const set_keys[] = {"table", "filter", "set", NULL};
	struct ecw_migration_step s = {.pos = pos};
	const struct ecw_node *v;
	const char *kname;
	size_t k;
	int bad = 0;

	if (item->kind != ECW_NODE_MAP || item->n != 1) {
		ecw_node_error(
			errs, item,
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
	s.kind = (enum ecw_migration_step_kind)k;
	switch (s.kind) {
	case ECW_MIGRATION_CREATE_TABLE:
	case ECW_MIGRATION_DELETE_TABLE:
	case ECW_MIGRATION_CLEAR_TABLE:
		bad |= ecw_job_setting_table(&s.table, item, kname, true, errs) < 0;
		break;
	case ECW_MIGRATION_COPY_TABLE:
	case ECW_MIGRATION_RENAME_TABLE:
		if (v->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, v, "%s: expected {from: TABLE, to: TABLE}", kname);
			return -1;
		}
		bad |= ecw_node_check_keys(v, copy_keys, kname, errs) > 0;
		bad |= ecw_job_setting_table(&s.table, v, "from", true, errs) < 0;
		bad |= ecw_job_setting_table(&s.to, v, "to", true, errs) < 0;
		if (!bad && strcmp(s.table, s.to) == 0) {
			ecw_node_error(errs, v, "%s: from and to name the same table", kname);
			bad = 1;
		}
		break;
	case ECW_MIGRATION_UPSERT_ENTITY:
	case ECW_MIGRATION_INSERT_ENTITY:
		if (v->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, v, "%s: expected {table: TABLE, entity: {...}}", kname);
			return -1;
		}
		bad |= ecw_node_check_keys(v, entity_keys, kname, errs) > 0;
		bad |= ecw_job_setting_table(&s.table, v, "table", true, errs) < 0;
		if (!ecw_node_get(v, "entity")) {
			ecw_node_error(errs, v, "%s: missing required key 'entity'", kname);
			bad = 1;
		} else {
			bad |= read_entity(&s.entity, ecw_node_get(v, "entity"), errs) < 0;
		}
		break;
	case ECW_MIGRATION_DELETE_ENTITY:
	case ECW_MIGRATION_DELETE_PARTITION:
		if (v->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, v, "%s: expected {table: TABLE, pk: KEY%s}", kname,
				       s.kind == ECW_MIGRATION_DELETE_ENTITY ? ", rk: KEY" : "");
			return -1;
		}
		bad |= ecw_node_check_keys(v,
					   s.kind == ECW_MIGRATION_DELETE_ENTITY ? delent_keys : delpart_keys,
					   kname, errs) > 0;
		bad |= ecw_job_setting_table(&s.table, v, "table", true, errs) < 0;
		bad |= ecw_node_string(&s.pk, v, "pk", true, errs) < 0;
		if (s.pk)
			bad |= check_key(s.pk, "pk", ecw_node_get(v, "pk"), errs) < 0;
		if (s.kind == ECW_MIGRATION_DELETE_ENTITY) {
			bad |= ecw_node_string(&s.rk, v, "rk", true, errs) < 0;
			if (s.rk)
				bad |= check_key(s.rk, "rk", ecw_node_get(v, "rk"), errs) < 0;
		}
		break;
	case ECW_MIGRATION_SET_PROPERTY:
		if (v->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, v,
				       "set_property: expected {table: TABLE, filter: ODATA, set: {...}}");
			return -1;
		}
		bad |= ecw_node_check_keys(v, set_keys, kname, errs) > 0;
		bad |= ecw_job_setting_table(&s.table, v, "table", true, errs) < 0;
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
	if (s.kind == ECW_MIGRATION_RENAME_TABLE) {
		struct ecw_migration_step del = {
			.kind = ECW_MIGRATION_DELETE_TABLE, .pos = pos, .phase = "delete"};
		memcpy(del.sum, s.sum, sizeof(s.sum));
		del.sum[0] = del.sum[0] == 'd' ? 'e' : 'd'; /* a step sum of its own */
		if (!(del.table = strdup(s.table))) {
			step_dispose(&s);
			ecw_node_error(errs, item, "out of memory");
			return -1;
		}
		s.kind = ECW_MIGRATION_COPY_TABLE;
		s.phase = "copy";
		g->steps[g->nsteps++] = s;
		g->steps[g->nsteps++] = del;
		return 0;
	}
	g->steps[g->nsteps++] = s;
	return 0;
}

static int read_migration(struct ecw_migration *g, const struct ecw_node *item, struct ecw_node_errors *errs)
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
	if (g->id && (!*g->id || strlen(g->id) > 200 || ecw_entity_key_check(g->id, "id") < 0)) {
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
	if (ecw_buf_printf(&pre, "%s%c%lld%c", g->id, 0, g->version, 0) < 0 ||
	    node_sum(g->sum, ecw_buf_cstr(&pre), steps) < 0) {
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
	bad |= ecw_job_setting_table(&m->table, sec, "table", false, errs) < 0;
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
		struct ecw_migration *g = &m->list[m->n++];
		if (read_migration(g, list->items[i], errs) < 0) {
			bad = 1;
			continue;
		}
		for (size_t k = 0; k + 1 < m->n; k++) {
			const struct ecw_migration *p = &m->list[k];
			if (p->id && strcmp(p->id, g->id) == 0) {
				ecw_node_error(errs, ecw_node_get(list->items[i], "id"),
					       "id '%s' appears twice", g->id);
				bad = 1;
			}
		}
		for (size_t k = m->n - 1; k-- > 0;) {
			if (!m->list[k].id)
				continue;
			if (m->list[k].version >= g->version) {
				ecw_node_error(
					errs, ecw_node_get(list->items[i], "version"),
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

const char *ecw_migrations_id(const struct ecw_migration_set *m, size_t i)
{
	return m->list[i].id;
}

const char *ecw_migrations_checksum(const struct ecw_migration_set *m, size_t i)
{
	return m->list[i].sum;
}
