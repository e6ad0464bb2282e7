/* The control queue of the net device. */
#ifndef VMIO_DEVICES_NET_CTRL_QUEUE_H
#define VMIO_DEVICES_NET_CTRL_QUEUE_H

#include "devices/net/state.h"

/* Sets up and takes down the control queue's next turn. */
void vnet_ctrl_queue_init(struct vnet_device *d);
void vnet_ctrl_queue_fini(struct vnet_device *d);
/* Answers the commands on the control queue. */
void vnet_ctrl_run(struct vnet_device *d);
/* The control queue vq stops (on the device's loop), for a while or for
 * good: an ack still waiting is given back with its command. */
void vnet_ctrl_stop(struct vnet_device *d, struct vmio_vq *vq);

#endif
