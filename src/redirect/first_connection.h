/* ADDRESS1 that yields its one connection before the loop runs, on
 * worker 0: it connects (or is STDIO), or it receives datagrams
 * (UNIX-RECV), the bound socket itself being the connection. The sockmap
 * engine's UNIX-RECV has ADDRESS2 connected first, to join the map before
 * anything can reach ADDRESS1; if the kernel refuses ADDRESS2 there, auto
 * goes on with another engine on that same connection. */
#ifndef VMIO_REDIRECT_FIRST_CONNECTION_H
#define VMIO_REDIRECT_FIRST_CONNECTION_H

#include "redirect/connection.h"
#include "redirect/endpoint.h"
#include "redirect/engine_choice.h"

/* Makes ep[0]'s connection on w, relayed to ep[1] as ch settled (its
 * sockmap program is used or freed here; a fall-back changes w's setup),
 * sndbuf the sockmap engine's send buffers. Returns 0 or -1 (logged). */
int redir_first_connection(struct redir_worker *w, struct redir_endpoint ep[2],
			   struct redir_engine_choice *ch, int sndbuf);

#endif
