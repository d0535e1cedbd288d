/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_DIAGNOSE_H
#define PLUMB_DIAGNOSE_H

#include <stdio.h>

struct diagnose_options;

void diagnose_usage(FILE *out);
int diagnose_run(const struct diagnose_options *o);

#endif
