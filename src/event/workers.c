/* Worker threads; see workers.h. */
#include "event/workers.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct worker {
	struct vmio_workers *pool;
	struct vmio_loop *loop;
	unsigned index;
	int cpu; /* -1: not pinned */
	pthread_t thread;
	bool started;
	int rc; /* the loop's result */
};

struct vmio_workers {
	unsigned n;
	struct worker *w;
};

struct vmio_workers *vmio_workers_new(unsigned n, const unsigned *cpus,
				      unsigned ncpus)
{
	struct vmio_workers *p;

	if (!n || n > VMIO_MAX_WORKERS)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->n = n;
	p->w = calloc(n, sizeof(*p->w));
	if (!p->w) {
		free(p);
		return NULL;
	}
	for (unsigned k = 0; k < n; k++) {
		struct worker *w = &p->w[k];

		w->pool = p;
		w->index = k;
		w->cpu = cpus && ncpus ? (int)cpus[k % ncpus] : -1;
		w->loop = vmio_loop_new();
		if (!w->loop) {
			vmio_workers_free(p);
			return NULL;
		}
	}
	return p;
}

void vmio_workers_free(struct vmio_workers *p)
{
	if (!p)
		return;
	for (unsigned k = 0; k < p->n; k++)
		vmio_loop_free(p->w[k].loop);
	free(p->w);
	free(p);
}

unsigned vmio_workers_count(const struct vmio_workers *p)
{
	return p->n;
}

struct vmio_loop *vmio_workers_loop(struct vmio_workers *p, unsigned k)
{
	return p->w[k].loop;
}

/* A CPU that cannot be had (offline, outside a cgroup's set) is worth a
 * warning, not a refusal: the worker runs where the kernel puts it. */
static void pin(const struct worker *w, pthread_t t)
{
	cpu_set_t set;
	int rc;

	if (w->cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET((size_t)w->cpu, &set);
	rc = pthread_setaffinity_np(t, sizeof(set), &set);
	if (rc)
		log_warn("worker %u: cannot run on CPU %d only: %s", w->index,
			 w->cpu, strerror(rc));
}

static void *worker_main(void *opaque)
{
	struct worker *w = opaque;

	w->rc = vmio_loop_run(w->loop);
	if (w->rc) {
		log_err("worker %u: event loop failed: %s", w->index,
			strerror(-w->rc));
		vmio_workers_stop(w->pool);
	}
	return NULL;
}

static void join_all(struct vmio_workers *p)
{
	for (unsigned k = 1; k < p->n; k++) {
		struct worker *w = &p->w[k];

		if (w->started)
			pthread_join(w->thread, NULL);
		w->started = false;
	}
}

int vmio_workers_start(struct vmio_workers *p)
{
	pin(&p->w[0], pthread_self());
	for (unsigned k = 1; k < p->n; k++) {
		struct worker *w = &p->w[k];
		char name[24];
		int rc = pthread_create(&w->thread, NULL, worker_main, w);

		if (rc) {
			log_err("cannot start worker %u: %s", k, strerror(rc));
			vmio_workers_stop(p);
			join_all(p);
			return -rc;
		}
		w->started = true;
		snprintf(name, sizeof(name), "vmio-w%u", k);
		/* The kernel keeps 15 bytes: "vmio-w255" fits. */
		pthread_setname_np(w->thread, name);
		pin(w, w->thread);
	}
	return 0;
}

void vmio_workers_stop(struct vmio_workers *p)
{
	for (unsigned k = 0; k < p->n; k++)
		vmio_loop_stop(p->w[k].loop);
}

int vmio_workers_run(struct vmio_workers *p)
{
	int rc = vmio_loop_run(p->w[0].loop);

	if (rc)
		log_err("worker 0: event loop failed: %s", strerror(-rc));
	vmio_workers_stop(p);
	join_all(p);
	for (unsigned k = 1; k < p->n && !rc; k++)
		rc = p->w[k].rc;
	return rc;
}

unsigned vmio_cpus_allowed(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : 1;
}
