/* Telling systemd how the service is doing (Type=notify): one datagram
 * of "KEY=VALUE" lines to the unix socket $NOTIFY_SOCKET names, as
 * sd_notify(3) sends it, without linking libsystemd. A name starting
 * with '@' is in the abstract namespace. */
#ifndef VMIO_UTIL_SD_NOTIFY_H
#define VMIO_UTIL_SD_NOTIFY_H

/* Sends state ("READY=1") to $NOTIFY_SOCKET. Returns 1 if sent, 0 if
 * NOTIFY_SOCKET is unset (nobody waits for it), or -errno (not logged):
 * an address that is not a unix socket path, or the send failed. */
int vmio_sd_notify(const char *state);

/* The same with fd attached (-1: none), never waiting: a notify socket
 * that is full is -EAGAIN (fd_store.h). */
int vmio_sd_notify_fd(const char *state, int fd);

/* READY=1, logged at warning when it cannot be sent (systemd would then
 * take the start for a failure once its timeout passes). */
void vmio_sd_notify_ready(void);

#endif
