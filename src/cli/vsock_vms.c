/* --vm and --config for `vmio vsock`; see vsock_vms.h. */
#include "cli/vsock_vms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "cli/options.h"
#include "virtio/virtqueue.h"

static const char default_group[] = "default";

/* Formats into err with a prefix; returns -1. */
__attribute__((format(printf, 4, 5))) static int
fail(char *err, size_t err_size, const char *prefix, const char *fmt, ...)
{
	size_t n;
	va_list ap;
	int k = snprintf(err, err_size, "%s", prefix);

	n = k < 0 ? 0 : (size_t)k;
	if (n >= err_size)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err + n, err_size - n, fmt, ap);
	va_end(ap);
	return -1;
}

static void spec_release(struct vsock_vm_spec *s)
{
	free(s->socket);
	free(s->uds_path);
	for (unsigned i = 0; i < s->ngroups; i++)
		free(s->groups[i]);
	memset(s, 0, sizeof(*s));
}

struct vsock_vm_spec *vsock_vms_add(struct vsock_vm_list *list)
{
	struct vsock_vm_spec *v;

	if (list->n >= VSOCK_MAX_VMS)
		return NULL;
	v = realloc(list->vms, (list->n + 1) * sizeof(*v));
	if (!v)
		return NULL;
	list->vms = v;
	memset(&v[list->n], 0, sizeof(*v));
	v[list->n].thread = -1;
	return &v[list->n++];
}

/* Keys compare with '_' and '-' alike. */
static bool key_is(const char *key, size_t klen, const char *name)
{
	size_t i;

	for (i = 0; i < klen && name[i]; i++) {
		char c = key[i] == '_' ? '-' : key[i];

		if (c != name[i])
			return false;
	}
	return i == klen && !name[i];
}

static int set_groups(struct vsock_vm_spec *s, const char *val, char *err,
		      size_t err_size, const char *pfx)
{
	const char *p = val;

	for (unsigned i = 0; i < s->ngroups; i++)
		free(s->groups[i]);
	s->ngroups = 0;
	for (;;) {
		const char *end = strchr(p, '+');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (!len)
			return fail(err, err_size, pfx,
				    "groups: '%s' has an empty group name", val);
		if (len > VSOCK_VM_GROUP_MAX_LEN)
			return fail(err, err_size, pfx,
				    "groups: a group name is longer than %u "
				    "bytes",
				    VSOCK_VM_GROUP_MAX_LEN);
		if (s->ngroups == VSOCK_VM_MAX_GROUPS)
			return fail(err, err_size, pfx,
				    "groups: more than %u groups",
				    VSOCK_VM_MAX_GROUPS);
		s->groups[s->ngroups] = strndup(p, len);
		if (!s->groups[s->ngroups])
			return fail(err, err_size, pfx, "out of memory");
		s->ngroups++;
		if (!end)
			return 0;
		p = end + 1;
	}
}

static int set_path(char **slot, const char *name, const char *val,
		    char *err, size_t err_size, const char *pfx)
{
	if (!val[0])
		return fail(err, err_size, pfx, "%s: empty path", name);
	free(*slot);
	*slot = strdup(val);
	if (!*slot)
		return fail(err, err_size, pfx, "out of memory");
	return 0;
}

/* Sets one key of a VM. pfx starts every message. */
static int set_key(struct vsock_vm_spec *s, const char *key, size_t klen,
		   const char *val, char *err, size_t err_size, const char *pfx)
{
	uint64_t v;

	if (key_is(key, klen, "guest-cid")) {
		if (vmio_parse_u64(val, UINT64_MAX, &v) ||
		    v < VSOCK_MIN_GUEST_CID || v > VSOCK_MAX_GUEST_CID)
			return fail(err, err_size, pfx,
				    "guest-cid: '%s' is not a number from %llu "
				    "to %llu (0, 1 and 2 are reserved)",
				    val, VSOCK_MIN_GUEST_CID,
				    VSOCK_MAX_GUEST_CID);
		s->guest_cid = v;
		return 0;
	}
	if (key_is(key, klen, "socket"))
		return set_path(&s->socket, "socket", val, err, err_size, pfx);
	if (key_is(key, klen, "uds-path"))
		return set_path(&s->uds_path, "uds-path", val, err, err_size,
				pfx);
	if (key_is(key, klen, "tx-buffer-size")) {
		if (vmio_parse_u64(val, VSOCK_MAX_BUF_SIZE, &v) || !v)
			return fail(err, err_size, pfx,
				    "tx-buffer-size: '%s' is not a number "
				    "from 1 to %u",
				    val, VSOCK_MAX_BUF_SIZE);
		s->tx_buffer_size = v;
		return 0;
	}
	if (key_is(key, klen, "queue-size")) {
		if (vmio_parse_u64(val, VIRTQ_MAX_SIZE, &v) || !v ||
		    (v & (v - 1)))
			return fail(err, err_size, pfx,
				    "queue-size: '%s' is not a power of two "
				    "from 1 to %u",
				    val, VIRTQ_MAX_SIZE);
		s->queue_size = (uint16_t)v;
		return 0;
	}
	if (key_is(key, klen, "groups"))
		return set_groups(s, val, err, err_size, pfx);
	if (key_is(key, klen, "forward-cid") ||
	    key_is(key, klen, "forward-listen"))
		return fail(err, err_size, pfx, "%s", VSOCK_VMS_NO_FORWARD);
	if (key_is(key, klen, "thread")) {
		if (vmio_parse_u64(val, VMIO_MAX_WORKERS - 1, &v))
			return fail(err, err_size, pfx,
				    "thread: '%s' is not a worker from 0 to "
				    "%u",
				    val, VMIO_MAX_WORKERS - 1);
		s->thread = (int)v;
		return 0;
	}
	return fail(err, err_size, pfx,
		    "unknown key '%.*s' (expected guest-cid, socket, uds-path, "
		    "tx-buffer-size, queue-size, groups or thread)",
		    (int)(klen > 64 ? 64 : klen), key);
}

int vsock_vms_parse_arg(struct vsock_vm_list *list, const char *arg,
			char *err, size_t err_size)
{
	struct vsock_vm_spec *s;
	char *copy, *item, *save = NULL;
	int rc = 0;

	if (!arg[0])
		return fail(err, err_size, "--vm: ", "empty argument");
	s = vsock_vms_add(list);
	copy = strdup(arg);
	if (!s || !copy) {
		free(copy);
		return fail(err, err_size, "--vm: ",
			    s ? "out of memory" : "too many VMs (at most %u)",
			    VSOCK_MAX_VMS);
	}
	for (item = strtok_r(copy, ",", &save); item && !rc;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq)
			rc = fail(err, err_size, "--vm: ",
				  "'%s' is not KEY=VALUE", item);
		else
			rc = set_key(s, item, (size_t)(eq - item), eq + 1, err,
				     err_size, "--vm: ");
	}
	free(copy);
	return rc;
}

/* ---- YAML ---- */

struct yaml_ctx {
	yaml_parser_t p;
	yaml_event_t ev;
	bool have_ev;
	const char *name;
	char *err;
	size_t err_size;
};

static int ynext(struct yaml_ctx *y)
{
	if (y->have_ev)
		yaml_event_delete(&y->ev);
	y->have_ev = false;
	if (!yaml_parser_parse(&y->p, &y->ev)) {
		return fail(y->err, y->err_size, "", "%s:%zu: %s", y->name,
			    y->p.problem_mark.line + 1,
			    y->p.problem ? y->p.problem : "not YAML");
	}
	y->have_ev = true;
	return 0;
}

static size_t yline(const struct yaml_ctx *y)
{
	return y->ev.start_mark.line + 1;
}

static int yexpect(struct yaml_ctx *y, yaml_event_type_t t, const char *what)
{
	if (ynext(y))
		return -1;
	if (y->ev.type != t)
		return fail(y->err, y->err_size, "", "%s:%zu: expected %s",
			    y->name, yline(y), what);
	return 0;
}

/* One item of the vms list: a mapping of scalar keys to scalar values.
 * The MAPPING_START is the current event. */
static int yaml_vm(struct yaml_ctx *y, struct vsock_vm_list *list)
{
	unsigned idx = list->n;
	struct vsock_vm_spec *s = vsock_vms_add(list);
	char pfx[96];

	if (!s)
		return fail(y->err, y->err_size, "", "%s:%zu: too many VMs "
			    "(at most %u)", y->name, yline(y), VSOCK_MAX_VMS);
	s->line = (unsigned)yline(y);
	for (;;) {
		char *key;
		size_t klen;
		int rc;

		if (ynext(y))
			return -1;
		if (y->ev.type == YAML_MAPPING_END_EVENT)
			return 0;
		if (y->ev.type != YAML_SCALAR_EVENT)
			return fail(y->err, y->err_size, "",
				    "%s:%zu: vms[%u]: expected a key", y->name,
				    yline(y), idx);
		klen = y->ev.data.scalar.length;
		key = strndup((const char *)y->ev.data.scalar.value, klen);
		if (!key)
			return fail(y->err, y->err_size, "", "out of memory");
		if (ynext(y)) {
			free(key);
			return -1;
		}
		snprintf(pfx, sizeof(pfx), "%s:%zu: vms[%u]: ", y->name,
			 yline(y), idx);
		if (y->ev.type != YAML_SCALAR_EVENT) {
			rc = fail(y->err, y->err_size, pfx,
				  "%.*s: expected a single value", (int)
				  (klen > 64 ? 64 : klen), key);
		} else if (strlen((const char *)y->ev.data.scalar.value) !=
			   y->ev.data.scalar.length) {
			rc = fail(y->err, y->err_size, pfx,
				  "%.*s: value holds a NUL byte",
				  (int)(klen > 64 ? 64 : klen), key);
		} else {
			rc = set_key(s, key, klen,
				     (const char *)y->ev.data.scalar.value,
				     y->err, y->err_size, pfx);
		}
		free(key);
		if (rc)
			return rc;
	}
}

/* A top-level KEY: VALUE other than vms:, kept for the command. The key
 * is the current event. */
static int yaml_option(struct yaml_ctx *y, struct vsock_vm_list *list)
{
	unsigned line = (unsigned)yline(y);
	struct vsock_file_option *o;
	char *name = strdup((const char *)y->ev.data.scalar.value), key[65];

	/* For messages: the event is gone once the value is read. */
	snprintf(key, sizeof(key), "%s", (const char *)y->ev.data.scalar.value);
	if (!name)
		return fail(y->err, y->err_size, "", "out of memory");
	for (char *p = name; *p; p++)
		if (*p == '_')
			*p = '-';
	for (unsigned i = 0; i < list->nopts; i++)
		if (!strcmp(list->opts[i].name, name)) {
			free(name);
			return fail(y->err, y->err_size, "",
				    "%s:%u: %s: given twice (line %u)",
				    y->name, line, key, list->opts[i].line);
		}
	if (ynext(y)) {
		free(name);
		return -1;
	}
	if (y->ev.type != YAML_SCALAR_EVENT ||
	    strlen((const char *)y->ev.data.scalar.value) !=
		    y->ev.data.scalar.length) {
		free(name);
		return fail(y->err, y->err_size, "",
			    "%s:%u: %s: expected 'vms' (a list of VMs) or "
			    "an option with a single value", y->name, line,
			    key);
	}
	o = realloc(list->opts, (list->nopts + 1) * sizeof(*o));
	if (!o) {
		free(name);
		return fail(y->err, y->err_size, "", "out of memory");
	}
	list->opts = o;
	o = &o[list->nopts];
	o->name = name;
	o->value = strdup((const char *)y->ev.data.scalar.value);
	o->line = line;
	if (!o->value) {
		free(name);
		return fail(y->err, y->err_size, "", "out of memory");
	}
	list->nopts++;
	return 0;
}

/* stream { document { mapping { "vms": sequence { mapping* },
 * OPTION: value ... } } } */
static int yaml_doc(struct yaml_ctx *y, struct vsock_vm_list *list)
{
	bool seen_vms = false;

	if (yexpect(y, YAML_STREAM_START_EVENT, "a YAML stream") ||
	    yexpect(y, YAML_DOCUMENT_START_EVENT, "a document with a vms: list") ||
	    yexpect(y, YAML_MAPPING_START_EVENT, "a mapping with a vms: list"))
		return -1;
	for (;;) {
		if (ynext(y))
			return -1;
		if (y->ev.type == YAML_MAPPING_END_EVENT)
			break;
		if (y->ev.type != YAML_SCALAR_EVENT)
			return fail(y->err, y->err_size, "",
				    "%s:%zu: expected a top-level key ('vms' "
				    "or an option)",
				    y->name, yline(y));
		if (strcmp((const char *)y->ev.data.scalar.value, "vms")) {
			if (yaml_option(y, list))
				return -1;
			continue;
		}
		if (seen_vms)
			return fail(y->err, y->err_size, "",
				    "%s:%zu: 'vms' given twice", y->name,
				    yline(y));
		seen_vms = true;
		if (yexpect(y, YAML_SEQUENCE_START_EVENT,
			    "vms: a list of VMs"))
			return -1;
		for (;;) {
			if (ynext(y))
				return -1;
			if (y->ev.type == YAML_SEQUENCE_END_EVENT)
				break;
			if (y->ev.type != YAML_MAPPING_START_EVENT)
				return fail(y->err, y->err_size, "",
					    "%s:%zu: vms[%u]: expected a "
					    "mapping of keys to values",
					    y->name, yline(y), list->n);
			if (yaml_vm(y, list))
				return -1;
		}
	}
	if (!seen_vms)
		return fail(y->err, y->err_size, "", "%s: no 'vms' list",
			    y->name);
	if (yexpect(y, YAML_DOCUMENT_END_EVENT, "the end of the document") ||
	    yexpect(y, YAML_STREAM_END_EVENT, "one document only"))
		return -1;
	return 0;
}

int vsock_vms_parse_yaml(struct vsock_vm_list *list, const char *name,
			 const void *text, size_t len, char *err,
			 size_t err_size)
{
	struct yaml_ctx y = { .name = name, .err = err, .err_size = err_size };
	int rc;

	if (!yaml_parser_initialize(&y.p))
		return fail(err, err_size, "", "out of memory");
	yaml_parser_set_input_string(&y.p, text, len);
	rc = yaml_doc(&y, list);
	if (y.have_ev)
		yaml_event_delete(&y.ev);
	yaml_parser_delete(&y.p);
	return rc;
}

int vsock_vms_load_config(struct vsock_vm_list *list, const char *path,
			  char *err, size_t err_size)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0 || !buf) {
		rc = errno;
		free(buf);
		if (fd >= 0)
			close(fd);
		return fail(err, err_size, "", "--config: %s: %s", path,
			    strerror(rc));
	}
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *nb = cap < VSOCK_CONFIG_MAX_BYTES + 1
					   ? realloc(buf, cap * 2)
					   : NULL;

			if (!nb) {
				free(buf);
				close(fd);
				return fail(err, err_size, "",
					    "--config: %s: larger than %u bytes",
					    path, VSOCK_CONFIG_MAX_BYTES);
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = errno;
			free(buf);
			close(fd);
			return fail(err, err_size, "", "--config: %s: %s",
				    path, strerror(rc));
		}
		if (!n)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (len > VSOCK_CONFIG_MAX_BYTES) {
		free(buf);
		return fail(err, err_size, "", "--config: %s: larger than %u "
			    "bytes", path, VSOCK_CONFIG_MAX_BYTES);
	}
	rc = vsock_vms_parse_yaml(list, path, buf, len, err, err_size);
	free(buf);
	return rc;
}

/* ---- Checks ---- */

bool vsock_vms_in_namespace(const char *uds_path, const char *path)
{
	size_t n = strlen(uds_path);

	return !strncmp(path, uds_path, n) && path[n] == '_';
}

bool vsock_vms_is_listener(const char *uds_path, const char *path)
{
	size_t n = strlen(uds_path);

	return !strncmp(path, uds_path, n) &&
	       (!path[n] || !strcmp(path + n, ".seqpacket"));
}

/* No unix socket of this process may sit where a guest's connection to a
 * host port lands (<uds-path>_<port>): a guest could reach another VM's
 * host-side listener, and through it a guest outside its groups, or a
 * vhost-user socket. */
static int check_namespaces(const struct vsock_vm_list *list, char *err,
			    size_t err_size)
{
	static const char *const key[2] = { "socket", "uds-path" };

	for (unsigned i = 0; i < list->n; i++) {
		const struct vsock_vm_spec *g = &list->vms[i];

		for (unsigned j = 0; j < list->n; j++) {
			const struct vsock_vm_spec *o = &list->vms[j];
			/* A VM's own uds-path is its namespace, not in it. */
			const char *path[2] = { o->socket,
						j != i ? o->uds_path : NULL };

			if (vsock_vms_is_listener(g->uds_path, o->socket))
				return fail(err, err_size, "",
					    "VM %u: socket %s is VM %u's host "
					    "listener (%s, %s.seqpacket)",
					    j + 1, o->socket, i + 1,
					    g->uds_path, g->uds_path);
			for (unsigned k = 0; k < 2; k++)
				if (path[k] &&
				    vsock_vms_in_namespace(g->uds_path, path[k]))
					return fail(err, err_size, "",
						    "VM %u: %s %s is where VM "
						    "%u's guest reaches host "
						    "ports (%s_<port>)",
						    j + 1, key[k], path[k],
						    i + 1, g->uds_path);
		}
	}
	return 0;
}

int vsock_vms_check(struct vsock_vm_list *list, char *err, size_t err_size)
{
	if (!list->n)
		return fail(err, err_size, "", "no VM given");
	for (unsigned i = 0; i < list->n; i++) {
		struct vsock_vm_spec *s = &list->vms[i];
		char pfx[48];

		if (s->line)
			snprintf(pfx, sizeof(pfx), "VM %u (line %u): ", i + 1,
				 s->line);
		else
			snprintf(pfx, sizeof(pfx), "VM %u: ", i + 1);
		if (!s->guest_cid)
			return fail(err, err_size, pfx, "guest-cid is required");
		if (!s->socket)
			return fail(err, err_size, pfx, "socket is required");
		if (!s->uds_path)
			return fail(err, err_size, pfx, "uds-path is required");
		if (!s->ngroups && set_groups(s, default_group, err, err_size,
					      pfx))
			return -1;
		for (unsigned j = 0; j < i; j++) {
			const struct vsock_vm_spec *o = &list->vms[j];

			if (o->guest_cid == s->guest_cid)
				return fail(err, err_size, pfx,
					    "guest-cid %llu is VM %u's too",
					    (unsigned long long)s->guest_cid,
					    j + 1);
			if (!strcmp(o->socket, s->socket))
				return fail(err, err_size, pfx,
					    "socket %s is VM %u's too",
					    s->socket, j + 1);
			if (!strcmp(o->uds_path, s->uds_path))
				return fail(err, err_size, pfx,
					    "uds-path %s is VM %u's too",
					    s->uds_path, j + 1);
		}
	}
	return check_namespaces(list, err, err_size);
}

bool vsock_vms_share_group(const struct vsock_vm_spec *a,
			   const struct vsock_vm_spec *b)
{
	for (unsigned i = 0; i < a->ngroups; i++)
		for (unsigned j = 0; j < b->ngroups; j++)
			if (!strcmp(a->groups[i], b->groups[j]))
				return true;
	return false;
}

int vsock_vms_check_groups(const char *val, char *err, size_t err_size)
{
	struct vsock_vm_spec s = { 0 };
	int rc = set_groups(&s, val, err, err_size, "--");

	spec_release(&s);
	return rc;
}

void vsock_vms_release(struct vsock_vm_list *list)
{
	for (unsigned i = 0; i < list->n; i++)
		spec_release(&list->vms[i]);
	free(list->vms);
	list->vms = NULL;
	list->n = 0;
	for (unsigned i = 0; i < list->nopts; i++) {
		free(list->opts[i].name);
		free(list->opts[i].value);
	}
	free(list->opts);
	list->opts = NULL;
	list->nopts = 0;
}
