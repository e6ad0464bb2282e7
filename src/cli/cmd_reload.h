/* `vmio reload PATH`: a hand-over asked for on a --control socket. */
#ifndef VMIO_CLI_CMD_RELOAD_H
#define VMIO_CLI_CMD_RELOAD_H

int vmio_cmd_reload(int argc, char **argv);

#endif
