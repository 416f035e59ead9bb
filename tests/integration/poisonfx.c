/* SPDX-License-Identifier: MIT */
/* poisonfx.c - see poisonfx.h. */
#include "poisonfx.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_buf.h"
#include "poison.h"

#define CMD_TIMEOUT_MS 60000

/* ---- fixture ------------------------------------------------------------------------- */

static int px_setup_on(void **state, bool private_az)
{
	struct px *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	*state = x;
	if (private_az && proc_azurite_start(&x->az, "poison")) {
		x->private_az = true;
		x->connstr = x->az.connstr;
	} else {
		x->connstr = itest_connstr();
	}
	snprintf(x->env_conn, sizeof(x->env_conn), "ECW_TEST_CONNECTION_STRING=%s", x->connstr);
	x->env[0] = x->env_conn;
	x->env[1] = NULL;
	itest_client_for(&x->acct, &x->c, x->connstr, NULL);
	itest_unique_name(x->queue, sizeof(x->queue), 'q', "pq");
	snprintf(x->poison, sizeof(x->poison), "%s-poison", x->queue);
	itest_unique_name(x->table, sizeof(x->table), 't', "pt");
	x->queues_made = true;
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->c, x->queue));
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->c, x->poison));
	ecw_error_clear();
	return 0;
}

int px_setup(void **state)
{
	return px_setup_on(state, false);
}

int px_setup_private(void **state)
{
	return px_setup_on(state, true);
}

int px_teardown(void **state)
{
	struct px *x = *state;

	proc_cleanup();
	if (!x)
		return 0;
	if (x->private_az) {
		proc_azurite_stop(&x->az);
	} else if (x->c) {
		if (x->queues_made) {
			(void)!ecw_queue_delete_queue(x->c, x->queue);
			(void)!ecw_queue_delete_queue(x->c, x->poison);
		}
		if (x->table_used)
			(void)!ecw_table_delete_table(x->c, x->table);
	}
	ecw_client_free(x->c);
	ecw_account_free(x->acct);
	free(x);
	*state = NULL;
	return 0;
}

void px_write_config(struct px *x, const char *jobs)
{
	char text[4096], jobs_text[1024];
	size_t j = 0;

	for (const char *p = jobs; *p && j + 64 < sizeof(jobs_text); p++) {
		if (p[0] == '%' && p[1] == 'T') {
			j += (size_t)snprintf(jobs_text + j, sizeof(jobs_text) - j, "%s", x->table);
			p++;
		} else {
			jobs_text[j++] = *p;
		}
	}
	jobs_text[j] = '\0';
	int k = snprintf(text, sizeof(text),
	                 "storage:\n"
	                 "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                 "worker:\n"
	                 "  queue: %s\n"
	                 "  visibility_timeout: 30s\n"
	                 "  poll_interval: {min: 50ms, max: 200ms}\n"
	                 "log: {level: info, format: json}\n"
	                 "metrics: {listen: \"\"}\n"
	                 "jobs:\n%s",
	                 x->queue, jobs_text);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	proc_write_file(x->cfg, sizeof(x->cfg), "poison.yaml", text);
}

int px_cmdv(char **out, char **err, struct px *x, const char *sub, const char *const *args)
{
	const char *argv[64];
	size_t n = 0;
	char name[64];
	static unsigned seq;

	argv[n++] = "poison";
	argv[n++] = sub;
	argv[n++] = "-c";
	argv[n++] = x->cfg;
	for (size_t i = 0; args && args[i]; i++) {
		assert_true(n + 2 < sizeof(argv) / sizeof(argv[0]));
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	snprintf(name, sizeof(name), "poison-%s-%u", sub, seq++);
	return proc_run(out, err, name, argv, x->env, CMD_TIMEOUT_MS);
}

void px_cmd_expect(char **out, char **err, struct px *x, int want, const char *sub, const char *const *args)
{
	char *o = NULL, *e = NULL;
	int code = px_cmdv(&o, &e, x, sub, args);

	if (code != want)
		fail_msg("poison %s exited %d, expected %d\n-- stdout (start):\n%.3000s\n-- stderr:\n%.3000s",
		         sub, code, want, o ? o : "", e ? e : "");
	if (out)
		*out = o;
	else
		free(o);
	if (err)
		*err = e;
	else
		free(e);
}

/* ---- messages ------------------------------------------------------------------------ */

void px_put_text(char *id, struct px *x, const char *queue, const char *text, size_t len)
{
	struct ecw_queue_msg m;

	memset(&m, 0, sizeof(m));
	ECW_ASSERT_OK(ecw_queue_put(&m, x->c, queue, text, len, NULL));
	if (id)
		memcpy(id, m.id, sizeof(m.id));
}

/* An envelope as the worker writes it (ecw_poison_envelope), as a heap string. */
static char *envelope(const char *job, const char *reason, time_t failed_at, const char *error,
                      const struct px_answer *answer, const char *original, size_t original_len,
                      const char *pk, const char *rk, const char *queue)
{
	struct ecw_buf b;
	struct ecw_poison_info info = {
	    .original = original,
	    .original_len = original_len,
	    .queue = queue,
	    .message_id = "job-queue-message-id",
	    .inserted_at = failed_at - 90,
	    .dequeue_count = strcmp(reason, "max-dequeue") == 0 ? 6 : 1,
	    .failed_at = failed_at,
	    .reason = reason,
	    .error = error,
	    .http_status = answer ? answer->http_status : 0,
	    .error_code = answer ? answer->error_code : NULL,
	    .job = job,
	    .pk = pk,
	    .rk = rk,
	    .worker = "itest-host ecworker/test",
	};

	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	ECW_ASSERT_OK(ecw_poison_envelope(&b, &info));
	return ecw_buf_take(&b);
}

char *px_job_message(const char *job, const char *pk, const char *rk, const char *extra)
{
	struct json_object *o = json_object_new_object();
	char *text;

	json_object_object_add(o, "job", json_object_new_string(job));
	json_object_object_add(o, "pk", json_object_new_string(pk));
	json_object_object_add(o, "rk", json_object_new_string(rk));
	const char *s =
	    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t n = strlen(s), e = strlen(extra);
	text = malloc(n + e + 2);
	assert_non_null(text);
	memcpy(text, s, n - 1); /* without the closing brace */
	if (e) {
		text[n - 1] = ',';
		memcpy(text + n, extra, e);
		memcpy(text + n + e, "}", 2);
	} else {
		memcpy(text + n - 1, "}", 2);
	}
	json_object_put(o);
	return text;
}

void px_qset_free(struct px_qset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].text);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

void px_read_queue(struct px_qset *out, struct px *x, const char *queue, bool release)
{
	struct ecw_queue_msg *held = NULL;
	size_t nheld = 0, capheld = 0;

	memset(out, 0, sizeof(*out));
	for (;;) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		ECW_ASSERT_OK(ecw_queue_receive(&m, &n, x->c, queue, 32, 120));
		if (n == 0)
			break;
		for (size_t i = 0; i < n; i++) {
			for (size_t k = 0; k < out->n; k++)
				ITEST_CHECK(strcmp(out->v[k].id, m[i].id) != 0, "message %s received twice",
				            m[i].id);
			if (out->n == out->cap) {
				out->cap = out->cap ? out->cap * 2 : 64;
				out->v = realloc(out->v, out->cap * sizeof(*out->v));
				assert_non_null(out->v);
			}
			struct px_qmsg *q = &out->v[out->n++];
			memcpy(q->id, m[i].id, sizeof(q->id));
			q->len = m[i].text_len;
			q->text = malloc(q->len + 1);
			assert_non_null(q->text);
			memcpy(q->text, m[i].text, q->len + 1);
			if (release) {
				if (nheld == capheld) {
					capheld = capheld ? capheld * 2 : 64;
					held = realloc(held, capheld * sizeof(*held));
					assert_non_null(held);
				}
				held[nheld] = m[i];
				held[nheld++].text = NULL;
			}
		}
		ecw_queue_msgs_free(m, n);
	}
	for (size_t i = 0; i < nheld; i++)
		ECW_ASSERT_OK(ecw_queue_update(&held[i], x->c, queue, 0, NULL, 0));
	free(held);
}

const struct px_qmsg *px_qset_find_id(const struct px_qset *s, const char *id)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].id, id) == 0)
			return &s->v[i];
	return NULL;
}

size_t px_qset_count_text(const struct px_qset *s, const char *text, size_t len)
{
	size_t c = 0;
	for (size_t i = 0; i < s->n; i++)
		c += s->v[i].len == len && memcmp(s->v[i].text, text, len) == 0;
	return c;
}

void px_expect_poison_exactly(struct px *x, const struct px_put *want, size_t n, const bool *keep,
                              bool release)
{
	struct px_qset s;
	size_t expected = 0;

	px_read_queue(&s, x, x->poison, release);
	for (size_t i = 0; i < n; i++) {
		const struct px_qmsg *q = px_qset_find_id(&s, want[i].id);
		if (keep && !keep[i]) {
			ITEST_CHECK(q == NULL, "message %zu (%s) is still on the poison queue", i,
			            want[i].id);
			continue;
		}
		expected++;
		ITEST_CHECK(q != NULL, "message %zu (%s) is missing from the poison queue (%zu there)", i,
		            want[i].id, s.n);
		ITEST_CHECK(q->len == want[i].len && memcmp(q->text, want[i].text, q->len) == 0,
		            "message %zu (%s) changed:\n  was %.300s\n  now %.300s", i, want[i].id,
		            want[i].text, q->text);
	}
	ITEST_CHECK(s.n == expected, "%zu messages on the poison queue, expected %zu", s.n, expected);
	px_qset_free(&s);
}

long long px_queue_count(struct px *x, const char *queue)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, x->c, queue));
	return n;
}

void px_puts_clear(struct px_put *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].text);
		free(p[i].original);
	}
	memset(p, 0, n * sizeof(*p));
}

void px_puts_free(struct px_put *p, size_t n)
{
	px_puts_clear(p, n);
	free(p);
}

static void put_envelope(struct px_put *p, struct px *x, const char *job, const char *reason,
                         time_t failed_at, const char *error, const struct px_answer *answer,
                         const char *original, size_t original_len, const char *pk, const char *rk)
{
	p->text = envelope(job, reason, failed_at, error, answer, original, original_len, pk, rk, x->queue);
	p->len = strlen(p->text);
	p->original = malloc(original_len + 1);
	assert_non_null(p->original);
	memcpy(p->original, original, original_len);
	p->original[original_len] = '\0';
	p->original_len = original_len;
	px_put_text(p->id, x, x->poison, p->text, p->len);
}

void px_put_envelope(struct px_put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                     const char *error, const char *original, size_t original_len, const char *pk,
                     const char *rk)
{
	put_envelope(p, x, job, reason, failed_at, error, NULL, original, original_len, pk, rk);
}

static void put_job(struct px_put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                    const char *error, const struct px_answer *answer, const char *pk, const char *rk,
                    const char *extra)
{
	char *orig = px_job_message(job, pk, rk, extra);
	put_envelope(p, x, job, reason, failed_at, error, answer, orig, strlen(orig), pk, rk);
	free(orig);
}

void px_put_job(struct px_put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                const char *error, const char *pk, const char *rk, const char *extra)
{
	put_job(p, x, job, reason, failed_at, error, NULL, pk, rk, extra);
}

void px_put_job_answer(struct px_put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                       const char *error, const struct px_answer *answer, const char *pk, const char *rk)
{
	put_job(p, x, job, reason, failed_at, error, answer, pk, rk, "");
}

/* ---- listing ------------------------------------------------------------------------- */

int px_cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void px_idset_free(struct px_idset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

void px_list_ids(struct px_idset *out, struct px *x, const char *const *args, struct json_object **lines)
{
	const char *argv[32];
	size_t n = 0;
	char *o = NULL;

	argv[n++] = "--json";
	for (size_t i = 0; args && args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	px_cmd_expect(&o, NULL, x, 0, "list", argv);
	memset(out, 0, sizeof(*out));
	out->v = calloc(strlen(o) / 2 + 1, sizeof(char *));
	assert_non_null(out->v);
	if (lines)
		*lines = json_object_new_array();
	for (char *line = o, *nl; *line; line = nl + 1) {
		struct json_object *j, *id, *env;
		nl = strchr(line, '\n');
		ITEST_CHECK(nl != NULL, "output does not end with a newline: %.200s", line);
		*nl = '\0';
		j = json_tokener_parse(line);
		ITEST_CHECK(j && json_object_is_type(j, json_type_object), "not a JSON object: %.300s", line);
		ITEST_CHECK(json_object_object_get_ex(j, "id", &id) &&
		                json_object_is_type(id, json_type_string),
		            "no \"id\" in %.300s", line);
		ITEST_CHECK(json_object_object_get_ex(j, "envelope", &env) &&
		                json_object_is_type(env, json_type_boolean),
		            "no \"envelope\" in %.300s", line);
		out->v[out->n++] = strdup(json_object_get_string(id));
		if (lines)
			json_object_array_add(*lines, j);
		else
			json_object_put(j);
	}
	qsort(out->v, out->n, sizeof(char *), px_cmp_str);
	for (size_t i = 1; i < out->n; i++)
		ITEST_CHECK(strcmp(out->v[i - 1], out->v[i]) != 0, "id %s listed twice", out->v[i]);
	free(o);
}
