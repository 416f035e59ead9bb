/* SPDX-License-Identifier: MIT */
/* mixed_judge.c - the judge of the mixed-workload scenario (mixed.c runs it; mixed_private.h): the end
 * state against a full recomputation from the SOURCE tables alone (Employees, EmployeesArchive,
 * Customers): the whole index table (email entries with their copied properties, the lists' sorted Keys
 * and Count, both jobs' back-references; nothing missing, nothing extra, nothing of an archived
 * employee), every employee in exactly one of the two tables with every property and EDM type intact,
 * every order's copies equal to its customer's current values (cleared for deleted customers), the
 * orders' own properties untouched. Every difference is collected and reported at once (the first 40).
 * (By design this cannot see an application change that a move lost: the source tables are the judge.) */
#include "itest.h"
#include "mixed_private.h"

#include <json-c/json.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the recomputation ----------------------------------------------------------------------- */

static struct ecw_entity **all_entities(size_t *n, struct mx *x, const char *table)
{
	return itest_query_all(n, x->c, table, NULL);
}

static const struct ecw_entity *find_entity(struct ecw_entity **v, size_t n, const char *pk, const char *rk)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ecw_entity_pk(v[i]), pk) == 0 && strcmp(ecw_entity_rk(v[i]), rk) == 0)
			return v[i];
	return NULL;
}

/* The hex SHA-256 of "pk NUL rk": the RowKey of both jobs' refs. */
static void ref_hash(char out[65], const char *pk, const char *rk)
{
	size_t a = strlen(pk), b = strlen(rk);
	unsigned char *in = malloc(a + b + 1), md[SHA256_DIGEST_LENGTH];

	assert_non_null(in);
	memcpy(in, pk, a + 1);
	memcpy(in + a + 1, rk, b);
	SHA256(in, a + b + 1, md);
	free(in);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* Differences, collected so that one failure shows them all. */
struct report {
	char text[12000];
	size_t len;
	int n;
};

static void ECW_PRINTF(2, 3) diff(struct report *r, const char *fmt, ...)
{
	va_list ap;

	if (r->n++ >= 40 || r->len >= sizeof(r->text) - 2)
		return;
	r->text[r->len++] = '\n';
	r->text[r->len] = '\0';
	va_start(ap, fmt);
	int k = vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
	va_end(ap);
	if (k > 0)
		r->len += (size_t)k < sizeof(r->text) - r->len ? (size_t)k : sizeof(r->text) - r->len - 1;
}

/* Where a source is now, for the messages. */
static const char *whereabouts(const struct state *s, const char *pk, const char *rk)
{
	if (find_entity(s->emp, s->nemp, pk, rk))
		return "in Employees";
	if (find_entity(s->arch, s->narch, pk, rk))
		return "ARCHIVED";
	return "in neither table";
}

/* A list's Keys: JSON pairs, strictly sorted, Count equal to their number,
 * never empty. Returns the pairs (caller puts) or NULL after a diff. */
static struct json_object *parse_keys(struct report *r, const struct ecw_entity *list)
{
	const char *keys = mx_strp(list, "Keys");
	const struct ecw_prop *count = ecw_entity_get(list, "Count");
	const char *lrk = ecw_entity_rk(list);
	struct json_object *arr;

	if (!keys || !count || count->type != ECW_EDM_INT32 || ecw_entity_count(list) != 2) {
		diff(r, "list %s: not {Keys: String, Count: Int32}: %s", lrk, itest_entity_json(list));
		return NULL;
	}
	arr = json_tokener_parse(keys);
	if (!arr || !json_object_is_type(arr, json_type_array)) {
		diff(r, "list %s: Keys is not a JSON array: %.300s", lrk, keys);
		json_object_put(arr);
		return NULL;
	}
	size_t n = json_object_array_length(arr);
	if (n == 0)
		diff(r, "list %s is empty: an emptied list must be deleted", lrk);
	if ((size_t)count->v.i32 != n)
		diff(r, "list %s: Count %d, Keys holds %zu", lrk, count->v.i32, n);
	for (size_t i = 0; i < n; i++) {
		struct json_object *pr = json_object_array_get_idx(arr, i);
		if (!json_object_is_type(pr, json_type_array) || json_object_array_length(pr) != 2 ||
		    !json_object_is_type(json_object_array_get_idx(pr, 0), json_type_string) ||
		    !json_object_is_type(json_object_array_get_idx(pr, 1), json_type_string)) {
			diff(r, "list %s: item %zu is not a [pk, rk] pair: %.300s", lrk, i, keys);
			json_object_put(arr);
			return NULL;
		}
		if (i) {
			struct json_object *q = json_object_array_get_idx(arr, i - 1);
			int c = strcmp(json_object_get_string(json_object_array_get_idx(q, 0)),
			               json_object_get_string(json_object_array_get_idx(pr, 0)));
			if (c == 0)
				c = strcmp(json_object_get_string(json_object_array_get_idx(q, 1)),
				           json_object_get_string(json_object_array_get_idx(pr, 1)));
			if (c >= 0)
				diff(r, "list %s: not strictly sorted at item %zu: %.300s", lrk, i, keys);
		}
	}
	return arr;
}

/* True when the list's pairs hold (pk, rk). */
static bool pairs_have(struct json_object *arr, const char *pk, const char *rk)
{
	for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
		struct json_object *pr = json_object_array_get_idx(arr, i);
		if (strcmp(json_object_get_string(json_object_array_get_idx(pr, 0)), pk) == 0 &&
		    strcmp(json_object_get_string(json_object_array_get_idx(pr, 1)), rk) == 0)
			return true;
	}
	return false;
}

/* The whole end state against a recomputation from the source tables. A
 * chaos run is judged as strictly as a calm one: a poisoned message hands its
 * intents over (index_list.c: abandon) and its replay drops them. */
void mx_check_end_state(struct mx *x, struct state *s)
{
	const struct mixed_scenario *sc = x->sc;
	struct report *r = calloc(1, sizeof(*r));
	char h[65], rpk[128];

	assert_non_null(r);
	s->emp = all_entities(&s->nemp, x, x->emp);
	s->arch = all_entities(&s->narch, x, x->arch);
	s->idx = all_entities(&s->nidx, x, x->idx);
	s->cust = all_entities(&s->ncust, x, x->cust);
	s->orders = all_entities(&s->norders, x, x->orders);

	/* 1. Every employee in exactly one of the two tables, all fields there. */
	for (int i = 0; i < sc->employees; i++) {
		const struct ecw_entity *a = find_entity(s->emp, s->nemp, x->epk[i], x->erk[i]);
		const struct ecw_entity *b = find_entity(s->arch, s->narch, x->epk[i], x->erk[i]);
		if (a && b)
			diff(r, "employee (%s, %s) is in Employees AND in the archive:\n    %s\n    %s",
			     x->epk[i], x->erk[i], itest_entity_json(a), itest_entity_json(b));
		if (!a && !b)
			diff(r, "employee (%s, %s) is in neither Employees nor the archive: lost", x->epk[i],
			     x->erk[i]);
		const struct ecw_entity *e = a ? a : b;
		const struct ecw_prop *salary = e ? ecw_entity_get(e, "Salary") : NULL;
		const struct ecw_prop *grade = e ? ecw_entity_get(e, "Grade") : NULL;
		const struct ecw_prop *badge = e ? ecw_entity_get(e, "BadgeId") : NULL;
		if (e && (ecw_entity_count(e) != 6 || !mx_strp(e, "LastName") || !mx_strp(e, "Email") ||
		          !mx_strp(e, "FirstName") || !salary || salary->type != ECW_EDM_DOUBLE ||
		          salary->v.d != 50000.0 + i || !grade || grade->type != ECW_EDM_INT32 ||
		          grade->v.i32 != i % 9 || !badge || badge->type != ECW_EDM_INT64 ||
		          badge->v.i64 != 9007199254740993LL + i))
			diff(r, "employee (%s, %s) lost or changed properties (types) on its way: %s",
			     x->epk[i], x->erk[i], itest_entity_json(e));
	}
	/* The checks below need these on every employee. */
	if (r->n) {
		char copy[sizeof(r->text)];
		snprintf(copy, sizeof(copy), "%s", r->text);
		free(r);
		fail_msg("%s (seed %u): the source tables are inconsistent:%s", sc->name, x->seed, copy);
	}
	if (s->nemp + s->narch != (size_t)sc->employees)
		diff(r, "%zu employees + %zu archived, expected %d in all", s->nemp, s->narch, sc->employees);

	/* 2. The index table: every entity must be expected, exactly. */
	bool *seen_entry = calloc(s->nemp + 1, sizeof(bool)), *seen_eref = calloc(s->nemp + 1, sizeof(bool));
	bool *seen_listed = calloc(s->nemp + 1, sizeof(bool)), *seen_lref = calloc(s->nemp + 1, sizeof(bool));
	size_t nentries = 0, nlists = 0, nerefs = 0, nlrefs = 0;
	assert_true(seen_entry && seen_eref && seen_listed && seen_lref);
	for (size_t k = 0; k < s->nidx; k++) {
		const struct ecw_entity *a = s->idx[k];
		const char *pk = ecw_entity_pk(a), *rk = ecw_entity_rk(a);
		const char *spk = mx_strp(a, "SourcePartitionKey"), *srk = mx_strp(a, "SourceRowKey");

		if (strcmp(pk, EMAIL_PK) == 0) {
			nentries++;
			size_t j = 0;
			for (; j < s->nemp; j++)
				if (strcmp(mx_strp(s->emp[j], "Email"), rk) == 0)
					break;
			if (j == s->nemp) {
				diff(r, "stale email entry %s (its source (%s, %s) is %s): %s", rk,
				     spk ? spk : "?", srk ? srk : "?",
				     spk && srk ? whereabouts(s, spk, srk) : "-", itest_entity_json(a));
				continue;
			}
			const struct ecw_entity *src = s->emp[j];
			struct ecw_entity *want = NULL;
			ECW_ASSERT_OK(ecw_entity_new(&want, EMAIL_PK, rk));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourcePartitionKey", ecw_entity_pk(src),
			                                    strlen(ecw_entity_pk(src))));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourceRowKey", ecw_entity_rk(src),
			                                    strlen(ecw_entity_rk(src))));
			ECW_ASSERT_OK(ecw_entity_set_prop(want, ecw_entity_get(src, "FirstName")));
			ECW_ASSERT_OK(ecw_entity_set_prop(want, ecw_entity_get(src, "LastName")));
			if (!ecw_entity_equal(a, want))
				diff(r, "email entry %s:\n    has      %s\n    expected %s", rk,
				     itest_entity_json(a), itest_entity_json(want));
			ecw_entity_free(want);
			seen_entry[j] = true;
		} else if (strncmp(pk, EMAIL_REF, strlen(EMAIL_REF)) == 0) {
			nerefs++;
			const struct ecw_entity *src =
			    spk && srk ? find_entity(s->emp, s->nemp, spk, srk) : NULL;
			if (!src) {
				diff(r, "stale email ref of (%s, %s), which is %s: %s", spk ? spk : "?",
				     srk ? srk : "?", spk && srk ? whereabouts(s, spk, srk) : "-",
				     itest_entity_json(a));
				continue;
			}
			struct ecw_entity *want = NULL;
			ref_hash(h, spk, srk);
			snprintf(rpk, sizeof(rpk), "%s%.2s", EMAIL_REF, h);
			ECW_ASSERT_OK(ecw_entity_new(&want, rpk, h));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "Job", J_EMAIL, strlen(J_EMAIL)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourcePartitionKey", spk, strlen(spk)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourceRowKey", srk, strlen(srk)));
			ECW_ASSERT_OK(
			    ecw_entity_set_string(want, "IndexPartitionKey", EMAIL_PK, strlen(EMAIL_PK)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "IndexRowKey", mx_strp(src, "Email"),
			                                    strlen(mx_strp(src, "Email"))));
			if (!ecw_entity_equal(a, want))
				diff(r, "email ref of (%s, %s):\n    has      %s\n    expected %s", spk, srk,
				     itest_entity_json(a), itest_entity_json(want));
			ecw_entity_free(want);
			for (size_t j = 0; j < s->nemp; j++)
				if (s->emp[j] == src)
					seen_eref[j] = true;
		} else if (strcmp(pk, LIST_PK) == 0) {
			nlists++;
			struct json_object *arr = parse_keys(r, a);
			for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
				struct json_object *pr = json_object_array_get_idx(arr, i);
				const char *lpk = json_object_get_string(json_object_array_get_idx(pr, 0));
				const char *lrk = json_object_get_string(json_object_array_get_idx(pr, 1));
				const struct ecw_entity *src = find_entity(s->emp, s->nemp, lpk, lrk);
				if (!src) {
					diff(r, "list %s holds (%s, %s), which is %s", rk, lpk, lrk,
					     whereabouts(s, lpk, lrk));
					continue;
				}
				if (strcmp(mx_strp(src, "LastName"), rk) != 0)
					diff(r, "list %s holds (%s, %s), whose LastName is %s", rk, lpk, lrk,
					     mx_strp(src, "LastName"));
				for (size_t j = 0; j < s->nemp; j++)
					if (s->emp[j] == src && strcmp(mx_strp(src, "LastName"), rk) == 0)
						seen_listed[j] = true;
			}
			/* Everyone with this LastName is in it. */
			for (size_t j = 0; arr && j < s->nemp; j++)
				if (strcmp(mx_strp(s->emp[j], "LastName"), rk) == 0 &&
				    !pairs_have(arr, ecw_entity_pk(s->emp[j]), ecw_entity_rk(s->emp[j])))
					diff(r, "list %s lacks (%s, %s)", rk, ecw_entity_pk(s->emp[j]),
					     ecw_entity_rk(s->emp[j]));
			json_object_put(arr);
		} else if (strncmp(pk, LIST_REF, strlen(LIST_REF)) == 0) {
			const struct ecw_entity *src =
			    spk && srk ? find_entity(s->emp, s->nemp, spk, srk) : NULL;
			nlrefs++;
			if (!src) {
				diff(r, "stale list ref of (%s, %s), which is %s: %s", spk ? spk : "?",
				     srk ? srk : "?", spk && srk ? whereabouts(s, spk, srk) : "-",
				     itest_entity_json(a));
				continue;
			}
			struct ecw_entity *want = NULL;
			const char *last = mx_strp(src, "LastName");
			ref_hash(h, spk, srk);
			snprintf(rpk, sizeof(rpk), "%s%.2s", LIST_REF, h);
			ECW_ASSERT_OK(ecw_entity_new(&want, rpk, h));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourcePartitionKey", spk, strlen(spk)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourceRowKey", srk, strlen(srk)));
			ECW_ASSERT_OK(
			    ecw_entity_set_string(want, "ListPartitionKey", LIST_PK, strlen(LIST_PK)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "ListRowKey", last, strlen(last)));
			if (!ecw_entity_equal(a, want))
				diff(r, "list ref of (%s, %s):\n    has      %s\n    expected %s", spk, srk,
				     itest_entity_json(a), itest_entity_json(want));
			ecw_entity_free(want);
			for (size_t j = 0; j < s->nemp; j++)
				if (s->emp[j] == src)
					seen_lref[j] = true;
		} else {
			diff(r, "unexpected entity in the index table: %s", itest_entity_json(a));
		}
	}
	for (size_t j = 0; j < s->nemp; j++) {
		const struct ecw_entity *e = s->emp[j];
		if (!seen_entry[j])
			diff(r, "no email entry for (%s, %s) at %s", ecw_entity_pk(e), ecw_entity_rk(e),
			     mx_strp(e, "Email"));
		if (!seen_eref[j])
			diff(r, "no email ref for (%s, %s)", ecw_entity_pk(e), ecw_entity_rk(e));
		if (!seen_listed[j])
			diff(r, "(%s, %s) is in no list (LastName %s)", ecw_entity_pk(e), ecw_entity_rk(e),
			     mx_strp(e, "LastName"));
		if (!seen_lref[j])
			diff(r, "no list ref for (%s, %s)", ecw_entity_pk(e), ecw_entity_rk(e));
	}
	/* One list per LastName in use, nothing more (the loop above found
	 * stale members; an extra list would hold only stale ones). */
	size_t want_lists = 0;
	for (int n = 0; n < 4; n++)
		for (size_t j = 0; j < s->nemp; j++)
			if (strcmp(mx_strp(s->emp[j], "LastName"), MX_LAST_NAMES[n]) == 0) {
				want_lists++;
				break;
			}
	if (nlists != want_lists)
		diff(r, "%zu lists, expected %zu", nlists, want_lists);
	if (nentries != s->nemp || nerefs != s->nemp || nlrefs != s->nemp)
		diff(r, "%zu email entries, %zu email refs, %zu list refs; expected %zu of each", nentries,
		     nerefs, nlrefs, s->nemp);
	free(seen_entry);
	free(seen_eref);
	free(seen_listed);
	free(seen_lref);

	/* 3. Orders: copies = the customer's current values, none when it is
	 * gone; the rest as seeded. */
	if (s->norders != (size_t)(sc->customers * sc->orders_per))
		diff(r, "%zu orders, expected %d", s->norders, sc->customers * sc->orders_per);
	for (size_t k = 0; k < s->norders; k++) {
		const struct ecw_entity *o = s->orders[k];
		const struct ecw_entity *c = find_entity(s->cust, s->ncust, CUST_PK, ecw_entity_pk(o));
		const char *want_name = c ? mx_strp(c, "Name") : NULL,
		           *want_email = c ? mx_strp(c, "Email") : NULL;
		const struct ecw_prop *name = ecw_entity_get(o, "CustomerName"),
		                      *email = ecw_entity_get(o, "CustomerEmail");
		bool ok =
		    (want_name ? name && name->type == ECW_EDM_STRING && strcmp(name->v.s, want_name) == 0
		               : !name) &&
		    (want_email
		         ? email && email->type == ECW_EDM_STRING && strcmp(email->v.s, want_email) == 0
		         : !email);
		if (!ok)
			diff(r,
			     "order (%s, %s) of a customer %s: copies Name=%s Email=%s, expected Name=%s "
			     "Email=%s",
			     ecw_entity_pk(o), ecw_entity_rk(o), c ? "that exists" : "DELETED",
			     name ? name->v.s : "(none)", email ? email->v.s : "(none)",
			     want_name ? want_name : "(none)", want_email ? want_email : "(none)");
		const struct ecw_prop *st = ecw_entity_get(o, "Status"), *amt = ecw_entity_get(o, "Amount"),
		                      *note = ecw_entity_get(o, "Note");
		size_t extra = (name ? 1 : 0) + (email ? 1 : 0);
		if (!st || strcmp(st->v.s, "new") != 0 || !amt || amt->type != ECW_EDM_INT32 || !note ||
		    ecw_entity_count(o) != 3 + extra)
			diff(r, "order (%s, %s): other properties changed: %s", ecw_entity_pk(o),
			     ecw_entity_rk(o), itest_entity_json(o));
	}

	if (r->n) {
		char copy[sizeof(r->text)];
		int n = r->n;
		snprintf(copy, sizeof(copy), "%s", r->text);
		free(r);
		fail_msg("%s (seed %u): the end state differs from the recomputation from the source tables "
		         "in %d place(s) (first 40):%s",
		         sc->name, x->seed, n, copy);
	}
	free(r);
}

void mx_state_free(struct state *s)
{
	itest_entities_free(s->emp, s->nemp);
	itest_entities_free(s->arch, s->narch);
	itest_entities_free(s->idx, s->nidx);
	itest_entities_free(s->cust, s->ncust);
	itest_entities_free(s->orders, s->norders);
	memset(s, 0, sizeof(*s));
}
