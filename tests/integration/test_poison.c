/* test_poison.c - `ecworker poison list | replay | purge` against a real
 * Azurite, run as an operator runs them (build/ecworker-test as a process).
 *
 * The test builds poison envelopes itself (ecw_poison_envelope, with chosen
 * job, reason, failed_at, error and awkward originals), puts them on the
 * poison queue, runs the command, and then reads both queues back in full
 * with the client: every filter selects exactly the expected set of ids;
 * list, --dry-run and purge without --yes change nothing (same ids, same
 * texts, byte for byte); replay puts `original` on the job queue unchanged
 * and deletes exactly what it replayed; a worker then processes what was
 * replayed; --rate paces; a replay killed with SIGKILL, or two replays at
 * once, lose nothing; a canary that is poisoned again stops the replay;
 * messages that are not envelopes replay unchanged and are never selected
 * by --job. The heavy cases (hundreds of deletes) run on an Azurite of
 * their own, since Azurite's queue GC stalls the whole service after many
 * deletes. */
#include "itest.h"
#include "proc.h"

#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_codec.h"
#include "poison.h"

#define CMD_TIMEOUT_MS 60000

/* ---- fixture ------------------------------------------------------------------------- */

struct px {
	struct proc_azurite az;
	bool private_az;
	const char *connstr;
	char env_conn[700]; /* ECW_TEST_CONNECTION_STRING=... for the processes */
	const char *env[2];
	struct ecw_account *acct;
	struct ecw_client *c;
	char queue[64], poison[80], table[64];
	bool queues_made, table_used;
	char cfg[640];
};

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

static int px_setup(void **state)
{
	return px_setup_on(state, false);
}

static int px_setup_private(void **state)
{
	return px_setup_on(state, true);
}

static int px_teardown(void **state)
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

/* The configuration: the fixture's queues, and jobs (YAML lines under jobs:,
 * "%T" standing for the fixture's table). */
static void write_config(struct px *x, const char *jobs)
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

/* Runs `poison SUB -c CFG ARGS...` (args NULL-terminated); returns the exit
 * code, *out and *err (may be NULL) what it printed. */
static int poison_cmdv(char **out, char **err, struct px *x, const char *sub, const char *const *args)
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

/* The same, failing unless it exits with want. */
static void poison_expect(char **out, char **err, struct px *x, int want, const char *sub,
                          const char *const *args)
{
	char *o = NULL, *e = NULL;
	int code = poison_cmdv(&o, &e, x, sub, args);

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

/* Puts text on queue; id (may be NULL) receives the message id. */
static void put_text(char *id, struct px *x, const char *queue, const char *text, size_t len)
{
	struct ecw_queue_msg m;

	memset(&m, 0, sizeof(m));
	ECW_ASSERT_OK(ecw_queue_put(&m, x->c, queue, text, len, NULL));
	if (id)
		memcpy(id, m.id, sizeof(m.id));
}

/* An envelope as the worker writes it (ecw_poison_envelope), as a heap string. */
static char *envelope(const char *job, const char *reason, time_t failed_at, const char *error,
                      const char *original, size_t original_len, const char *pk, const char *rk,
                      const char *queue)
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
	    .job = job,
	    .pk = pk,
	    .rk = rk,
	    .worker = "itest-host ecworker/test",
	};

	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	ECW_ASSERT_OK(ecw_poison_envelope(&b, &info));
	return ecw_buf_take(&b);
}

/* A job message {"job":..,"pk":..,"rk":..} plus extra JSON members (may be ""). */
static char *job_message(const char *job, const char *pk, const char *rk, const char *extra)
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

/* Every message of a queue, read with receive (hidden for 120 s), and,
 * when release is set, made visible again afterwards (text unchanged). */
struct qmsg {
	char id[64];
	char *text;
	size_t len;
};

struct qset {
	struct qmsg *v;
	size_t n, cap;
};

static void qset_free(struct qset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].text);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static void read_queue(struct qset *out, struct px *x, const char *queue, bool release)
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
			struct qmsg *q = &out->v[out->n++];
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

static const struct qmsg *qset_find_id(const struct qset *s, const char *id)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].id, id) == 0)
			return &s->v[i];
	return NULL;
}

/* How many messages of s have exactly this text. */
static size_t qset_count_text(const struct qset *s, const char *text, size_t len)
{
	size_t c = 0;
	for (size_t i = 0; i < s->n; i++)
		c += s->v[i].len == len && memcmp(s->v[i].text, text, len) == 0;
	return c;
}

/* What the test put on the poison queue: id and text. */
struct put {
	char id[64];
	char *text;
	size_t len;
	char *original; /* for envelopes: the original; foreign: NULL */
	size_t original_len;
};

/* The poison queue holds exactly the messages of want for which keep[i] is
 * true (keep NULL: all), same ids, same texts, and nothing else. */
static void expect_poison_exactly(struct px *x, const struct put *want, size_t n, const bool *keep,
                                  bool release)
{
	struct qset s;
	size_t expected = 0;

	read_queue(&s, x, x->poison, release);
	for (size_t i = 0; i < n; i++) {
		const struct qmsg *q = qset_find_id(&s, want[i].id);
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
	qset_free(&s);
}

static long long queue_count(struct px *x, const char *queue)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, x->c, queue));
	return n;
}

/* Frees what each element holds; puts_free also the array. */
static void puts_clear(struct put *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].text);
		free(p[i].original);
	}
	memset(p, 0, n * sizeof(*p));
}

static void puts_free(struct put *p, size_t n)
{
	puts_clear(p, n);
	free(p);
}

/* Puts an envelope for original on the poison queue and records it. */
static void put_envelope(struct put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                         const char *error, const char *original, size_t original_len, const char *pk,
                         const char *rk)
{
	p->text = envelope(job, reason, failed_at, error, original, original_len, pk, rk, x->queue);
	p->len = strlen(p->text);
	p->original = malloc(original_len + 1);
	assert_non_null(p->original);
	memcpy(p->original, original, original_len);
	p->original[original_len] = '\0';
	p->original_len = original_len;
	put_text(p->id, x, x->poison, p->text, p->len);
}

/* put_envelope for the job message {"job":job,"pk":pk,"rk":rk,extra}. */
static void put_job(struct put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                    const char *error, const char *pk, const char *rk, const char *extra)
{
	char *orig = job_message(job, pk, rk, extra);
	put_envelope(p, x, job, reason, failed_at, error, orig, strlen(orig), pk, rk);
	free(orig);
}

/* How many messages of s are envelopes of p's original (with error
 * containing error_has, unless NULL). */
static size_t envelopes_of(const struct qset *s, const struct put *p, const char *error_has)
{
	size_t k = 0;

	for (size_t m = 0; m < s->n; m++) {
		struct ecw_poison_view v;
		ECW_ASSERT_OK(ecw_poison_parse(&v, s->v[m].text, s->v[m].len));
		k += v.envelope && v.original_len == p->original_len &&
		     memcmp(v.original, p->original, v.original_len) == 0 &&
		     (!error_has || (v.error && strstr(v.error, error_has)));
		ecw_poison_view_dispose(&v);
	}
	return k;
}

/* ---- listing ------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct idset {
	char **v;
	size_t n;
};

static void idset_free(struct idset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* `poison list --json ARGS`: the ids it printed, sorted; every line must be a
 * JSON object with an "id" and "envelope". lines (may be NULL) receives the
 * objects, in order (put them). */
static void list_ids(struct idset *out, struct px *x, const char *const *args, struct json_object **lines)
{
	const char *argv[32];
	size_t n = 0;
	char *o = NULL;

	argv[n++] = "--json";
	for (size_t i = 0; args && args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	poison_expect(&o, NULL, x, 0, "list", argv);
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
	qsort(out->v, out->n, sizeof(char *), cmp_str);
	for (size_t i = 1; i < out->n; i++)
		ITEST_CHECK(strcmp(out->v[i - 1], out->v[i]) != 0, "id %s listed twice", out->v[i]);
	free(o);
}

/* ---- the 300 envelopes ----------------------------------------------------------------- */

#define N_FILTER 300
static const char *const F_JOBS[3] = {"archive-employee", "employee-by-email", "customer-to-orders"};
static const char *const F_REASONS[2] = {"permanent", "max-dequeue"};
/* How long ago each failed: 10 minutes, 3 hours, 30 hours, 4 days, 10 days. */
static const long F_AGES[5] = {600, 3 * 3600, 30 * 3600, 4 * 86400, 10 * 86400};
static const char *const F_ERRORS[7] = {
    "TableNotFound: table Employees does not exist",    "412 ConditionNotMet on Orders after 5 rounds",
    "timeout talking to storage (operation timed out)", "key rk contains a forbidden character",
    "AuthorizationFailure: signature mismatch",         "unknown job type in message",
    "entity too large: 1.2 MB exceeds limit",
};

struct fspec {
	int job, reason, age, error;
	char pk[32], rk[32];
	time_t failed_at;
};

static void filter_spec(struct fspec *s, int i, time_t now)
{
	s->job = i % 3;
	s->reason = i % 2;
	s->age = i % 5;
	s->error = i % 7;
	snprintf(s->pk, sizeof(s->pk), "dept-%d", i % 4);
	snprintf(s->rk, sizeof(s->rk), "emp-%04d", i);
	s->failed_at = now - F_AGES[s->age];
}

/* Fills the poison queue with the 300; p receives what was put. */
static struct put *put_filter_set(struct px *x, struct fspec *spec, time_t now)
{
	struct put *p = calloc(N_FILTER, sizeof(*p));

	assert_non_null(p);
	for (int i = 0; i < N_FILTER; i++) {
		filter_spec(&spec[i], i, now);
		put_job(&p[i], x, F_JOBS[spec[i].job], F_REASONS[spec[i].reason], spec[i].failed_at,
		        F_ERRORS[spec[i].error], spec[i].pk, spec[i].rk, "");
	}
	return p;
}

/* One filter case: args for the command, and the predicate. */
struct fcase {
	const char *what;
	const char *args[12];
	int job, reason;  /* -1: any */
	time_t since;     /* 0: any */
	const char *grep; /* in error, original, job, pk or rk */
	const char *const *ids;
	size_t nids;
};

static bool fcase_match(const struct fcase *c, const struct fspec *s, const struct put *p)
{
	if (c->job >= 0 && c->job != s->job)
		return false;
	if (c->reason >= 0 && c->reason != s->reason)
		return false;
	if (c->since && s->failed_at < c->since)
		return false;
	if (c->grep && !strstr(F_ERRORS[s->error], c->grep) && !strstr(p->original, c->grep) &&
	    !strstr(F_JOBS[s->job], c->grep) && !strstr(s->pk, c->grep) && !strstr(s->rk, c->grep))
		return false;
	if (c->nids) {
		size_t k;
		for (k = 0; k < c->nids && strcmp(c->ids[k], p->id) != 0; k++)
			;
		if (k == c->nids)
			return false;
	}
	return true;
}

/* Compares the listed set with the expected one, naming the first difference. */
static void expect_ids(const struct idset *got, const struct fcase *c, const struct fspec *spec,
                       const struct put *p, size_t *nexpected)
{
	size_t want = 0;

	for (int i = 0; i < N_FILTER; i++) {
		bool m = fcase_match(c, &spec[i], &p[i]);
		bool listed =
		    bsearch(&(const char *){p[i].id}, got->v, got->n, sizeof(char *), cmp_str) != NULL;
		want += m;
		ITEST_CHECK(m == listed, "%s: envelope %d (%s %s %s age %lds error '%s') %s", c->what, i,
		            F_JOBS[spec[i].job], F_REASONS[spec[i].reason], spec[i].rk, F_AGES[spec[i].age],
		            F_ERRORS[spec[i].error],
		            m ? "should be listed but is not" : "is listed but should not be");
	}
	ITEST_CHECK(got->n == want, "%s: %zu listed, expected %zu", c->what, got->n, want);
	*nexpected = want;
}

static void test_poison__list_filters_select_exactly(void **state)
{
	struct px *x = *state;
	struct fspec spec[N_FILTER];
	time_t now = time(NULL);
	char since_time[32], since_date[32];
	struct tm tm;
	struct idset got;

	write_config(x, "  archive-employee: {type: test-noop}\n");
	struct put *p = put_filter_set(x, spec, now);
	assert_int_equal(queue_count(x, x->poison), N_FILTER);

	/* A UTC time 5 days back (selects ages up to 4 d), and a date 7 days
	 * back (its midnight is 7..8 days back: still up to 4 d). */
	time_t t5 = now - 5 * 86400, t7 = now - 7 * 86400;
	gmtime_r(&t5, &tm);
	strftime(since_time, sizeof(since_time), "%Y-%m-%dT%H:%M:%SZ", &tm);
	gmtime_r(&t7, &tm);
	strftime(since_date, sizeof(since_date), "%Y-%m-%d", &tm);
	struct tm mid = tm;
	mid.tm_hour = mid.tm_min = mid.tm_sec = 0;
	time_t t7_midnight = timegm(&mid);

	const char *three[3] = {p[5].id, p[77].id, p[201].id};
	const struct fcase cases[] = {
	    {"no filter", {NULL}, -1, -1, 0, NULL, NULL, 0},
	    {"--job", {"--job", F_JOBS[1], NULL}, 1, -1, 0, NULL, NULL, 0},
	    {"--reason permanent", {"--reason", "permanent", NULL}, -1, 0, 0, NULL, NULL, 0},
	    {"--reason max-dequeue", {"--reason", "max-dequeue", NULL}, -1, 1, 0, NULL, NULL, 0},
	    {"--since 2h", {"--since", "2h", NULL}, -1, -1, now - 2 * 3600, NULL, NULL, 0},
	    {"--since 2d", {"--since", "2d", NULL}, -1, -1, now - 2 * 86400, NULL, NULL, 0},
	    {"--since 1w", {"--since", "1w", NULL}, -1, -1, now - 7 * 86400, NULL, NULL, 0},
	    {"--since TIME", {"--since", since_time, NULL}, -1, -1, t5, NULL, NULL, 0},
	    {"--since DATE", {"--since", since_date, NULL}, -1, -1, t7_midnight, NULL, NULL, 0},
	    {"--grep error word", {"--grep", "ConditionNotMet", NULL}, -1, -1, 0, "ConditionNotMet", NULL, 0},
	    {"--grep key", {"--grep", "emp-0123", NULL}, -1, -1, 0, "emp-0123", NULL, 0},
	    {"--grep case-sensitive",
	     {"--grep", "conditionnotmet", NULL},
	     -1,
	     -1,
	     0,
	     "conditionnotmet",
	     NULL,
	     0},
	    {"--id repeated",
	     {"--id", three[0], "--id", three[1], "--id", three[2], NULL},
	     -1,
	     -1,
	     0,
	     NULL,
	     three,
	     3},
	    {"--job --reason --since --grep",
	     {"--job", F_JOBS[0], "--reason", "max-dequeue", "--since", "2d", "--grep", "storage", NULL},
	     0,
	     1,
	     now - 2 * 86400,
	     "storage",
	     NULL,
	     0},
	    {"--id with --job",
	     {"--job", F_JOBS[2], "--id", three[0], "--id", three[1], "--id", three[2], NULL},
	     2,
	     -1,
	     0,
	     NULL,
	     three,
	     3},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t want;
		list_ids(&got, x, cases[i].args, NULL);
		expect_ids(&got, &cases[i], spec, p, &want);
		/* Each case must select something and not everything, except the
		 * first (all) and the case-sensitivity one (nothing). */
		if (i == 0)
			assert_int_equal(want, N_FILTER);
		else if (strcmp(cases[i].what, "--grep case-sensitive") == 0)
			assert_int_equal(want, 0);
		else
			ITEST_CHECK(want > 0 && want < N_FILTER, "%s: a degenerate case (%zu of %d)",
			            cases[i].what, want, N_FILTER);
		idset_free(&got);
		assert_int_equal(queue_count(x, x->poison), N_FILTER);
	}

	/* --limit: exactly N, all of them matching the rest of the filter. */
	const struct fcase lim = {"--limit 7 --job", {NULL}, 1, -1, 0, NULL, NULL, 0};
	list_ids(&got, x, (const char *const[]){"--limit", "7", "--job", F_JOBS[1], NULL}, NULL);
	assert_int_equal(got.n, 7);
	for (size_t k = 0; k < got.n; k++) {
		size_t i;
		for (i = 0; i < N_FILTER && strcmp(p[i].id, got.v[k]) != 0; i++)
			;
		ITEST_CHECK(i < N_FILTER && fcase_match(&lim, &spec[i], &p[i]),
		            "--limit listed %s, not a %s envelope", got.v[k], F_JOBS[1]);
	}
	idset_free(&got);
	list_ids(&got, x, (const char *const[]){"--limit", "40", NULL}, NULL);
	assert_int_equal(got.n, 40);
	idset_free(&got);

	/* Listing left every message in place, unchanged. */
	expect_poison_exactly(x, p, N_FILTER, NULL, false);
	puts_free(p, N_FILTER);
	proc_assert_logs_clean();
}

/* The JSON fields of a listed envelope are the envelope's. */
static void test_poison__list_json_fields(void **state)
{
	struct px *x = *state;
	struct put p[2];
	struct idset got;
	struct json_object *lines, *v;
	time_t failed = time(NULL) - 3 * 3600;
	const char *orig = "{\"job\":\"index\",\"pk\":\"Zo\xc3\xab \\\"q\\\"\",\"rk\":\"r1\"}";
	const char *foreign = "plain \"text\" \\ Zo\xc3\xab";

	memset(p, 0, sizeof(p));
	write_config(x, "  index: {type: test-noop}\n");
	put_envelope(&p[0], x, "index", "max-dequeue", failed, "boom: the error", orig, strlen(orig),
	             "Zo\xc3\xab \"q\"", "r1");
	put_text(p[1].id, x, x->poison, foreign, strlen(foreign));
	list_ids(&got, x, NULL, &lines);
	assert_int_equal(got.n, 2);
	for (size_t i = 0; i < 2; i++) {
		struct json_object *j = json_object_array_get_idx(lines, i);
		const char *id = json_object_get_string(json_object_object_get(j, "id"));
		bool env = json_object_get_boolean(json_object_object_get(j, "envelope"));
		if (strcmp(id, p[0].id) == 0) {
			ITEST_CHECK(env, "the envelope is listed with envelope:false");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "job")),
			                    "index");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "reason")),
			                    "max-dequeue");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "error")),
			                    "boom: the error");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "pk")),
			                    "Zo\xc3\xab \"q\"");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "rk")), "r1");
			assert_true(json_object_object_get_ex(j, "original", &v));
			assert_string_equal(json_object_get_string(v), orig);
			char iso[32];
			struct tm tm;
			gmtime_r(&failed, &tm);
			strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
			assert_string_equal(json_object_get_string(json_object_object_get(j, "failed_at")),
			                    iso);
			assert_int_equal(json_object_get_int64(json_object_object_get(j, "dequeue_count")),
			                 6);
		} else {
			assert_string_equal(id, p[1].id);
			ITEST_CHECK(!env, "the foreign message is listed with envelope:true");
			assert_true(json_object_object_get_ex(j, "text", &v));
			assert_string_equal(json_object_get_string(v), foreign);
			ITEST_CHECK(!json_object_object_get_ex(j, "job", &v),
			            "a foreign message listed with a job");
		}
	}
	json_object_put(lines);
	idset_free(&got);
	free(p[0].text);
	free(p[0].original);
	proc_assert_logs_clean();
}

/* ---- replay ---------------------------------------------------------------------------- */

/* Awkward originals for job `job`, rk "<prefix>-NN": unicode, quotes,
 * backslashes, XML specials, a base64 message, a long one. Returns the
 * count; texts[i] are heap strings, rks[i] their row keys. */
#define N_AWKWARD 8
static size_t awkward_originals(char **texts, char (*rks)[48], const char *job, const char *prefix)
{
	struct ecw_buf b;
	size_t n = 0;
	char *pad;

	for (int i = 0; i < N_AWKWARD; i++)
		snprintf(rks[i], sizeof(rks[0]), "%s-%02d", prefix, i);
	texts[n++] =
	    job_message(job, "Zo\xc3\xab \xe2\x9c\x93 \xf0\x9f\x98\x80", rks[0], "\"note\":\"caf\xc3\xa9\"");
	texts[n++] = job_message(job, "say \"hi\" 'there'", rks[1], "\"q\":\"\\\"quoted\\\"\"");
	texts[n++] = job_message(job, "p", rks[2], "\"path\":\"C:\\\\dir\\\\file \\\\n not a newline\"");
	texts[n++] = job_message(job, "a+b&c=d%", rks[3], "\"xml\":\"<tag attr='1'>&amp; &lt;/tag>\"");
	/* base64 of a job message, as the worker accepts it */
	{
		char *inner = job_message(job, "b64", rks[4], "\"via\":\"base64\"");
		ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
		ECW_ASSERT_OK(ecw_base64_encode(&b, inner, strlen(inner)));
		texts[n++] = ecw_buf_take(&b);
		free(inner);
	}
	/* long: 20,000 characters of padding */
	pad = malloc(20000 + 16);
	assert_non_null(pad);
	memcpy(pad, "\"pad\":\"", 7);
	for (int i = 0; i < 20000; i++)
		pad[7 + i] = (char)('a' + i % 26);
	memcpy(pad + 7 + 20000, "\"", 2);
	texts[n++] = job_message(job, "long", rks[5], pad);
	free(pad);
	/* spacing and key order a JSON library would not reproduce */
	{
		char buf[256];
		snprintf(buf, sizeof(buf),
		         "  {  \"rk\" : \"%s\",\n\t\"pk\":\"tabs\",  \"job\":\"%s\" , \"n\": 1.50 }  ",
		         rks[6], job);
		texts[n++] = strdup(buf);
	}
	texts[n++] =
	    job_message(job, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", rks[7], "\"ctl\":\"tab\\there\\u0001\"");
	assert_int_equal(n, N_AWKWARD);
	return n;
}

/* Waits until the fixture's table holds at least want entities (test-count:
 * one per run); returns how many it holds. */
static size_t wait_runs(struct px *x, size_t want, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;
	size_t n = 0;

	for (;;) {
		struct ecw_entity **v = itest_query_all(&n, x->c, x->table, NULL);
		itest_entities_free(v, n);
		if (n >= want || itest_now_ms() > end)
			return n;
		itest_sleep_ms(200);
	}
}

/* Every entity's PartitionKey (the message's rk, test-count) counted. */
static size_t runs_for(struct px *x, const char *rk)
{
	size_t n = 0, hits = 0;
	struct ecw_entity **v = itest_query_all(&n, x->c, x->table, NULL);

	for (size_t i = 0; i < n; i++)
		hits += strcmp(ecw_entity_pk(v[i]), rk) == 0;
	itest_entities_free(v, n);
	return hits;
}

static void test_poison__replay_moves_originals_byte_for_byte(void **state)
{
	struct px *x = *state;
	char *sel[N_AWKWARD], *other[N_AWKWARD];
	char sel_rk[N_AWKWARD][48], other_rk[N_AWKWARD][48];
	struct put p[40];
	bool keep[40];
	size_t n = 0, nsel = 0;
	time_t now = time(NULL);
	char *out = NULL;

	memset(p, 0, sizeof(p));
	write_config(x, "  count: {type: test-count, table: %T}\n"
	                "  idle: {type: test-noop}\n");
	x->table_used = true;
	ECW_ASSERT_OK(ecw_table_create(NULL, x->c, x->table));
	awkward_originals(sel, sel_rk, "count", "sel");
	awkward_originals(other, other_rk, "idle", "other");
	/* 8 selected (job count) and 32 others (job idle: the same awkward
	 * texts, and more), 40 in all: more than one peek shows. */
	for (int i = 0; i < N_AWKWARD; i++, n++) {
		put_envelope(&p[n], x, "count", "permanent", now - 3600, "TableNotFound: fixed now", sel[i],
		             strlen(sel[i]), "pk", sel_rk[i]);
		keep[n] = false;
		nsel++;
	}
	for (int i = 0; n < 40; i++, n++) {
		put_envelope(&p[n], x, "idle", i % 2 ? "permanent" : "max-dequeue", now - 7200,
		             "still broken", other[i % N_AWKWARD], strlen(other[i % N_AWKWARD]), "pk",
		             other_rk[i % N_AWKWARD]);
		keep[n] = true;
	}

	poison_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--job", "count", NULL});
	ITEST_CHECK(strstr(out, "8 selected, 8 replayed") != NULL, "summary: %s", out);
	free(out);

	/* The poison queue: the 32 others, untouched; the job queue: exactly
	 * the 8 originals, byte for byte. */
	expect_poison_exactly(x, p, n, keep, false);
	struct qset jq;
	read_queue(&jq, x, x->queue, true);
	assert_int_equal(jq.n, nsel);
	for (size_t i = 0; i < nsel; i++)
		ITEST_CHECK(qset_count_text(&jq, sel[i], strlen(sel[i])) == 1,
		            "original %zu is not on the job queue exactly once, byte for byte:\n%.300s", i,
		            sel[i]);
	qset_free(&jq);

	/* A worker processes what was replayed: one run for each. */
	struct proc w;
	const char *args[] = {"run", "-c", x->cfg, NULL};
	proc_start(&w, "poison-worker", args, x->env);
	size_t runs = wait_runs(x, nsel, 30000);
	proc_stop(&w, 20000);
	ITEST_CHECK(runs == nsel, "%zu runs for %zu replayed messages; worker log:\n%s", runs, nsel,
	            proc_tail(w.log_path, 20));
	for (size_t i = 0; i < nsel; i++)
		ITEST_CHECK(runs_for(x, sel_rk[i]) == 1, "replayed message %s was not run once", sel_rk[i]);
	assert_int_equal(queue_count(x, x->queue), 0);
	/* Nothing came back poisoned. */
	assert_int_equal(queue_count(x, x->poison), 40 - (long long)nsel);

	for (int i = 0; i < N_AWKWARD; i++) {
		free(sel[i]);
		free(other[i]);
	}
	puts_clear(p, n);
	proc_assert_logs_clean();
}

/* The one timing test: 200 messages at --rate 50 take about 4 s. */
static void test_poison__replay_rate_paces(void **state)
{
	struct px *x = *state;
	struct put *p = calloc(200, sizeof(*p));
	time_t now = time(NULL);
	char rk[32], *out = NULL;

	assert_non_null(p);
	write_config(x, "  alpha: {type: test-noop}\n");
	for (int i = 0; i < 200; i++) {
		snprintf(rk, sizeof(rk), "r%03d", i);
		put_job(&p[i], x, "alpha", "permanent", now - 60, "e", "p", rk, "");
	}
	int64_t t0 = itest_now_ms();
	poison_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--rate", "50", NULL});
	int64_t ms = itest_now_ms() - t0;
	ITEST_CHECK(strstr(out, "200 selected, 200 replayed") != NULL, "summary: %s", out);
	ITEST_CHECK(ms >= 3500 && ms <= 5000, "200 messages at --rate 50 took %lld ms, expected 3500..5000",
	            (long long)ms);
	assert_int_equal(queue_count(x, x->poison), 0);
	assert_int_equal(queue_count(x, x->queue), 200);
	free(out);
	puts_free(p, 200);
	proc_assert_logs_clean();
}

/* --dry-run and purge without --yes change nothing; purge --yes deletes
 * exactly the selected. */
static void test_poison__dry_run_and_purge(void **state)
{
	struct px *x = *state;
	struct put p[45];
	bool keep[45];
	time_t now = time(NULL);
	char rk[32], *out = NULL, *err = NULL;
	size_t nsel = 0;

	memset(p, 0, sizeof(p));
	write_config(x, "  alpha: {type: test-noop}\n  beta: {type: test-noop}\n");
	for (int i = 0; i < 45; i++) {
		const char *job = i % 3 == 0 ? "beta" : "alpha";
		snprintf(rk, sizeof(rk), "r%03d", i);
		put_job(&p[i], x, job, i % 2 ? "permanent" : "max-dequeue", now - (i % 4) * 86400, "e", "p",
		        rk, "");
		/* purge selects beta's that failed within the last 36 hours */
		keep[i] = !(i % 3 == 0 && i % 4 <= 1);
		nsel += !keep[i];
	}

	/* dry run: says what it would do, does nothing */
	poison_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--dry-run", NULL});
	size_t would = 0;
	for (const char *s = out; (s = strstr(s, "would replay")) != NULL; s++)
		would++;
	ITEST_CHECK(would == 45, "--dry-run printed %zu 'would replay' lines, expected 45:\n%.2000s", would,
	            out);
	free(out);
	assert_int_equal(queue_count(x, x->queue), 0);
	expect_poison_exactly(x, p, 45, NULL, true);

	/* purge without --yes: exit 2, nothing deleted */
	poison_expect(&out, &err, x, 2, "purge",
	              (const char *const[]){"--job", "beta", "--since", "36h", NULL});
	would = 0;
	for (const char *s = out; (s = strstr(s, "would delete")) != NULL; s++)
		would++;
	ITEST_CHECK(would == nsel, "purge without --yes listed %zu, expected %zu:\n%s", would, nsel, out);
	free(out);
	free(err);
	expect_poison_exactly(x, p, 45, NULL, true);

	/* purge --yes: exactly the selected are gone, the rest untouched */
	poison_expect(&out, NULL, x, 0, "purge",
	              (const char *const[]){"--job", "beta", "--since", "36h", "--yes", NULL});
	free(out);
	expect_poison_exactly(x, p, 45, keep, false);
	assert_int_equal(queue_count(x, x->queue), 0);
	puts_clear(p, 45);
	proc_assert_logs_clean();
}

/* Messages that are not envelopes: never selected by --job or --reason,
 * replayed unchanged byte for byte. */
static void test_poison__foreign_messages_replay_unchanged(void **state)
{
	struct px *x = *state;
	static const char *const foreign[] = {
	    /* what an Azure Functions poison queue holds: the message itself */
	    "process order 42 for Zo\xc3\xab: \"rush\" \\ <now> & later",
	    /* JSON, even a job message for alpha, but not an envelope */
	    "{\"job\":\"alpha\",\"pk\":\"p\",\"rk\":\"looks-like-a-job\"}",
	    /* envelope-like but without the marker / with another version */
	    "{\"ecw_poison\":2,\"original\":\"x\",\"job\":\"alpha\",\"reason\":\"permanent\"}",
	    "{\"ecw_poison\":1,\"job\":\"alpha\",\"reason\":\"permanent\"}",
	    /* an envelope followed by more text is not one */
	    "{\"ecw_poison\":1,\"original\":\"y\",\"job\":\"alpha\"} trailing",
	    /* base64 text */
	    "eyJqb2IiOiJhbHBoYSIsInBrIjoicCIsInJrIjoiYjY0In0=",
	};
	enum { NF = sizeof(foreign) / sizeof(foreign[0]) };
	struct put p[NF + 1];
	struct idset got;
	char *out = NULL;

	memset(p, 0, sizeof(p));
	write_config(x, "  alpha: {type: test-noop}\n");
	for (size_t i = 0; i < NF; i++) {
		p[i].text = strdup(foreign[i]);
		p[i].len = strlen(foreign[i]);
		put_text(p[i].id, x, x->poison, foreign[i], p[i].len);
	}
	char *orig = job_message("alpha", "p", "real", "");
	put_envelope(&p[NF], x, "alpha", "permanent", time(NULL) - 60, "e", orig, strlen(orig), "p", "real");

	/* --job and --reason select the real envelope only. */
	list_ids(&got, x, (const char *const[]){"--job", "alpha", NULL}, NULL);
	ITEST_CHECK(got.n == 1 && strcmp(got.v[0], p[NF].id) == 0, "--job alpha selected %zu messages",
	            got.n);
	idset_free(&got);
	list_ids(&got, x, (const char *const[]){"--reason", "permanent", NULL}, NULL);
	ITEST_CHECK(got.n == 1 && strcmp(got.v[0], p[NF].id) == 0, "--reason permanent selected %zu messages",
	            got.n);
	idset_free(&got);
	/* --since uses the time they were put: all of them are recent. */
	list_ids(&got, x, (const char *const[]){"--since", "10m", NULL}, NULL);
	assert_int_equal(got.n, NF + 1);
	idset_free(&got);

	/* replay --job alpha leaves every foreign message alone */
	poison_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--job", "alpha", NULL});
	free(out);
	bool keep[NF + 1];
	for (size_t i = 0; i < NF; i++)
		keep[i] = true;
	keep[NF] = false;
	expect_poison_exactly(x, p, NF + 1, keep, true);
	struct qset jq;
	read_queue(&jq, x, x->queue, false);
	ITEST_CHECK(jq.n == 1 && jq.v[0].len == strlen(orig) && memcmp(jq.v[0].text, orig, jq.v[0].len) == 0,
	            "the job queue holds %zu messages, expected the envelope's original", jq.n);
	qset_free(&jq);

	/* replay by --id: each foreign text goes back unchanged */
	const char *args[2 * NF + 2];
	size_t k = 0;
	for (size_t i = 0; i < NF; i++) {
		args[k++] = "--id";
		args[k++] = p[i].id;
	}
	args[k] = NULL;
	poison_expect(&out, NULL, x, 0, "replay", args);
	free(out);
	assert_int_equal(queue_count(x, x->poison), 0);
	read_queue(&jq, x, x->queue, false);
	assert_int_equal(jq.n, NF);
	for (size_t i = 0; i < NF; i++)
		ITEST_CHECK(qset_count_text(&jq, foreign[i], strlen(foreign[i])) == 1,
		            "foreign message %zu is not on the job queue byte for byte: %s", i, foreign[i]);
	qset_free(&jq);
	free(orig);
	puts_clear(p, NF + 1);
	proc_assert_logs_clean();
}

/* ---- crashes and concurrency (a private Azurite) ------------------------------------------ */

/* n envelopes of job alpha, originals with rk "r0000".. and a Zoë. */
static struct put *put_many(struct px *x, size_t n)
{
	struct put *p = calloc(n, sizeof(*p));
	time_t now = time(NULL);
	char rk[32];

	assert_non_null(p);
	for (size_t i = 0; i < n; i++) {
		snprintf(rk, sizeof(rk), "r%04zu", i);
		put_job(&p[i], x, "alpha", "permanent", now - 60, "e", "Zo\xc3\xab", rk,
		        "\"q\":\"\\\"x\\\"\"");
	}
	return p;
}

/* Every original is on the job queue (at least once) or still on the poison
 * queue as an envelope with that original; returns how many are on the job
 * queue. dups receives how many originals are on the job queue twice or more
 * or on both queues. */
static size_t expect_none_lost(struct px *x, const struct put *p, size_t n, size_t *dups, size_t *in_poison)
{
	struct qset jq, pq;
	size_t on_job = 0;

	read_queue(&jq, x, x->queue, false);
	read_queue(&pq, x, x->poison, false);
	*dups = 0;
	*in_poison = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j = qset_count_text(&jq, p[i].original, p[i].original_len);
		size_t k = envelopes_of(&pq, &p[i], NULL);
		ITEST_CHECK(j + k > 0, "original %zu (%.80s) is on neither queue: lost", i, p[i].original);
		on_job += j > 0;
		*in_poison += k > 0;
		*dups += j + k > 1;
	}
	ITEST_CHECK(jq.n <= n + *dups * 2 && pq.n <= n, "unexpected extra messages: %zu job, %zu poison",
	            jq.n, pq.n);
	qset_free(&jq);
	qset_free(&pq);
	return on_job;
}

/* Puts n envelopes (put_many), starts `replay --rate 100 --hold HOLD`,
 * sends sig after ms and waits for the exit. */
static struct put *replay_then_signal(struct proc *r, struct px *x, size_t n, const char *hold, int ms,
                                      int sig)
{
	write_config(x, "  alpha: {type: test-noop}\n");
	struct put *p = put_many(x, n);
	const char *args[] = {"poison", "replay", "-c", x->cfg, "--rate", "100", "--hold", hold, NULL};
	proc_start(r, "poison-replay-signal", args, x->env);
	itest_sleep_ms(ms);
	ITEST_CHECK(proc_alive(r), "the replay ended before signal %d (status %d):\n%s", sig,
	            proc_exit_code(r), proc_tail(r->log_path, 20));
	proc_signal(r, sig);
	ITEST_CHECK(proc_wait(r, 10000), "the replay did not end within 10 s of signal %d", sig);
	return p;
}

static void test_poison__replay_killed_loses_nothing(void **state)
{
	struct px *x = *state;
	const size_t n = 500;
	size_t dups, in_poison;
	struct proc r;

	struct put *p = replay_then_signal(&r, x, n, "3s", 2000, SIGKILL);
	/* What it held reappears once its hold (3 s) ends. */
	itest_sleep_ms(4000);
	size_t on_job = expect_none_lost(x, p, n, &dups, &in_poison);
	ITEST_CHECK(on_job > 0 && in_poison > 0,
	            "killed after 2 s at 100/s: %zu on the job queue, %zu still poisoned", on_job, in_poison);
	print_message("killed replay: %zu on the job queue, %zu still on the poison queue, %zu on both\n",
	              on_job, in_poison, dups);
	puts_free(p, n);
	proc_assert_logs_clean();
}

/* Ctrl-C (SIGINT) stops after the message in hand, exits 130, and releases
 * what it held at once: with the default hold (60 s), every message not
 * replayed is visible again right after the exit, none on both queues. */
static void test_poison__replay_interrupted_releases_at_once(void **state)
{
	struct px *x = *state;
	const size_t n = 200;
	size_t dups, in_poison;
	struct proc r;

	struct put *p = replay_then_signal(&r, x, n, "60s", 1000, SIGINT);
	ITEST_CHECK(proc_exit_code(&r) == 130, "exit status %d after SIGINT, expected 130:\n%s",
	            proc_exit_code(&r), proc_tail(r.log_path, 20));
	size_t on_job = expect_none_lost(x, p, n, &dups, &in_poison);
	assert_int_equal(dups, 0);
	assert_int_equal(on_job + in_poison, n);
	ITEST_CHECK(on_job > 0 && in_poison > 0, "%zu replayed, %zu left: not interrupted midway", on_job,
	            in_poison);
	puts_free(p, n);
	proc_assert_logs_clean();
}

/* --hold takes the units its error message names (1s to 7d). */
static void test_poison__hold_accepts_days(void **state)
{
	struct px *x = *state;

	write_config(x, "  alpha: {type: test-noop}\n");
	poison_expect(NULL, NULL, x, 0, "list", (const char *const[]){"--hold", "1d", NULL});
	poison_expect(NULL, NULL, x, 0, "list", (const char *const[]){"--hold", "2h", NULL});
	poison_expect(NULL, NULL, x, 2, "list", (const char *const[]){"--hold", "8d", NULL});
	proc_assert_logs_clean();
}

static void test_poison__two_replays_at_once(void **state)
{
	struct px *x = *state;
	const size_t n = 300;
	size_t dups, in_poison;
	struct proc r[2];

	write_config(x, "  alpha: {type: test-noop}\n");
	struct put *p = put_many(x, n);
	const char *args[] = {"poison", "replay", "-c", x->cfg, NULL};
	proc_start(&r[0], "poison-replay-a", args, x->env);
	proc_start(&r[1], "poison-replay-b", args, x->env);
	for (int i = 0; i < 2; i++) {
		ITEST_CHECK(proc_wait(&r[i], 60000), "replay %d still running after 60 s", i);
		ITEST_CHECK(proc_exit_code(&r[i]) == 0, "replay %d exited %d:\n%s", i, proc_exit_code(&r[i]),
		            proc_tail(r[i].log_path, 20));
	}
	assert_int_equal(queue_count(x, x->poison), 0);
	size_t on_job = expect_none_lost(x, p, n, &dups, &in_poison);
	assert_int_equal(on_job, n);
	assert_int_equal(in_poison, 0);
	print_message("two replays: %zu originals replayed, %zu twice\n", on_job, dups);
	puts_free(p, n);
	proc_assert_logs_clean();
}

/* ---- the canary ------------------------------------------------------------------------ */

/* More than one peek shows: the canary's look at the poison queue receives. */
#define N_CANARY 40

static void test_poison__canary_poisoned_again_stops(void **state)
{
	struct px *x = *state;
	struct put p[N_CANARY];
	char rk[32], *out = NULL, *err = NULL;
	struct proc w;
	time_t now = time(NULL);

	memset(p, 0, sizeof(p));
	write_config(x, "  doomed: {type: test-fail}\n");
	for (int i = 0; i < N_CANARY; i++) {
		snprintf(rk, sizeof(rk), "c%02d", i);
		put_job(&p[i], x, "doomed", "permanent", now - 600, "first failure", "p", rk, "");
	}
	proc_start_worker(&w, "poison-canary-fail-worker", x->cfg);
	int code = poison_cmdv(&out, &err, x, "replay",
	                       (const char *const[]){"--canary", "3", "--canary-wait", "30s", NULL});
	/* The replay stops at the first canary that comes back; the worker
	 * poisons the other canaries too, once it gets to them. */
	for (int64_t end = itest_now_ms() + 20000; queue_count(x, x->queue) > 0 && itest_now_ms() < end;)
		itest_sleep_ms(100);
	proc_stop(&w, 20000);
	ITEST_CHECK(code == 1, "replay --canary exited %d, expected 1\n-- stdout:\n%s\n-- stderr:\n%s", code,
	            out, err);
	ITEST_CHECK(strstr(err, "poisoned again") != NULL, "stderr does not report 'poisoned again':\n%s",
	            err);
	free(out);
	free(err);

	/* The others untouched, the 3 canaries replaced by new envelopes of
	 * the same originals. */
	struct qset pq;
	size_t untouched = 0, again = 0;
	read_queue(&pq, x, x->poison, false);
	assert_int_equal(queue_count(x, x->queue), 0);
	for (int i = 0; i < N_CANARY; i++) {
		const struct qmsg *q = qset_find_id(&pq, p[i].id);
		if (q) {
			ITEST_CHECK(q->len == p[i].len && memcmp(q->text, p[i].text, q->len) == 0,
			            "untouched envelope %d changed", i);
			untouched++;
			continue;
		}
		size_t found = envelopes_of(&pq, &p[i], "can never succeed");
		ITEST_CHECK(found == 1, "canary %d did not come back as one new envelope (%zu)", i, found);
		again++;
	}
	assert_int_equal(untouched, N_CANARY - 3);
	assert_int_equal(again, 3);
	assert_int_equal(pq.n, N_CANARY);
	qset_free(&pq);
	puts_clear(p, N_CANARY);
	proc_assert_logs_clean();
}

static void test_poison__canary_ok_replays_the_rest(void **state)
{
	struct px *x = *state;
	struct put p[40];
	char rk[32], *out = NULL, *err = NULL;
	struct proc w;
	time_t now = time(NULL);

	memset(p, 0, sizeof(p));
	x->table_used = true;
	ECW_ASSERT_OK(ecw_table_create(NULL, x->c, x->table));
	write_config(x, "  count: {type: test-count, table: %T}\n");
	for (int i = 0; i < 40; i++) {
		snprintf(rk, sizeof(rk), "k%02d", i);
		put_job(&p[i], x, "count", "max-dequeue", now - 600, "was down", "p", rk, "");
	}
	proc_start_worker(&w, "poison-canary-ok-worker", x->cfg);
	int code = poison_cmdv(&out, &err, x, "replay",
	                       (const char *const[]){"--canary", "3", "--canary-wait", "30s", NULL});
	ITEST_CHECK(code == 0, "replay --canary exited %d, expected 0\n-- stdout:\n%s\n-- stderr:\n%s", code,
	            out, err);
	ITEST_CHECK(strstr(out, "40 selected, 40 replayed") != NULL, "summary: %s\n%s", out, err);
	free(out);
	free(err);
	assert_int_equal(queue_count(x, x->poison), 0);
	size_t runs = wait_runs(x, 40, 30000);
	proc_stop(&w, 20000);
	assert_int_equal(runs, 40);
	for (int i = 0; i < 40; i++) {
		snprintf(rk, sizeof(rk), "k%02d", i);
		ITEST_CHECK(runs_for(x, rk) == 1, "%s was not run once", rk);
	}
	assert_int_equal(queue_count(x, x->poison), 0);
	puts_clear(p, 40);
	proc_assert_logs_clean();
}

/* ---- help ------------------------------------------------------------------------------ */

static void test_poison__help_names_every_option(void **state)
{
	(void)state;
	static const char *const filters[] = {"--job",   "--reason", "--since",  "--grep", "--id",
	                                      "--limit", "--hold",   "--config", "--help", NULL};
	static const struct {
		const char *sub;
		const char *opts[8];
	} subs[] = {
	    {"list", {"--json", NULL}},
	    {"replay", {"--to", "--rate", "--dry-run", "--canary", "--canary-wait", NULL}},
	    {"purge", {"--yes", NULL}},
	};
	char *out = NULL;

	int code =
	    proc_run(&out, NULL, "poison-help", (const char *const[]){"poison", "--help", NULL}, NULL, 10000);
	assert_int_equal(code, 0);
	for (size_t i = 0; i < 3; i++)
		ITEST_CHECK(strstr(out, subs[i].sub) != NULL, "poison --help does not name %s:\n%s",
		            subs[i].sub, out);
	free(out);
	for (size_t i = 0; i < 3; i++) {
		code = proc_run(&out, NULL, "poison-sub-help",
		                (const char *const[]){"poison", subs[i].sub, "--help", NULL}, NULL, 10000);
		ITEST_CHECK(code == 0, "poison %s --help exited %d", subs[i].sub, code);
		for (size_t k = 0; filters[k]; k++)
			ITEST_CHECK(strstr(out, filters[k]) != NULL,
			            "poison %s --help does not mention %s:\n%s", subs[i].sub, filters[k],
			            out);
		for (size_t k = 0; subs[i].opts[k]; k++)
			ITEST_CHECK(strstr(out, subs[i].opts[k]) != NULL,
			            "poison %s --help does not mention %s:\n%s", subs[i].sub, subs[i].opts[k],
			            out);
		free(out);
	}
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_poison__help_names_every_option, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__list_json_fields, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__list_filters_select_exactly, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__dry_run_and_purge, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__foreign_messages_replay_unchanged, px_setup,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__replay_moves_originals_byte_for_byte, px_setup,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__canary_poisoned_again_stops, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__canary_ok_replays_the_rest, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__replay_rate_paces, px_setup_private, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__replay_killed_loses_nothing, px_setup_private,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__two_replays_at_once, px_setup_private, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__replay_interrupted_releases_at_once,
	                                    px_setup_private, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison__hold_accepts_days, px_setup, px_teardown),
	};
	return cmocka_run_group_tests_name("poison", tests, NULL, NULL);
}
