/* For the net tests: a network namespace of the test's own, links in it
 * brought up, packet sockets on them. */
#ifndef VMIO_TESTS_NETNS_H
#define VMIO_TESTS_NETNS_H

/* Enters a new network namespace, once per process; fails the test
 * (saying it needs root) when it cannot. */
void netns_enter(void);
/* name up, without IPv6 (no router solicitations in the counts). */
void netns_link_up(const char *name);
/* A non-blocking AF_PACKET socket bound to name, every protocol. */
int netns_packet_socket(const char *name);

#endif
