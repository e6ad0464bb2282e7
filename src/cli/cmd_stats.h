/* `vmio stats PATH`: reads a running device's --control socket. */
#ifndef VMIO_CLI_CMD_STATS_H
#define VMIO_CLI_CMD_STATS_H

int vmio_cmd_stats(int argc, char **argv);

#endif
