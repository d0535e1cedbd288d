/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_IO_VIEW_H
#define PLUMB_IO_VIEW_H

struct io_options;

/* Runs `plumb io`; returns the exit status. */
int io_view_run(const struct io_options *o);

#endif
