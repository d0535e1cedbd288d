/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_LOG_H
#define PLUMB_LOG_H

enum log_level {
	LOG_WARN = 0,
	LOG_INFO = 1,
	LOG_DEBUG = 2,
};

extern enum log_level log_level;

void log_print(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Routes libbpf's own messages through log_print: warnings always, the rest with -v. */
void log_setup_libbpf(void);

#define pr_warn(fmt, ...)  log_print(LOG_WARN, "plumb: " fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...)  log_print(LOG_INFO, "plumb: " fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) log_print(LOG_DEBUG, "plumb: " fmt, ##__VA_ARGS__)

#endif
