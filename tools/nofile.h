/* Raising this process's RLIMIT_NOFILE for a count of descriptors known
 * ahead (one per connection), or saying what stands in the way. */
#ifndef VMIO_TOOLS_NOFILE_H
#define VMIO_TOOLS_NOFILE_H

#include <stddef.h>
#include <stdint.h>

/* Raises RLIMIT_NOFILE to at least need descriptors (the hard limit too:
 * that takes CAP_SYS_RESOURCE, and never goes past fs.nr_open). Returns
 * 0, or -1 with a message in err. */
int nofile_raise(uint64_t need, char *err, size_t err_size);

#endif
