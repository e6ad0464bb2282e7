/* The --control server (control.h). */
#include "cli/control.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/fd.h"
#include "util/json.h"
#include "util/log.h"
#include "util/unix_socket.h"
#include "vhost-user/backend.h"

#define CONTROL_MAX_PARTS 1024u
#define CONTROL_MAX_SECTIONS 8u

struct control_part {
	struct vmio_control *ctl;
	unsigned section;
	vmio_control_write_fn fn;
	void *opaque;
	struct vmio_defer req;  /* on the part's loop */
	struct vmio_json frag;  /* written there, read on worker 0 after */
};

/* An assembled document and a newline, shared by the clients it goes
 * to: a slow client keeps its generation alive, not a copy each. */
struct control_doc {
	unsigned refs;
	size_t len;
	char data[];
};

struct control_client {
	struct vmio_control *ctl;
	int fd;
	struct control_doc *doc; /* sent from off */
	size_t off;
	unsigned long gen;   /* the snapshot it waits for (0: has doc) */
	bool reload;         /* waits for a hand-over's outcome */
	struct vmio_timer timeout;
};

struct vmio_control {
	struct vmio_loop *loop;
	char *device;
	char *path;
	struct stat st;
	int listen_fd;
	const char *sections[CONTROL_MAX_SECTIONS];
	unsigned nsections;
	struct control_part *parts;
	unsigned nparts;
	struct control_client clients[VMIO_CONTROL_MAX_CLIENTS];
	/* Snapshots: gen_started is in flight while it exceeds gen_done;
	 * pending counts the parts that have not written theirs. */
	unsigned long gen_started, gen_done;
	atomic_uint pending;
	struct vmio_defer done; /* on loop: the last part posts it */
	struct vmio_json doc;
	struct control_doc *latest; /* the last assembled, one ref */
	struct vmio_ratelimit rl;
	vmio_control_reload_fn reload;
	void *reload_opaque;
	bool reloading; /* a client's hand-over under way */
};

/* ---- Snapshots ---------------------------------------------------------- */

/* On the part's loop: its fragment, then, if it was the last, the
 * assembly on worker 0. The release of the count orders the fragment
 * before the assembly's acquire. */
static void part_cb(void *opaque)
{
	struct control_part *p = opaque;

	vmio_json_reset(&p->frag);
	p->fn(p->opaque, &p->frag);
	if (atomic_fetch_sub_explicit(&p->ctl->pending, 1,
				      memory_order_acq_rel) == 1)
		vmio_defer_post(&p->ctl->done);
}

static void start_snapshot(struct vmio_control *c)
{
	c->gen_started++;
	if (!c->nparts) {
		vmio_defer_schedule(&c->done);
		return;
	}
	atomic_store_explicit(&c->pending, c->nparts, memory_order_release);
	for (unsigned i = 0; i < c->nparts; i++)
		vmio_defer_post(&c->parts[i].req);
}

static void assemble(struct vmio_control *c)
{
	struct vmio_json *j = &c->doc;

	vmio_json_reset(j);
	vmio_json_object_begin(j);
	vmio_json_kv_string(j, "device", c->device);
	vmio_json_kv_uint(j, "pid", (uint64_t)getpid());
	for (unsigned s = 0; s < c->nsections; s++) {
		vmio_json_key(j, c->sections[s]);
		vmio_json_array_begin(j);
		for (unsigned i = 0; i < c->nparts; i++) {
			const struct control_part *p = &c->parts[i];

			if (p->section != s)
				continue;
			if (p->frag.truncated || p->frag.depth)
				vmio_json_raw(j, "{\"truncated\":true}", 18);
			else
				vmio_json_raw(j, p->frag.buf, p->frag.len);
		}
		vmio_json_array_end(j);
	}
	vmio_json_object_end(j);
	if (j->truncated) {
		static const char big[] = "{\"truncated\":true,\"error\":"
					  "\"the document is larger than "
					  "the control socket's cap\"}";

		vmio_json_reset(j);
		vmio_json_raw(j, big, sizeof(big) - 1);
	}
}

static void doc_unref(struct control_doc *d)
{
	if (d && !--d->refs)
		free(d);
}

static void client_close(struct control_client *cl)
{
	vmio_timer_fini(&cl->timeout);
	if (cl->fd >= 0) {
		vmio_loop_remove(cl->ctl->loop, cl->fd);
		close(cl->fd);
		cl->fd = -1;
	}
	doc_unref(cl->doc);
	cl->doc = NULL;
	cl->reload = false;
}

static void client_write(struct control_client *cl)
{
	while (cl->off < cl->doc->len) {
		ssize_t n = send(cl->fd, cl->doc->data + cl->off,
				 cl->doc->len - cl->off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* EPOLLOUT brings it back */
		if (n <= 0) {
			client_close(cl);
			return;
		}
		cl->off += (size_t)n;
	}
	client_close(cl);
}

static void client_io_cb(void *opaque, int fd, uint32_t events)
{
	struct control_client *cl = opaque;

	(void)fd;
	if (events & (EPOLLHUP | EPOLLERR)) {
		client_close(cl);
		return;
	}
	client_write(cl);
}

/* ---- Reloads ------------------------------------------------------------ */

static void client_send(struct control_client *cl, struct control_doc *d)
{
	cl->doc = d;
	cl->off = 0;
	if (vmio_loop_modify(cl->ctl->loop, cl->fd, EPOLLOUT))
		client_close(cl);
	else
		client_write(cl);
}

/* Whether the client that connected from sa (len bytes) asks for a
 * hand-over: it bound the abstract name that says so. */
static bool asks_reload(const struct sockaddr_un *sa, socklen_t len)
{
	size_t n = strlen(VMIO_CONTROL_RELOAD_NAME);

	return len >= offsetof(struct sockaddr_un, sun_path) + 1 + n &&
	       sa->sun_path[0] == '\0' &&
	       !memcmp(sa->sun_path + 1, VMIO_CONTROL_RELOAD_NAME, n);
}

/* {"reload":"ok","pid":N} or {"reload":"failed","error":why}, a line. */
static struct control_doc *reload_line(int pid, const char *why)
{
	struct vmio_json j;
	struct control_doc *d = NULL;

	vmio_json_init(&j, 4096);
	vmio_json_object_begin(&j);
	vmio_json_kv_string(&j, "reload", why ? "failed" : "ok");
	if (why)
		vmio_json_kv_string(&j, "error", why);
	else
		vmio_json_kv_uint(&j, "pid", (uint64_t)pid);
	vmio_json_object_end(&j);
	if (!j.truncated)
		d = malloc(sizeof(*d) + j.len + 1);
	if (d) {
		d->refs = 1;
		d->len = j.len + 1;
		memcpy(d->data, j.buf, j.len);
		d->data[j.len] = '\n';
	}
	vmio_json_fini(&j);
	return d;
}

static void answer_reload(struct control_client *cl, int pid, const char *why)
{
	struct control_doc *d = reload_line(pid, why);

	cl->reload = false;
	if (!d)
		client_close(cl);
	else
		client_send(cl, d);
}

static void start_reload(struct vmio_control *c, struct control_client *cl)
{
	char why[512];

	cl->reload = true;
	vmio_timer_arm_ms(&cl->timeout, VMIO_CONTROL_RELOAD_TIMEOUT_MS);
	if (c->reloading)
		return; /* this one's outcome is the one it waits for */
	if (!c->reload) {
		answer_reload(cl, 0, "this command cannot hand over (yet)");
		return;
	}
	log_info("control: a client asks for a hand-over");
	if (c->reload(c->reload_opaque, why, sizeof(why))) {
		answer_reload(cl, 0, why);
		return;
	}
	c->reloading = true;
}

void vmio_control_set_reload(struct vmio_control *c, vmio_control_reload_fn fn,
			     void *opaque)
{
	if (!c)
		return;
	c->reload = fn;
	c->reload_opaque = opaque;
}

void vmio_control_reload_done(struct vmio_control *c, int pid,
			      const char *why)
{
	if (!c)
		return;
	c->reloading = false;
	for (unsigned i = 0; i < VMIO_CONTROL_MAX_CLIENTS; i++)
		if (c->clients[i].fd >= 0 && c->clients[i].reload)
			answer_reload(&c->clients[i], pid, why);
}

static void done_cb(void *opaque)
{
	struct vmio_control *c = opaque;
	bool again = false;

	/* Pairs with the parts' release: their fragments are complete. */
	if (atomic_load_explicit(&c->pending, memory_order_acquire))
		return;
	c->gen_done = c->gen_started;
	assemble(c);
	doc_unref(c->latest);
	c->latest = malloc(sizeof(*c->latest) + c->doc.len + 1);
	if (c->latest) {
		c->latest->refs = 1;
		c->latest->len = c->doc.len + 1;
		memcpy(c->latest->data, c->doc.buf, c->doc.len);
		c->latest->data[c->doc.len] = '\n';
	}
	for (unsigned i = 0; i < VMIO_CONTROL_MAX_CLIENTS; i++) {
		struct control_client *cl = &c->clients[i];

		if (cl->fd < 0 || !cl->gen)
			continue;
		if (cl->gen > c->gen_done) {
			again = true;
			continue;
		}
		cl->gen = 0;
		if (!c->latest) {
			client_close(cl);
			continue;
		}
		c->latest->refs++;
		client_send(cl, c->latest);
	}
	if (again)
		start_snapshot(c);
}

/* ---- Clients ------------------------------------------------------------ */

static void timeout_cb(void *opaque)
{
	struct control_client *cl = opaque;

	log_ratelimited(&cl->ctl->rl, VMIO_LOG_WARN,
			"control: a client took no document in %u ms; closed",
			VMIO_CONTROL_TIMEOUT_MS);
	client_close(cl);
}

static struct control_client *free_client(struct vmio_control *c)
{
	for (unsigned i = 0; i < VMIO_CONTROL_MAX_CLIENTS; i++)
		if (c->clients[i].fd < 0)
			return &c->clients[i];
	return NULL;
}

static void accept_cb(void *opaque, int fd, uint32_t events)
{
	struct vmio_control *c = opaque;
	struct control_client *cl;
	struct sockaddr_un sa;
	socklen_t salen = sizeof(sa);
	int conn = accept4(fd, (struct sockaddr *)&sa, &salen,
			   SOCK_CLOEXEC | SOCK_NONBLOCK);

	(void)events;
	if (conn < 0)
		return;
	cl = free_client(c);
	if (!cl) {
		log_ratelimited(&c->rl, VMIO_LOG_WARN,
				"control: %u clients already; one closed",
				VMIO_CONTROL_MAX_CLIENTS);
		close(conn);
		return;
	}
	cl->fd = conn;
	/* Nothing to write until the snapshot: watch hang-ups only. */
	if (vmio_timer_init(&cl->timeout, c->loop, timeout_cb, cl) ||
	    vmio_loop_add(c->loop, conn, 0, client_io_cb, cl)) {
		vmio_timer_fini(&cl->timeout);
		close(conn);
		cl->fd = -1;
		return;
	}
	vmio_timer_arm_ms(&cl->timeout, VMIO_CONTROL_TIMEOUT_MS);
	if (asks_reload(&sa, salen)) {
		start_reload(c, cl);
		return;
	}
	/* A snapshot in flight may predate what this client wants to see:
	 * it waits for the next one. */
	cl->gen = c->gen_started + 1;
	if (c->gen_started == c->gen_done)
		start_snapshot(c);
}

/* ---- Lifetime ----------------------------------------------------------- */

struct vmio_control *vmio_control_new(struct vmio_loop *loop,
				      const char *device)
{
	struct vmio_control *c = calloc(1, sizeof(*c));

	if (!c || !(c->device = strdup(device))) {
		free(c);
		log_err("control: out of memory");
		return NULL;
	}
	c->loop = loop;
	c->listen_fd = -1;
	for (unsigned i = 0; i < VMIO_CONTROL_MAX_CLIENTS; i++) {
		c->clients[i].ctl = c;
		c->clients[i].fd = -1;
	}
	vmio_defer_init(&c->done, loop, done_cb, c);
	vmio_json_init(&c->doc, VMIO_CONTROL_DOC_MAX);
	c->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(5);
	return c;
}

int vmio_control_add(struct vmio_control *c, const char *section,
		     struct vmio_loop *loop, vmio_control_write_fn fn,
		     void *opaque)
{
	unsigned s;

	for (s = 0; s < c->nsections; s++)
		if (!strcmp(c->sections[s], section))
			break;
	if (s == c->nsections) {
		if (s == CONTROL_MAX_SECTIONS) {
			log_err("control: too many sections (a bug)");
			return -1;
		}
		c->sections[c->nsections++] = section;
	}
	if (c->nparts == CONTROL_MAX_PARTS) {
		log_err("control: too many parts (a bug)");
		return -1;
	}
	/* Parts are added before anything runs: nothing points into the
	 * array yet, so it may move. */
	struct control_part *parts =
		realloc(c->parts, (c->nparts + 1) * sizeof(*parts));
	if (!parts) {
		log_err("control: out of memory");
		return -1;
	}
	c->parts = parts;
	for (unsigned i = 0; i < c->nparts; i++)
		vmio_defer_init(&parts[i].req, parts[i].req.loop, part_cb,
				&parts[i]);
	struct control_part *p = &parts[c->nparts++];
	*p = (struct control_part){ .ctl = c, .section = s, .fn = fn,
				    .opaque = opaque };
	vmio_defer_init(&p->req, loop, part_cb, p);
	vmio_json_init(&p->frag, VMIO_CONTROL_DOC_MAX);
	return 0;
}

/* Serves on fd, listening at path already; st is its file's. */
static int serve_on(struct vmio_control *c, const char *path, int fd,
		    bool own_file)
{
	c->path = strdup(path);
	if (!c->path || vmio_loop_add(c->loop, fd, EPOLLIN, accept_cb, c)) {
		if (own_file)
			vmio_unix_unlink_if_same(path, &c->st);
		close(fd);
		free(c->path);
		c->path = NULL;
		log_err("control: cannot watch %s", path);
		return -ENOMEM;
	}
	c->listen_fd = fd;
	log_info("control: counters on %s", path);
	return 0;
}

int vmio_control_listen(struct vmio_control *c, const char *path)
{
	int fd = vmio_unix_listen(path, 16, "control", &c->st);

	if (fd < 0)
		return fd;
	return serve_on(c, path, fd, true);
}

int vmio_control_listen_fd(struct vmio_control *c, const char *path, int fd)
{
	int on = 0;
	socklen_t len = sizeof(on);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) < 0 || !on ||
	    stat(path, &c->st) < 0 || vmio_fd_set_nonblock(fd)) {
		close(fd);
		return -EINVAL;
	}
	return serve_on(c, path, fd, false);
}

int vmio_control_listener(const struct vmio_control *c)
{
	return c ? c->listen_fd : -1;
}

void vmio_control_give_up_listener(struct vmio_control *c)
{
	if (!c || c->listen_fd < 0)
		return;
	vmio_loop_remove(c->loop, c->listen_fd);
	vmio_close_fd(&c->listen_fd);
}

void vmio_control_free(struct vmio_control *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < VMIO_CONTROL_MAX_CLIENTS; i++)
		client_close(&c->clients[i]);
	if (c->listen_fd >= 0) {
		vmio_loop_remove(c->loop, c->listen_fd);
		close(c->listen_fd);
		vmio_unix_unlink_if_same(c->path, &c->st);
	}
	for (unsigned i = 0; i < c->nparts; i++) {
		vmio_defer_cancel(&c->parts[i].req);
		vmio_json_fini(&c->parts[i].frag);
	}
	vmio_defer_cancel(&c->done);
	doc_unref(c->latest);
	vmio_json_fini(&c->doc);
	free(c->parts);
	free(c->path);
	free(c->device);
	free(c);
}

/* ---- For the subcommands ------------------------------------------------ */

static void write_backend(void *opaque, struct vmio_json *j)
{
	vmio_json_object_begin(j);
	vmio_backend_write_stats(opaque, j);
	vmio_json_object_end(j);
}

int vmio_control_add_backend(struct vmio_control *c, const char *section,
			     struct vmio_loop *loop, struct vmio_backend *be)
{
	return vmio_control_add(c, section, loop, write_backend, be);
}

int vmio_control_open(struct vmio_loop *loop, const char *device,
		      const char *path,
		      int (*add)(void *opaque, struct vmio_control *c),
		      void *opaque, struct vmio_control **out)
{
	return vmio_control_open_fd(loop, device, path, -1, add, opaque, out);
}

int vmio_control_open_fd(struct vmio_loop *loop, const char *device,
			 const char *path, int fd,
			 int (*add)(void *opaque, struct vmio_control *c),
			 void *opaque, struct vmio_control **out)
{
	struct vmio_control *c;
	int rc;

	*out = NULL;
	if (!path)
		return 0;
	c = vmio_control_new(loop, device);
	if (!c || add(opaque, c)) {
		if (fd >= 0)
			close(fd);
		vmio_control_free(c);
		return -1;
	}
	rc = fd >= 0 ? vmio_control_listen_fd(c, path, fd)
		     : vmio_control_listen(c, path);
	if (rc) {
		log_err("control: cannot listen on %s: %s", path,
			vmio_unix_strerror(rc));
		vmio_control_free(c);
		return -1;
	}
	*out = c;
	return 0;
}
