/* The idle-kick budget of one queue (kick_guard.h). */
#include "vhost-user/kick_guard.h"

#include <errno.h>
#include <stdlib.h>

#include "util/json.h"

static void add(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static uint64_t get(const atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static uint64_t bucket_max(const struct vmio_kick_guard *g)
{
	return g->cost_ns * g->budget.burst;
}

static void refill(struct vmio_kick_guard *g, uint64_t now, uint64_t extra)
{
	uint64_t max = bucket_max(g), t = g->tokens_ns;

	if (now > g->last_ns)
		t += now - g->last_ns;
	g->last_ns = now;
	t += extra;
	g->tokens_ns = t < max ? t : max;
}

static void unmute(struct vmio_kick_guard *g, uint64_t now)
{
	uint64_t since = get(&g->stats.muted_since);

	g->muted = false;
	if (since && now > since)
		add(&g->stats.muted_ns, now - since);
	atomic_store_explicit(&g->stats.muted_since, 0, memory_order_relaxed);
}

void vmio_kick_guard_start(struct vmio_kick_guard *g,
			   const struct vmio_kick_budget *b, uint64_t now)
{
	g->budget = *b;
	if (g->budget.burst < 1)
		g->budget.burst = 1;
	g->cost_ns = b->rate ? 1000000000ull / b->rate : 0;
	g->tokens_ns = bucket_max(g);
	g->last_ns = now;
	g->muted = false;
	atomic_store_explicit(&g->stats.muted_since, 0, memory_order_relaxed);
}

bool vmio_kick_guard_kick(struct vmio_kick_guard *g, uint64_t now, bool work)
{
	add(&g->stats.kicks, 1);
	if (!work)
		add(&g->stats.idle_kicks, 1);
	if (!g->budget.rate)
		return false;
	refill(g, now, work ? g->cost_ns : 0);
	if (work)
		return false;
	if (g->tokens_ns >= g->cost_ns) {
		g->tokens_ns -= g->cost_ns;
		return false;
	}
	g->muted = true;
	g->next_look_ns = VMIO_KICK_POLL_MIN_NS;
	add(&g->stats.mutes, 1);
	/* 0 means "not muted" to a reader: a clock at 0 is no clock here. */
	atomic_store_explicit(&g->stats.muted_since, now ? now : 1,
			      memory_order_relaxed);
	return true;
}

bool vmio_kick_guard_look(struct vmio_kick_guard *g, uint64_t now, bool work,
			  bool kicked)
{
	add(&g->stats.looks, 1);
	if (work || !kicked) {
		/* The bucket filled while muted; what the storm did then
		 * was never served, so it costs nothing. */
		refill(g, now, 0);
		unmute(g, now);
		return true;
	}
	if (g->next_look_ns < VMIO_KICK_POLL_MAX_NS)
		g->next_look_ns *= 2;
	if (g->next_look_ns > VMIO_KICK_POLL_MAX_NS)
		g->next_look_ns = VMIO_KICK_POLL_MAX_NS;
	return false;
}

uint64_t vmio_kick_guard_delay(const struct vmio_kick_guard *g)
{
	return g->next_look_ns;
}

void vmio_kick_guard_stop(struct vmio_kick_guard *g, uint64_t now)
{
	if (g->muted)
		unmute(g, now);
}

int vmio_kick_budget_parse(const char *s, struct vmio_kick_budget *b)
{
	unsigned long rate, burst;
	char *end;

	errno = 0;
	if (*s < '0' || *s > '9')
		return -1;
	rate = strtoul(s, &end, 10);
	if (errno || rate > VMIO_KICK_IDLE_RATE_MAX)
		return -1;
	if (*end == ':') {
		s = end + 1;
		if (*s < '0' || *s > '9')
			return -1;
		burst = strtoul(s, &end, 10);
		if (errno || burst < 1 || burst > VMIO_KICK_IDLE_RATE_MAX)
			return -1;
	} else {
		burst = VMIO_KICK_IDLE_BURST;
	}
	if (*end)
		return -1;
	b->rate = (uint32_t)rate;
	b->burst = (uint32_t)burst;
	return 0;
}

uint64_t vmio_kick_stats_kicks(const struct vmio_kick_stats *s)
{
	return get(&s->kicks);
}

uint64_t vmio_kick_stats_idle(const struct vmio_kick_stats *s)
{
	return get(&s->idle_kicks);
}

bool vmio_kick_stats_muted(const struct vmio_kick_stats *s)
{
	return get(&s->muted_since) != 0;
}

void vmio_kick_stats_write(const struct vmio_kick_stats *s, uint64_t now,
			   struct vmio_json *j)
{
	uint64_t since = get(&s->muted_since), muted = get(&s->muted_ns);

	if (since && now > since)
		muted += now - since;
	vmio_json_kv_uint(j, "kicks", get(&s->kicks));
	vmio_json_kv_uint(j, "idle_kicks", get(&s->idle_kicks));
	vmio_json_kv_uint(j, "kick_holds", get(&s->mutes));
	vmio_json_kv_uint(j, "kick_looks", get(&s->looks));
	vmio_json_kv_uint(j, "kick_held_ms", muted / 1000000u);
	vmio_json_kv_string(j, "held_back", since ? "idle-kicks" : "none");
}
