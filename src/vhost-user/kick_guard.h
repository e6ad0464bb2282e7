/* What a queue's kicks may cost it. A kick is a write to an eventfd that
 * the guest (through its notify register) or the VMM can make as fast as
 * it likes; each one wakes the queue's loop. A kick that finds the ring
 * as it was (vmio_vq_progress) brought no work: such idle kicks are
 * served at once up to a budget, a token bucket of `rate` a second
 * holding at most `burst`, and every kick that brought work earns one
 * back, so a busy guest whose late kicks find their work already done
 * never runs dry. Past the budget the queue stops watching its kick fd
 * and looks at the ring on a timer instead, 1 ms after the last kick and
 * then backing off to VMIO_KICK_POLL_MAX_NS; the first look that finds
 * work, or that finds no kick came since the one before, gives the
 * queue back its kick fd. A queue without its kick fd is "muted" here;
 * the --control keys keep their first names (kick_holds: mutes,
 * kick_held_ms: time muted, held_back: "idle-kicks" while muted), since
 * users read them. So an idle queue that is kicked without end
 * costs at most `rate` wake-ups a second plus a look every 32 ms,
 * whatever the kick rate, and a guest that stays within the budget is
 * served at every kick, as before.
 *
 * Pure policy: the caller reads the clock and the ring, and owns the
 * watch and the timer (queue_home.c). The counters are written by the
 * queue's home only and read by the control server on another thread:
 * relaxed atomics, single writer. */
#ifndef VMIO_VHOST_USER_KICK_GUARD_H
#define VMIO_VHOST_USER_KICK_GUARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Defaults of --idle-kicks RATE[:BURST]. */
#define VMIO_KICK_IDLE_RATE 2000u
#define VMIO_KICK_IDLE_BURST 512u
#define VMIO_KICK_IDLE_RATE_MAX 1000000u
#define VMIO_KICK_POLL_MIN_NS 1000000ull
#define VMIO_KICK_POLL_MAX_NS 32000000ull

/* The budget: rate 0 turns the guard off (every kick served). */
struct vmio_kick_budget {
	uint32_t rate;  /* idle kicks a second */
	uint32_t burst; /* idle kicks at once, >= 1 */
};

struct vmio_kick_stats {
	atomic_uint_fast64_t kicks;      /* kick fd wake-ups served */
	atomic_uint_fast64_t idle_kicks; /* of which found no work */
	atomic_uint_fast64_t mutes;      /* times the kick fd was let go */
	atomic_uint_fast64_t looks;      /* timer looks at the ring */
	atomic_uint_fast64_t muted_ns;   /* time without a kick fd, ended mutes */
	atomic_uint_fast64_t muted_since; /* when the current mute began; 0 */
};

struct vmio_kick_guard {
	struct vmio_kick_budget budget;
	uint64_t cost_ns;   /* an idle kick's price: 1 s / rate */
	uint64_t tokens_ns; /* the bucket, in units of cost_ns */
	uint64_t last_ns;   /* when it was last filled */
	uint64_t next_look_ns; /* while muted: the delay after the next look */
	bool muted;
	struct vmio_kick_stats stats;
};

/* At each start of the queue: a full bucket, kicks watched. The counters
 * are kept (they are the queue's, across sessions of its VM). */
void vmio_kick_guard_start(struct vmio_kick_guard *g,
			   const struct vmio_kick_budget *b, uint64_t now);
/* A kick was served; work: the ring moved. Returns true if the queue must
 * now let its kick fd go and look at the ring after
 * vmio_kick_guard_delay(). */
bool vmio_kick_guard_kick(struct vmio_kick_guard *g, uint64_t now, bool work);
/* A timer look while muted: work, and kicked (the kick fd was written
 * since the last look). Returns true if the queue takes its kick fd back;
 * false: look again after vmio_kick_guard_delay(). */
bool vmio_kick_guard_look(struct vmio_kick_guard *g, uint64_t now, bool work,
			  bool kicked);
/* While muted: how long until the next look. */
uint64_t vmio_kick_guard_delay(const struct vmio_kick_guard *g);
/* The queue stopped while muted: the mute ends. */
void vmio_kick_guard_stop(struct vmio_kick_guard *g, uint64_t now);

/* Parses "RATE" or "RATE:BURST" (RATE 0: off). Returns 0, or -1. */
int vmio_kick_budget_parse(const char *s, struct vmio_kick_budget *b);

/* Kicks served, and of them those that found no work; from any thread. */
uint64_t vmio_kick_stats_kicks(const struct vmio_kick_stats *s);
uint64_t vmio_kick_stats_idle(const struct vmio_kick_stats *s);
/* Whether the queue is muted now (its kick fd let go). */
bool vmio_kick_stats_muted(const struct vmio_kick_stats *s);

struct vmio_json;
/* The counters as members of the object being written; from any thread. */
void vmio_kick_stats_write(const struct vmio_kick_stats *s, uint64_t now,
			   struct vmio_json *j);

#endif
