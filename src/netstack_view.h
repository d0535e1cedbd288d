/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_NETSTACK_VIEW_H
#define PLUMB_NETSTACK_VIEW_H

struct netstack_options;

int netstack_view_run(const struct netstack_options *o);

#endif
