/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_TOP_H
#define PLUMB_TOP_H

struct top_options;

/* Runs `plumb top`; returns the exit status. */
int top_run(const struct top_options *o);

#endif
