/* Connecting to ADDRESS2 as socat's blocking connect would: a unix
 * listener with a full accept queue refuses a non-blocking connect at
 * once (EAGAIN), where a blocking one waits for room, so it is retried,
 * backing off, until connect-timeout='s deadline (none: for ever). A
 * connection on the loop retries on its timer (connection.c); before the
 * loop runs, redir_connect_wait simply waits. */
#ifndef VMIO_REDIRECT_CONNECT_RETRY_H
#define VMIO_REDIRECT_CONNECT_RETRY_H

#include <stdbool.h>

#include "redirect/endpoint.h"

#define REDIR_CONNECT_RETRY_FIRST_MS 5u

/* Whether redir_endpoint_connect(ep)'s result rc is worth a retry. */
bool redir_connect_retries(const struct redir_endpoint *ep, int rc);

/* The wait after one of ms: doubled, until it passes 100 ms. */
unsigned redir_connect_retry_next(unsigned ms);

/* Connects to ep, waiting for it: fine while nothing else runs yet.
 * Returns the fd, or -1 (logged). */
int redir_connect_wait(const struct redir_endpoint *ep);

#endif
