/* auth.c: registry credentials: the one provider interface (struct ix_auth) and its implementations: explicit credentials, auth files (containers auth.json, docker config.json) and docker-credential helpers. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/error.h"
#include "index/dist/dist.h"
#include "store/sys.h"

/* ------------------------------------------------------------ auth files */

/* Does an "auths" key name host? "host", "https://host", "host/v2/"... */
static bool key_matches(const char *key, const char *host)
{
	size_t hl = strlen(host);

	if (strncmp(key, "https://", 8) == 0)
		key += 8;
	else if (strncmp(key, "http://", 7) == 0)
		key += 7;
	return strncmp(key, host, hl) == 0 && (key[hl] == '\0' || key[hl] == '/');
}

/* nu and np (malloc'd, either NULL when out of memory) into *user and
 * *pass: both, or -ENOMEM with neither written and both freed. */
static int creds_take(char *nu, char *np, char **user, char **pass)
{
	if (!nu || !np) {
		free(nu);
		free(np);
		return -ENOMEM;
	}
	*user = nu;
	*pass = np;
	return 0;
}

/* A credential helper's name (the X of docker-credential-X): letters,
 * digits, '-', '_', '.'; never a path. */
static bool helper_name_valid(const char *s)
{
	if (!*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_' || *s == '.'))
			return false;
	return s[-1] != '.';
}

/* The helper v names (a JSON string) into *helper; ST_EFORMAT if it is not a name. */
static int helper_take(json_t *v, const char *path, const char *what, char **helper, char *why, size_t whylen)
{
	if (!json_is_string(v) || !helper_name_valid(json_string_value(v))) {
		if (why && whylen)
			snprintf(why, whylen, "%s: %s is not the name of a docker-credential-NAME helper", path, what);
		return ST_EFORMAT;
	}
	if (!(*helper = st_sys_strdup(json_string_value(v))))
		return -ENOMEM;
	return 2;
}

int ix_registry_auth_lookup(const char *path, const char *host, char **user, char **pass, char **helper, char *why,
			    size_t whylen)
{
	json_error_t e;
	json_t *root = json_load_file(path, 0, &e), *auths, *helpers, *v;
	const char *key;
	int rc = 1;

	if (!root) {
		FILE *f = fopen(path, "re");
		if (!f)
			return -errno;
		fclose(f);
		if (why && whylen)
			snprintf(why, whylen, "%s is not valid JSON at line %d: %s", path, e.line, e.text);
		return ST_EFORMAT;
	}
	auths = json_object_get(root, "auths");
	helpers = json_object_get(root, "credHelpers");
	if ((auths && !json_is_object(auths)) || (helpers && !json_is_object(helpers))) {
		if (why && whylen)
			snprintf(why, whylen, "%s: \"%s\" is not an object", path,
				 auths && !json_is_object(auths) ? "auths" : "credHelpers");
		rc = ST_EFORMAT;
		goto out_decref;
	}
	/* docker's order: the host's own helper, then its entry, then the
	 * store for every host. */
	json_object_foreach(helpers, key, v) {
		if (key_matches(key, host)) {
			rc = helper_take(v, path, "the credHelpers entry", helper, why, whylen);
			goto out_decref;
		}
	}
	json_object_foreach(auths, key, v) {
		json_t *a = json_object_get(v, "auth"), *u = json_object_get(v, "username"),
		       *p = json_object_get(v, "password");
		char *dec = NULL, *sep = NULL, *nu = NULL, *np = NULL;
		size_t declen;

		if (!key_matches(key, host))
			continue;
		if (json_is_string(a) && json_string_length(a)) {
			int drc = st_base64_decode(json_string_value(a), &dec, &declen);
			if (drc == -ENOMEM) {
				rc = drc;
				goto out_decref;
			}
			if (drc < 0 || strlen(dec) != declen || !(sep = strchr(dec, ':'))) {
				free(dec);
				if (why && whylen)
					snprintf(why, whylen, "%s: the auth of %s is not base64 of user:password", path, key);
				rc = ST_EFORMAT;
				goto out_decref;
			}
			*sep = '\0';
			nu = st_sys_strdup(dec);
			np = st_sys_strdup(sep + 1);
			free(dec);
		} else if (json_is_string(u) && json_is_string(p)) {
			nu = st_sys_strdup(json_string_value(u));
			np = st_sys_strdup(json_string_value(p));
		} else {
			continue;
		}
		rc = creds_take(nu, np, user, pass);
		break;
	}
	if (rc == 1 && (v = json_object_get(root, "credsStore")) && !(json_is_string(v) && !json_string_length(v)))
		rc = helper_take(v, path, "credsStore", helper, why, whylen);
out_decref:
	json_decref(root);
	return rc;
}

int ix_registry_helper_parse(const char *out, size_t len, char **user, char **pass, char *why, size_t whylen)
{
	json_t *root = json_loadb(out, len, 0, NULL), *u, *p;
	int rc = ST_EFORMAT;

	u = json_object_get(root, "Username");
	p = json_object_get(root, "Secret");
	if (!json_is_string(u) || !json_is_string(p)) {
		if (why && whylen)
			snprintf(why, whylen, "the helper's answer is not {\"Username\":...,\"Secret\":...}");
	} else if (strcmp(json_string_value(u), "<token>") == 0) {
		if (why && whylen)
			snprintf(why, whylen, "the helper gave an identity token (Username \"<token>\"), which strata "
					      "does not exchange: store a user and password or a registry token instead");
	} else {
		rc = creds_take(st_sys_strdup(json_string_value(u)), st_sys_strdup(json_string_value(p)), user, pass);
	}
	json_decref(root);
	return rc;
}

/* ------------------------------------------------------------- helpers */

/* Write host to fd (one write, as the helpers read one line) with SIGPIPE
 * blocked for this thread: a helper that exits without reading makes the
 * write fail with EPIPE, and the SIGPIPE it raised is taken back, so the
 * process sees no signal and no handler is installed. */
static void write_host(int fd, const char *host)
{
	sigset_t pipe_set, old;
	struct timespec zero = { 0, 0 };

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	int w = st_sys_write_all(fd, host, strlen(host));
	if (w == -EPIPE && !sigismember(&old, SIGPIPE))
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Run docker-credential-NAME get with host on stdin: 0 and *user, *pass;
 * 1 when the helper has nothing for host; else IX_EAUTH (or -ENOMEM) with
 * why. */
static int helper_get(const struct ix_auth_provider *p, const char *name, const char *file, const char *host,
		      char **user, char **pass, char *why, size_t whylen)
{
	static char *const no_env[] = { NULL };
	char prog[128], hwhy[ST_WHY_LEN] = "", *out;
	int in[2], outp[2], status = 0, rc;
	size_t len = 0, max = 65536;
	pid_t pid;

	snprintf(prog, sizeof(prog), "docker-credential-%s", name);
	if (!(out = st_sys_malloc(max)))
		return -ENOMEM;
	if (pipe2(in, O_CLOEXEC) < 0) {
		rc = st_why(why, whylen, IX_EAUTH, "cannot run the credential helper %s: %s", prog, strerror(errno));
		goto out_free;
	}
	if (pipe2(outp, O_CLOEXEC) < 0) {
		rc = st_why(why, whylen, IX_EAUTH, "cannot run the credential helper %s: %s", prog, strerror(errno));
		(void)st_sys_close(in[0]);
		(void)st_sys_close(in[1]);
		goto out_free;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	char *argv[] = { prog, "get", NULL };
	rc = posix_spawnp(&pid, prog, &fa, NULL, argv, p->envp ? p->envp : no_env);
	posix_spawn_file_actions_destroy(&fa);
	(void)st_sys_close(in[0]);
	(void)st_sys_close(outp[1]);
	if (rc != 0) {
		(void)st_sys_close(in[1]);
		(void)st_sys_close(outp[0]);
		rc = st_why(why, whylen, IX_EAUTH, "the credential helper %s (named in %s) cannot be run: %s%s", prog,
			    file, strerror(rc), rc == ENOENT ? " (it is not on PATH)" : "");
		goto out_free;
	}
	/* The server is the registry's host[:port], as docker names it. */
	write_host(in[1], host);
	(void)st_sys_close(in[1]);
	for (ssize_t got; len < max - 1 && (got = st_sys_read(outp[0], out + len, max - 1 - len)) != 0;) {
		if (got < 0)
			break;
		len += (size_t)got;
	}
	out[len] = '\0';
	(void)st_sys_close(outp[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		/* The helpers' words for "nothing stored for this server". */
		if (strstr(out, "credentials not found")) {
			rc = 1;
			goto out_free;
		}
		while (len && (out[len - 1] == '\n' || out[len - 1] == '\r'))
			out[--len] = '\0';
		rc = st_why(why, whylen, IX_EAUTH, "the credential helper %s (named in %s) failed for %s: %s", prog, file,
			    host, len ? out : "no message");
		goto out_free;
	}
	if ((rc = ix_registry_helper_parse(out, len, user, pass, hwhy, sizeof(hwhy))) < 0)
		rc = st_why(why, whylen, rc == -ENOMEM ? -ENOMEM : IX_EAUTH,
			    "the credential helper %s (named in %s), asked for %s: %s", prog, file, host,
			    rc == -ENOMEM ? "out of memory" : hwhy);
out_free:
	free(out);
	return rc;
}

/* ----------------------------------------------------------- providers */

/* Look host up in the auth file path (a helper it names is run): 0 found,
 * 1 nothing there, -ENOENT no such file, else an error with why. */
static int file_get(const struct ix_auth_provider *p, const char *path, const char *host, char **user, char **pass,
		    char *why, size_t whylen)
{
	char fwhy[ST_WHY_LEN] = "", *helper = NULL;
	int rc = ix_registry_auth_lookup(path, host, user, pass, &helper, fwhy, sizeof(fwhy));

	if (rc == 2) {
		rc = helper_get(p, helper, path, host, user, pass, why, whylen);
		free(helper);
		return rc;
	}
	if (rc < 0 && rc != -ENOENT)
		return st_why(why, whylen, rc, "cannot read the auth file %s: %s", path, fwhy[0] ? fwhy : strerror(-rc));
	return rc;
}

static int provider_get(void *ctx, const char *host, char **user, char **pass, char *why, size_t whylen)
{
	const struct ix_auth_provider *p = ctx;

	*user = *pass = NULL;
	if (p->user || p->pass) {
		char *u = p->user ? st_sys_strdup(p->user) : NULL, *w = p->pass ? st_sys_strdup(p->pass) : NULL;
		if ((p->user && !u) || (p->pass && !w)) {
			free(u);
			free(w);
			return st_why(why, whylen, -ENOMEM, "out of memory");
		}
		*user = u;
		*pass = w;
		return 0;
	}
	if (p->explicit_file && p->nfiles) {
		int rc = file_get(p, p->files[0], host, user, pass, why, whylen);
		if (rc == -ENOENT)
			return st_why(why, whylen, -ENOENT, "the auth file %s does not exist", p->files[0]);
		return rc < 0 ? rc : 0;
	}
	for (size_t i = 0; i < p->nfiles; i++) {
		int rc = file_get(p, p->files[i], host, user, pass, why, whylen);
		if (rc == 0 || (rc < 0 && rc != -ENOENT))
			return rc;
	}
	return 0;
}

void ix_auth_creds(struct ix_auth_provider *p, const char *user, const char *pass)
{
	*p = (struct ix_auth_provider){ .auth = { provider_get, p }, .user = user, .pass = pass };
}

void ix_auth_files(struct ix_auth_provider *p, const char *const *files, size_t n, bool explicit_file,
		   char *const *envp)
{
	*p = (struct ix_auth_provider){ .auth = { provider_get, p }, .files = files, .nfiles = n,
					.explicit_file = explicit_file, .envp = envp };
}
