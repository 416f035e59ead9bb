/* SPDX-License-Identifier: MIT */
/* fuzz_config.c - the YAML configuration (ecw_config_parse: worker/yaml/node.c
 * and worker/config/config.c) with the real job types' settings readers (jobs/),
 * from a buffer.
 * Invariants: success means no error lines and a configuration; failure
 * means ECW_EINVALID (or ENOMEM), no configuration and at least one error;
 * every error line is one line naming the file; and no error line ever shows
 * the value of an expanded ${VAR} (ECW_FUZZ_SECRET holds a marker that the
 * input itself does not contain). */
#define _GNU_SOURCE /* memmem */
#include "ecw_config.h"
#include "fuzz.h"

#define SECRET "Zq7SeCrEtVaLuE9xK"

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("ECW_FUZZ_SECRET", SECRET, 1);
	setenv("ECW_FUZZ_CONN",
	       "DefaultEndpointsProtocol=https;AccountName=fuzzacct;AccountKey=" SECRET "AAAAA==", 1);
	setenv("ECW_FUZZ_EMPTY", "", 1);
	unsetenv("ECW_FUZZ_UNSET");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_exact(data, size);
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	bool mentions_secret = memmem(data, size, "SeCrEt", 6) != NULL;
	int err;

	ecw_node_errors_init(&errs);
	err = ecw_config_parse(&cfg, text, size, "fuzz.yaml", &errs);
	if (err == 0) {
		FUZZ_CHECK(cfg != NULL && errs.n == 0);
		for (size_t i = 0; i < cfg->njobs; i++) {
			FUZZ_CHECK(cfg->jobs[i].name && cfg->jobs[i].type);
			FUZZ_CHECK(ecw_config_job(cfg, cfg->jobs[i].name) == &cfg->jobs[i]);
		}
		FUZZ_CHECK(cfg->worker.queue && cfg->worker.poison_queue && cfg->metrics.listen);
		FUZZ_CHECK(cfg->worker.batch_size >= 1 && cfg->worker.batch_size <= 32);
		FUZZ_CHECK(cfg->worker.poll_min_ms <= cfg->worker.poll_max_ms);
		FUZZ_CHECK(cfg->worker.retry_backoff_base_ms <= cfg->worker.retry_backoff_max_ms);
	} else {
		FUZZ_CHECK(cfg == NULL);
		FUZZ_CHECK(err == ECW_EINVALID || err == ECW_ENOMEM);
		FUZZ_CHECK(err != ECW_EINVALID || errs.n > 0);
	}
	for (size_t i = 0; i < errs.n; i++) {
		FUZZ_CHECK(strncmp(errs.lines[i], "fuzz.yaml:", 10) == 0);
		FUZZ_CHECK(!strchr(errs.lines[i], '\n'));
		FUZZ_CHECK(mentions_secret || !strstr(errs.lines[i], "SeCrEt"));
	}
	ecw_config_free(cfg);
	ecw_node_errors_dispose(&errs);
	free(text);
	return 0;
}
