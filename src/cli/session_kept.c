/* A unit's session kept in systemd's fd store; see session_kept.h. */
#include "cli/session_kept.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handover/kept_state.h"
#include "util/fd.h"
#include "util/fd_store.h"
#include "util/json.h"
#include "util/log.h"
#include "vhost-user/session_state.h"

#define FORMAT 2u
#define FORMAT_NO_DEVICE 1u
/* A notify socket that was full is tried again after this long: systemd
 * reads it as it goes (it takes 512 datagrams, this host's kernel 10
 * where nothing raised net.unix.max_dgram_qlen). */
#define RETRY_MS 20

struct session_kept {
	struct vmio_kept *kept;
	const struct session_kept_ops *ops;
	void *opaque;
	struct vmio_backend *be;
	char name[32];
	struct vmio_ratelimit rl;
	struct vmio_timer retry; /* on the unit's loop */
	enum { KEPT_DONE, KEPT_WRITE, KEPT_CLEAR } owed;
	uint64_t writes, clears, retries; /* --control's fd_store */
};

void session_kept_collect(const char *prefix)
{
	unsigned n = vmio_fd_store_collect(prefix);

	if (n)
		log_info("fd store: %u descriptor%s given back", n,
			 n == 1 ? "" : "s");
}

void session_kept_done(void)
{
	unsigned n = vmio_fd_store_close_rest();

	if (n)
		log_info("fd store: %u descriptor%s of nothing served now closed",
			 n, n == 1 ? "" : "s");
}

static void retry_cb(void *opaque);

struct session_kept *session_kept_open(const char *prefix, const char *name,
				       const struct session_kept_ops *ops,
				       void *opaque, struct vmio_loop *loop)
{
	struct session_kept *k = calloc(1, sizeof(*k));

	if (k)
		k->kept = vmio_kept_open(prefix);
	if (k && k->kept && vmio_timer_init(&k->retry, loop, retry_cb, k)) {
		vmio_kept_free(k->kept);
		k->kept = NULL;
	}
	if (!k || !k->kept) {
		free(k);
		log_err("%s: out of memory for its fd store state", name);
		return NULL;
	}
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->ops = ops;
	k->opaque = opaque;
	k->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(5);
	return k;
}

void session_kept_free(struct session_kept *k)
{
	if (!k)
		return;
	vmio_timer_fini(&k->retry);
	vmio_kept_free(k->kept);
	free(k);
}

/* What the store is owed, sent now, or again on the timer while the
 * notify socket is full. */
static void owe(struct session_kept *k, int rc, int what)
{
	if (!rc && what == KEPT_WRITE)
		k->writes++;
	else if (!rc)
		k->clears++;
	k->retries += rc == -EAGAIN;
	k->owed = rc == -EAGAIN ? what : KEPT_DONE;
	if (k->owed != KEPT_DONE)
		vmio_timer_arm_ms(&k->retry, RETRY_MS);
	else
		vmio_timer_cancel(&k->retry);
}

static void clear(struct session_kept *k)
{
	owe(k, vmio_kept_clear(k->kept), KEPT_CLEAR);
}

/* ---- After a crash ------------------------------------------------------ */

void session_kept_taken_fini(struct session_kept_taken *t)
{
	for (unsigned i = 0; t->fds && i < t->nsession_fds + t->ndevice_fds;
	     i++)
		vmio_close_fd(&t->fds[i]);
	free(t->fds);
	free(t->bytes);
	*t = (struct session_kept_taken){ 0 };
}

int session_kept_parse(const struct session_kept_ops *ops, void *opaque,
		       struct session_kept_taken *t, size_t len, unsigned nfds,
		       char *why, size_t why_len)
{
	struct vmio_wire_reader r;
	uint32_t format, ndev = 0;

	vmio_wire_reader_init(&r, t->bytes, len);
	format = vmio_wire_get_u32(&r);
	if (vmio_wire_ok(&r) && format != FORMAT &&
	    format != FORMAT_NO_DEVICE) {
		snprintf(why, why_len, "record format %u; this vmio reads %u",
			 format, FORMAT);
		return -EPROTONOSUPPORT;
	}
	if (vmio_wire_ok(&r) && ops->check_identity(opaque, &r, why, why_len))
		return -ESTALE;
	if (format == FORMAT) {
		t->device_len = vmio_wire_get_count(&r, 1);
		t->device = vmio_wire_get_bytes(&r, t->device_len);
		ndev = vmio_wire_get_u32(&r);
		if (vmio_wire_ok(&r) && ndev > nfds)
			vmio_wire_fail(&r, "more device fds than it has");
	}
	if (!vmio_wire_ok(&r)) {
		snprintf(why, why_len, "its record is cut (%zu bytes): %s",
			 len, r.why);
		return -EINVAL;
	}
	if (!ops->put_device && t->device_len + ndev) {
		snprintf(why, why_len, "a device record this device has no use for");
		return -EINVAL;
	}
	t->ndevice_fds = ndev;
	t->nsession_fds = nfds - ndev;
	t->session = t->bytes + (len - r.left);
	t->session_len = r.left;
	return 0;
}

int session_kept_take(struct session_kept *k, struct session_kept_taken *t)
{
	char why[256] = "";
	size_t len = 0;
	unsigned nfds = 0;
	int rc;

	*t = (struct session_kept_taken){ 0 };
	t->fds = malloc(VMIO_KEPT_MAX_FDS * sizeof(*t->fds));
	if (!t->fds) {
		snprintf(why, sizeof(why), "out of memory");
		rc = -ENOMEM;
	} else {
		rc = vmio_kept_take(k->kept, &t->bytes, &len, t->fds,
				    VMIO_KEPT_MAX_FDS, &nfds, why,
				    sizeof(why));
	}
	/* Owned by t from here, split or not. */
	t->nsession_fds = nfds;
	if (rc > 0 && session_kept_parse(k->ops, k->opaque, t, len, nfds, why,
					 sizeof(why)))
		rc = -1;
	if (rc > 0)
		return 1;
	session_kept_taken_fini(t);
	if (rc < 0)
		session_kept_refuse(k, why);
	else
		clear(k);
	return rc < 0 ? -1 : 0;
}

int session_kept_restore_session(struct session_kept *k,
				 struct session_kept_taken *t,
				 struct vmio_backend *be)
{
	char err[200], why[256];

	/* Takes the session's fds, whatever it returns (each slot it takes
	 * is -1 after): the device's, behind them, stay t's. */
	if (!vmio_session_restore(be, t->session, t->session_len, t->fds,
				  t->nsession_fds, err, sizeof(err)))
		return 0;
	snprintf(why, sizeof(why), "its session: %s", err);
	session_kept_refuse(k, why);
	return -1;
}

/* Nothing taken back: what the store keeps goes, the front end's socket
 * with it, so that its VMM sees the end of the session. */
void session_kept_refuse(struct session_kept *k, const char *why)
{
	clear(k);
	log_err("%s: the session the fd store kept is not taken back: %s; the guest loses the device",
		k->name, why);
}

int session_kept_take_fd(struct session_kept *k, const char *name)
{
	return vmio_kept_take_fd(k->kept, name);
}

int session_kept_replace_fd(struct session_kept *k, const char *name, int fd)
{
	return vmio_kept_replace_fd(k->kept, name, fd);
}

/* ---- Keeping ------------------------------------------------------------- */

/* The record around rec; its fds appended to rec's (device fds stay the
 * device's: the kept state takes copies of all). Returns 0, or -1 with
 * *why. */
static int put_record(struct session_kept *k, struct vmio_wire_writer *w,
		      struct vmio_session_record *rec, int *fds,
		      unsigned *nfds, const char **why)
{
	struct vmio_wire_writer dev;
	unsigned ndev = 0;
	int rc = 0;

	vmio_wire_writer_init(&dev, 0);
	if (k->ops->put_device)
		rc = k->ops->put_device(k->opaque, &dev, fds + rec->nfds,
					VMIO_KEPT_MAX_FDS - rec->nfds, &ndev,
					why);
	/* The kept state takes the fds it is given: the session's are
	 * already copies, the device's are copied here. */
	for (unsigned i = 0; !rc && i < ndev; i++) {
		int fd = fcntl(fds[rec->nfds + i], F_DUPFD_CLOEXEC, 0);

		if (fd < 0) {
			while (i--)
				vmio_close_fd(&fds[rec->nfds + i]);
			*why = "out of fds";
			return -1;
		}
		fds[rec->nfds + i] = fd;
	}
	if (!rc) {
		memcpy(fds, rec->fds, rec->nfds * sizeof(*fds));
		*nfds = rec->nfds + ndev;
		vmio_wire_put_u32(w, FORMAT);
		k->ops->put_identity(k->opaque, w);
		vmio_wire_put_u32(w, (uint32_t)dev.len);
		vmio_wire_put_bytes(w, dev.buf, dev.len);
		vmio_wire_put_u32(w, ndev);
		vmio_wire_put_bytes(w, rec->bytes, rec->len);
		if (w->failed || dev.failed) {
			for (unsigned i = rec->nfds; i < *nfds; i++)
				vmio_close_fd(&fds[i]);
			*why = "out of memory";
			rc = -1;
		}
	}
	vmio_wire_writer_fini(&dev);
	return rc;
}

static void keep(struct session_kept *k)
{
	struct vmio_session_record rec;
	struct vmio_wire_writer w;
	int fds[VMIO_KEPT_MAX_FDS];
	unsigned nfds = 0;
	const char *no = NULL;
	char why[200];
	int rc = vmio_session_snapshot(k->be, &rec, why, sizeof(why));

	if (rc) {
		if (rc != -EAGAIN)
			log_ratelimited(&k->rl, VMIO_LOG_WARN,
					"%s: its session is not kept in the fd store: %s",
					k->name, why);
		return;
	}
	vmio_wire_writer_init(&w, 0);
	if (put_record(k, &w, &rec, fds, &nfds, &no)) {
		log_ratelimited(&k->rl, VMIO_LOG_WARN,
				"%s: its session is not kept in the fd store: %s",
				k->name, no);
		vmio_wire_writer_fini(&w);
		vmio_session_record_free(&rec);
		return;
	}
	rc = vmio_kept_write(k->kept, w.buf, w.len, fds, nfds);
	rec.nfds = 0; /* taken, whatever it returned */
	vmio_wire_writer_fini(&w);
	vmio_session_record_free(&rec);
	owe(k, rc, KEPT_WRITE);
	if (rc && rc != -EAGAIN)
		log_ratelimited(&k->rl, VMIO_LOG_WARN,
				"%s: its session is not kept in the fd store: %s",
				k->name, strerror(-rc));
}

static void on_session(void *opaque, bool gone)
{
	struct session_kept *k = opaque;

	if (gone)
		clear(k);
	else
		keep(k);
}

static void retry_cb(void *opaque)
{
	struct session_kept *k = opaque;

	if (k->owed == KEPT_CLEAR)
		clear(k);
	else if (k->owed == KEPT_WRITE)
		keep(k);
}

void session_kept_start(struct session_kept *k, struct vmio_backend *be)
{
	k->be = be;
	vmio_backend_set_session_watch(be, on_session, k);
}

void session_kept_changed(struct session_kept *k)
{
	if (k && k->be)
		keep(k);
}

void session_kept_write_stats(const struct session_kept *k,
			      struct vmio_json *j)
{
	vmio_json_key(j, "fd_store");
	vmio_json_object_begin(j);
	vmio_json_kv_uint(j, "writes", k->writes);
	vmio_json_kv_uint(j, "clears", k->clears);
	vmio_json_kv_uint(j, "retries", k->retries);
	vmio_json_kv_uint(j, "owed", k->owed != KEPT_DONE);
	vmio_json_object_end(j);
}
