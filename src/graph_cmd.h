/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_GRAPH_CMD_H
#define PLUMB_GRAPH_CMD_H

struct graph_options;

/* Runs `plumb graph`: fetches, joins, writes. Returns the exit status (0, or 1 on failure). */
int graph_cmd_run(const struct graph_options *o);

#endif
