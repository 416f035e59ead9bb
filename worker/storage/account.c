/* SPDX-License-Identifier: MIT */
/* account.c - connection strings, parsed as the Azure SDKs parse them:
 * split on ';', skip empty parts, split each at its FIRST '=' (keys end in
 * '='), names case-insensitive. An explicit endpoint wins; otherwise it is
 * {protocol}://{account}.{queue|table|blob}.{suffix}. The blob endpoint is
 * optional (a queue-and-table string without AccountName has none), and a
 * derived one that would break the plain-http rule below is left out rather
 * than failing a string that worked before blobs came (account.h's
 * blob_none says why; blob calls quote it). Errors name the setting at
 * fault and never echo a value that could be a secret. The same parser reads
 * the endpoints-only strings of token authentication, where a key or a SAS
 * is an error (the account then carries a token credential instead).
 *
 * Plain http: a Shared Key signature, a SAS or a bearer token sent over it
 * can be read (and a SAS or token replayed) by anyone on the path, so an
 * account refuses an http endpoint unless the traffic never leaves the
 * machine (a loopback host, url.h) or the secret is no secret (the
 * emulator's published devstoreaccount1 key, which Azurite in a compose
 * network serves as http://azurite:10001). Tokens always need https: no
 * token endpoint is set up for a local http service.
 *
 * Rotation: a key or a SAS read from a file that is rewritten in place (a
 * Kubernetes Secret) is replaced in the account while clients use it
 * (ecw_account_update_secret), under the secret's lock, its generation
 * counted up. A client whose request is refused tells the account which
 * generation was refused (ecw_account_secret_refused): the reload the
 * worker set is asked only when that generation is still the one in place,
 * by one client at a time and at most once per interval, so a burst of
 * refusals (a SAS expired under every thread at once) reads the file once. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "account.h"
#include "ecw_clock.h"
#include "ecw_codec.h"
#include "url.h"

#define DEV_ACCOUNT "devstoreaccount1"
#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

enum setting {
	S_PROTOCOL,
	S_NAME,
	S_KEY,
	S_SUFFIX,
	S_QUEUE_EP,
	S_TABLE_EP,
	S_BLOB_EP,
	S_SAS,
	S_DEV,
	S_IGNORED, /* recognised, not used by a queue/table client */
	S_COUNT
};

static const struct {
	const char *name;
	enum setting s;
} settings[] = {
	{"DefaultEndpointsProtocol", S_PROTOCOL},
	{"AccountName", S_NAME},
	{"AccountKey", S_KEY},
	{"EndpointSuffix", S_SUFFIX},
	{"QueueEndpoint", S_QUEUE_EP},
	{"TableEndpoint", S_TABLE_EP},
	{"SharedAccessSignature", S_SAS},
	{"UseDevelopmentStorage", S_DEV},
	{"BlobEndpoint", S_BLOB_EP},
	{"FileEndpoint", S_IGNORED},
	{"BlobSecondaryEndpoint", S_IGNORED},
	{"QueueSecondaryEndpoint", S_IGNORED},
	{"TableSecondaryEndpoint", S_IGNORED},
	{"FileSecondaryEndpoint", S_IGNORED},
};

/* Wipes and frees a key and a SAS: a secret should not outlive its use in
 * freed heap memory. */
static void wipe_secret(unsigned char *key, size_t key_len, char *sas)
{
	if (key) {
		explicit_bzero(key, key_len);
		free(key);
	}
	if (sas) {
		explicit_bzero(sas, strlen(sas));
		free(sas);
	}
}

static struct ecw_account *account_new(void)
{
	struct ecw_account *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	for (int svc = 0; svc < ECW_SVC_COUNT; svc++)
		a->endpoint_path[svc] = "";
	pthread_rwlock_init(&a->secret_lock, NULL);
	pthread_mutex_init(&a->reload_mu, NULL);
	return a;
}

void ecw_account_free(struct ecw_account *a)
{
	if (!a)
		return;
	free(a->name);
	wipe_secret(a->key, a->key_len, a->sas);
	for (int svc = 0; svc < ECW_SVC_COUNT; svc++)
		free(a->endpoint[svc]);
	ecw_token_credential_free(a->cred);
	if (a->reload_payload_free)
		a->reload_payload_free(a->reload_payload);
	pthread_rwlock_destroy(&a->secret_lock);
	pthread_mutex_destroy(&a->reload_mu);
	free(a);
}

void ecw_account_take_credential(struct ecw_account *a, struct ecw_token_credential *cred)
{
	ecw_token_credential_free(a->cred);
	a->cred = cred;
}

const char *ecw_account_auth_name(const struct ecw_account *a)
{
	const char *name;

	if (a->cred)
		return ecw_token_source_name(ecw_token_credential_source(a->cred));
	ecw_account_secret_hold(a);
	name = a->sas ? "sas" : a->key ? "shared-key" : "none";
	ecw_account_secret_release(a);
	return name;
}

const char *ecw_account_name(const struct ecw_account *a)
{
	return a->name;
}

const char *ecw_account_endpoint(const struct ecw_account *a, enum ecw_service svc)
{
	return a->endpoint[svc];
}

bool ecw_account_uses_sas(const struct ecw_account *a)
{
	bool sas;

	ecw_account_secret_hold(a);
	sas = a->sas != NULL;
	ecw_account_secret_release(a);
	return sas;
}

/* The value of the SAS field name (n bytes in *len), or NULL when absent.
 * Field values of a SAS are letters, never percent-encoded ones here. */
static const char *sas_field(const char *sas, const char *name, size_t *len)
{
	size_t nl = strlen(name);

	for (const char *p = sas; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		if (strncmp(p, name, nl) == 0 && p[nl] == '=') {
			*len = strcspn(p + nl + 1, "&");
			return p + nl + 1;
		}
	}
	return NULL;
}

static bool field_has(const char *sas, const char *name, const char *any_of)
{
	size_t len = 0;
	const char *v = sas_field(sas, name, &len);

	for (size_t i = 0; v && i < len; i++)
		if (strchr(any_of, v[i]))
			return true;
	return false;
}

bool ecw_account_may_create(const struct ecw_account *a, enum ecw_service svc)
{
	bool may;

	ecw_account_secret_hold(a);
	may = !a->sas || (field_has(a->sas, "ss",
				    svc == ECW_SVC_TABLE  ? "t"
				    : svc == ECW_SVC_BLOB ? "b"
							  : "q") &&
			  field_has(a->sas, "srt", "c") && field_has(a->sas, "sp", "wc"));
	ecw_account_secret_release(a);
	return may;
}

/* Endpoints must be http(s)://host[:port][/path] with nothing after the path. */
static int set_endpoint(struct ecw_account *a, enum ecw_service svc, const char *url, size_t n,
			const char *setting)
{
	const char *host, *slash;
	char *copy;

	while (n > 0 && url[n - 1] == '/')
		n--;
	if (n > 8 && strncasecmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (n > 7 && strncasecmp(url, "http://", 7) == 0)
		host = url + 7;
	else
		return ecw_error_set(ECW_EINVALID,
				     "connection string: %s must start with http:// or https://", setting);
	if (host >= url + n || *host == '/' || memchr(url, '?', n) || memchr(url, '#', n))
		return ecw_error_set(ECW_EINVALID, "connection string: %s is not a valid URL", setting);
	copy = strndup(url, n);
	if (!copy)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	free(a->endpoint[svc]);
	a->endpoint[svc] = copy;
	slash = memchr(host, '/', (size_t)(url + n - host));
	a->endpoint_path[svc] = slash ? copy + (slash - url) : copy + n;
	return 0;
}

/* The emulator's account with its published key: nothing secret to protect. */
static bool emulator_account(const struct ecw_account *a, const char *key, size_t key_len)
{
	return strcmp(a->name, DEV_ACCOUNT) == 0 && key && key_len == strlen(DEV_KEY) &&
	       memcmp(key, DEV_KEY, key_len) == 0;
}

static const char *const setting_name[ECW_SVC_COUNT] = {"QueueEndpoint", "TableEndpoint", "BlobEndpoint"};

/* The endpoints against the plain-http rule (see the top of the file). The
 * endpoint is named in full: it is a URL without a query (set_endpoint), so
 * never a secret. A blob endpoint derived from AccountName (blob_derived)
 * that breaks the rule is dropped, not an error. */
static int check_plain_http(struct ecw_account *a, bool for_token, const char *key, size_t key_len,
			    bool blob_derived)
{
	for (int svc = 0; svc < ECW_SVC_COUNT; svc++) {
		const char *ep = a->endpoint[svc], *setting = setting_name[svc];
		size_t n = ep ? strlen(ep) : 0;

		if (!ep || !ecw_url_is_plain_http(ep, n))
			continue;
		if (!for_token && (ecw_url_is_loopback(ep, n) || emulator_account(a, key, key_len)))
			continue;
		if (svc == ECW_SVC_BLOB && blob_derived) {
			free(a->endpoint[svc]);
			a->endpoint[svc] = NULL;
			a->endpoint_path[svc] = "";
			a->blob_none =
				"the blob endpoint derived from AccountName is http:// (give BlobEndpoint)";
			continue;
		}
		if (for_token)
			return ecw_error_set(
				ECW_EINVALID,
				"connection string: %s %s is http://: with token authentication every "
				"endpoint must be https:// (a bearer token is a secret)",
				setting, ep);
		return ecw_error_set(
			ECW_EINVALID,
			"connection string: %s %s is http://: the %s would cross the network in "
			"the clear; use https:// (http is only for a loopback host, 127.0.0.0/8, ::1 "
			"or localhost, or the emulator's devstoreaccount1 account)",
			setting, ep, a->sas ? "SharedAccessSignature" : "AccountKey's signature");
	}
	return 0;
}

/* for_token: endpoints only; a key, a SAS or the emulator's settings are errors. */
static int parse(struct ecw_account **out, const char *connstr, bool for_token)
{
	const char *val[S_COUNT] = {0};
	size_t vlen[S_COUNT] = {0};
	struct ecw_account *a = NULL;
	struct ecw_buf tmp;
	const char *p, *end;
	int err = ECW_EINVALID, part = 0;
	bool blob_derived;

	*out = NULL;
	ecw_buf_init(&tmp, 0);
	if (!connstr || !*connstr) {
		err = ecw_error_set(ECW_EINVALID, "connection string is empty");
		goto done;
	}
	for (p = connstr; *p; p = *end ? end + 1 : end) {
		const char *eq;
		size_t i;

		end = strchr(p, ';');
		if (!end)
			end = p + strlen(p);
		if (end == p)
			continue;
		part++;
		eq = memchr(p, '=', (size_t)(end - p));
		if (!eq || eq == p) {
			err = ecw_error_set(ECW_EINVALID, "connection string: part %d is not Name=value",
					    part);
			goto done;
		}
		for (i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
			if (strlen(settings[i].name) == (size_t)(eq - p) &&
			    strncasecmp(settings[i].name, p, (size_t)(eq - p)) == 0)
				break;
		if (i == sizeof(settings) / sizeof(settings[0])) {
			/* A name is quoted only when it looks like one: a key pasted
			 * without "AccountKey=" has '=' padding, so all of it before
			 * the padding would otherwise be "the name". */
			bool word = eq - p <= 32;
			for (const char *c = p; word && c < eq; c++)
				word = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z');
			if (word)
				err = ecw_error_set(ECW_EINVALID, "connection string: unknown setting '%.*s'",
						    (int)(eq - p), p);
			else
				err = ecw_error_set(
					ECW_EINVALID,
					"connection string: part %d is not a known setting (Name=value)",
					part);
			goto done;
		}
		val[settings[i].s] = eq + 1;
		vlen[settings[i].s] = (size_t)(end - eq - 1);
	}
	if (part == 0) {
		err = ecw_error_set(ECW_EINVALID, "connection string has no settings");
		goto done;
	}

	if (!(a = account_new())) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}

	if (for_token && (val[S_KEY] || val[S_SAS] || val[S_DEV])) {
		err = ecw_error_set(
			ECW_EINVALID,
			"connection string: %s cannot be used with token authentication "
			"(give only QueueEndpoint, TableEndpoint and BlobEndpoint, or AccountName)",
			val[S_KEY]   ? "AccountKey"
			: val[S_SAS] ? "SharedAccessSignature"
				     : "UseDevelopmentStorage");
		goto done;
	}
	if (val[S_DEV]) {
		if (vlen[S_DEV] != 4 || strncasecmp(val[S_DEV], "true", 4) != 0) {
			err = ecw_error_set(ECW_EINVALID,
					    "connection string: UseDevelopmentStorage must be 'true'");
			goto done;
		}
		if (val[S_NAME] || val[S_KEY] || val[S_SAS] || val[S_QUEUE_EP] || val[S_TABLE_EP] ||
		    val[S_BLOB_EP]) {
			err = ecw_error_set(
				ECW_EINVALID,
				"connection string: UseDevelopmentStorage cannot be combined with account or endpoint settings");
			goto done;
		}
		val[S_NAME] = DEV_ACCOUNT;
		vlen[S_NAME] = strlen(DEV_ACCOUNT);
		val[S_KEY] = DEV_KEY;
		vlen[S_KEY] = strlen(DEV_KEY);
		if ((err = set_endpoint(a, ECW_SVC_QUEUE, "http://127.0.0.1:10001/" DEV_ACCOUNT,
					strlen("http://127.0.0.1:10001/" DEV_ACCOUNT), "QueueEndpoint")) <
			    0 ||
		    (err = set_endpoint(a, ECW_SVC_TABLE, "http://127.0.0.1:10002/" DEV_ACCOUNT,
					strlen("http://127.0.0.1:10002/" DEV_ACCOUNT), "TableEndpoint")) <
			    0 ||
		    (err = set_endpoint(a, ECW_SVC_BLOB, "http://127.0.0.1:10000/" DEV_ACCOUNT,
					strlen("http://127.0.0.1:10000/" DEV_ACCOUNT), "BlobEndpoint")) < 0)
			goto done;
	}

	if (!(a->name = strndup(val[S_NAME] ? val[S_NAME] : "", vlen[S_NAME]))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	for (const char *c = a->name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z'))) {
			err = ecw_error_set(ECW_EINVALID,
					    "connection string: AccountName must be letters and digits");
			goto done;
		}

	if (val[S_KEY]) {
		if (vlen[S_KEY] == 0 || ecw_base64_decode(&tmp, val[S_KEY], vlen[S_KEY]) < 0 ||
		    tmp.len == 0) {
			err = ecw_error_set(ECW_EINVALID,
					    "connection string: AccountKey is not valid base64");
			goto done;
		}
		if (!a->name[0]) {
			err = ecw_error_set(ECW_EINVALID, "connection string: AccountKey needs AccountName");
			goto done;
		}
		a->key_len = tmp.len;
		a->key = (unsigned char *)ecw_buf_take(&tmp);
	}
	if (val[S_SAS]) {
		const char *s = val[S_SAS];
		size_t n = vlen[S_SAS];
		if (n && *s == '?')
			s++, n--;
		if (n == 0 || memchr(s, '#', n) || memchr(s, ' ', n)) {
			err = ecw_error_set(ECW_EINVALID,
					    "connection string: SharedAccessSignature is empty or malformed");
			goto done;
		}
		if (!(a->sas = strndup(s, n))) {
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
			goto done;
		}
	}
	if (!for_token && !a->key && !a->sas) {
		err = ecw_error_set(
			ECW_EINVALID,
			"connection string: needs AccountKey or SharedAccessSignature (or UseDevelopmentStorage=true)");
		goto done;
	}

	if (val[S_QUEUE_EP] &&
	    (err = set_endpoint(a, ECW_SVC_QUEUE, val[S_QUEUE_EP], vlen[S_QUEUE_EP], "QueueEndpoint")) < 0)
		goto done;
	if (val[S_TABLE_EP] &&
	    (err = set_endpoint(a, ECW_SVC_TABLE, val[S_TABLE_EP], vlen[S_TABLE_EP], "TableEndpoint")) < 0)
		goto done;
	if (val[S_BLOB_EP] &&
	    (err = set_endpoint(a, ECW_SVC_BLOB, val[S_BLOB_EP], vlen[S_BLOB_EP], "BlobEndpoint")) < 0)
		goto done;
	blob_derived = !a->endpoint[ECW_SVC_BLOB];

	for (int svc = 0; svc < ECW_SVC_COUNT; svc++) {
		static const char *const host_part[ECW_SVC_COUNT] = {"queue", "table", "blob"};
		const char *proto = "https";
		size_t plen = 5;
		if (a->endpoint[svc])
			continue;
		if (!a->name[0] && svc == ECW_SVC_BLOB) {
			a->blob_none = "the connection string has neither BlobEndpoint nor AccountName";
			continue;
		}
		if (!a->name[0]) {
			err = ecw_error_set(ECW_EINVALID, "connection string: %s or AccountName is required",
					    setting_name[svc]);
			goto done;
		}
		if (val[S_PROTOCOL]) {
			if (!((vlen[S_PROTOCOL] == 5 && strncasecmp(val[S_PROTOCOL], "https", 5) == 0) ||
			      (vlen[S_PROTOCOL] == 4 && strncasecmp(val[S_PROTOCOL], "http", 4) == 0))) {
				err = ecw_error_set(
					ECW_EINVALID,
					"connection string: DefaultEndpointsProtocol must be http or https");
				goto done;
			}
			proto = vlen[S_PROTOCOL] == 4 ? "http" : "https";
			plen = vlen[S_PROTOCOL];
		}
		ecw_buf_reset(&tmp);
		if (val[S_SUFFIX] && (vlen[S_SUFFIX] == 0 || memchr(val[S_SUFFIX], '/', vlen[S_SUFFIX]))) {
			err = ecw_error_set(ECW_EINVALID,
					    "connection string: EndpointSuffix must be a host suffix");
			goto done;
		}
		if ((err = ecw_buf_printf(&tmp, "%.*s://%s.%s.%.*s", (int)plen, proto, a->name,
					  host_part[svc],
					  (int)(val[S_SUFFIX] ? vlen[S_SUFFIX] : strlen("core.windows.net")),
					  val[S_SUFFIX] ? val[S_SUFFIX] : "core.windows.net")) < 0 ||
		    (err = set_endpoint(a, (enum ecw_service)svc, tmp.ptr, tmp.len, setting_name[svc])) < 0)
			goto done;
	}
	if ((err = check_plain_http(a, for_token, val[S_KEY], vlen[S_KEY], blob_derived)) < 0)
		goto done;
	*out = a;
	a = NULL;
	err = 0;
done:
	if (tmp.ptr)
		memset(tmp.ptr, 0, tmp.cap);
	ecw_buf_dispose(&tmp);
	ecw_account_free(a);
	return err;
}

int ecw_account_parse(struct ecw_account **out, const char *connstr)
{
	return parse(out, connstr, false);
}

int ecw_account_parse_endpoints(struct ecw_account **out, const char *connstr)
{
	return parse(out, connstr, true);
}

/* ---- the secret, replaced while clients use it ------------------------------ */

/* The secret's lock and the reload's state are the parts of an account that
 * change once clients share it: they are taken through a const account. */
static struct ecw_account *mutable_part(const struct ecw_account *a)
{
	return (struct ecw_account *)a;
}

uint64_t ecw_account_secret_hold(const struct ecw_account *a)
{
	pthread_rwlock_rdlock(&mutable_part(a)->secret_lock);
	return a->gen;
}

void ecw_account_secret_release(const struct ecw_account *a)
{
	pthread_rwlock_unlock(&mutable_part(a)->secret_lock);
}

static bool same_secret(const struct ecw_account *a, const struct ecw_account *b)
{
	return a->key_len == b->key_len && (!a->key) == (!b->key) &&
	       (!a->key || memcmp(a->key, b->key, a->key_len) == 0) && (!a->sas) == (!b->sas) &&
	       (!a->sas || strcmp(a->sas, b->sas) == 0);
}

static bool same_endpoints(const struct ecw_account *a, const struct ecw_account *b)
{
	for (int svc = 0; svc < ECW_SVC_COUNT; svc++)
		if ((!a->endpoint[svc]) != (!b->endpoint[svc]) ||
		    (a->endpoint[svc] && strcmp(a->endpoint[svc], b->endpoint[svc]) != 0))
			return false;
	return true;
}

int ecw_account_update_secret(struct ecw_account *a, const char *connstr)
{
	struct ecw_account *n = NULL;
	unsigned char *key;
	size_t key_len;
	char *sas;
	int err;

	if (a->cred)
		return ecw_error_set(
			ECW_EINVALID,
			"the account authenticates with tokens: it has no key or SAS to replace");
	if ((err = ecw_account_parse(&n, connstr)) < 0)
		return err;
	/* Endpoints and name are read without the lock (they never change):
	 * only the secret may. */
	if (strcmp(n->name, a->name) != 0 || !same_endpoints(a, n)) {
		err = ecw_error_set(ECW_EINVALID,
				    "connection string: it names another account or other endpoints than the "
				    "ones in use; only the key or the SAS can change without a restart");
		goto done;
	}
	pthread_rwlock_wrlock(&a->secret_lock);
	if (same_secret(a, n)) {
		pthread_rwlock_unlock(&a->secret_lock);
		err = 0;
		goto done;
	}
	/* The new secret in, the old one into n, which wipes it as it goes. */
	key = a->key, key_len = a->key_len, sas = a->sas;
	a->key = n->key, a->key_len = n->key_len, a->sas = n->sas;
	n->key = key, n->key_len = key_len, n->sas = sas;
	a->gen++;
	pthread_rwlock_unlock(&a->secret_lock);
	err = 1;
done:
	ecw_account_free(n);
	return err;
}

void ecw_account_set_reload(struct ecw_account *a, ecw_account_reload_fn reload, void *payload,
			    void (*payload_free)(void *payload), int64_t interval_ms)
{
	if (a->reload_payload_free)
		a->reload_payload_free(a->reload_payload);
	a->reload = reload;
	a->reload_payload = payload;
	a->reload_payload_free = payload_free;
	a->reload_interval_ms = interval_ms;
	a->reload_asked = false;
}

bool ecw_account_secret_refused(const struct ecw_account *a, uint64_t gen)
{
	struct ecw_account *m = mutable_part(a);
	struct ecw_error refusal;
	bool again = false;
	uint64_t current;

	if (!a->reload)
		return false;
	/* One caller at a time: the others wait here, then find the new
	 * generation in place or the interval not over. */
	pthread_mutex_lock(&m->reload_mu);
	current = ecw_account_secret_hold(a);
	ecw_account_secret_release(a);
	if (current != gen) {
		again = true;
	} else if (!m->reload_asked || ecw_clock_now_ms() - m->reloaded_at_ms >= m->reload_interval_ms) {
		m->reload_asked = true;
		m->reloaded_at_ms = ecw_clock_now_ms();
		/* The refusal stays the caller's last error, whatever the reload
		 * met on the way. */
		refusal = *ecw_error_last();
		again = m->reload(m, m->reload_payload) > 0;
		ecw_error_set_http(refusal.code, refusal.http_status, refusal.service_code,
				   refusal.request_id, "%s", refusal.message);
	}
	pthread_mutex_unlock(&m->reload_mu);
	return again;
}
