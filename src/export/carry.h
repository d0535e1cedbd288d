/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Counters carried over an agent restart (--pin DIR, docs/continuity.md). At a clean exit the
 * agent writes every counter series' last value into a BPF hash map pinned in DIR (bpffs);
 * the next agent reads them back, empties the map, and adds each one to that series from
 * then on, so Prometheus sees no counter go down. A series is named by two 64-bit hashes of
 * its text (name, suffix and labels as exported).
 */
#ifndef PLUMB_EXPORT_CARRY_H
#define PLUMB_EXPORT_CARRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CARRY_DEFAULT_CAPACITY 131072
#define CARRY_MAP_NAME	       "counters"

struct carry;

/*
 * Opens (or creates and pins) DIR/counters, DIR on a bpf file system (made if missing), and
 * takes what a previous agent left in it as this agent's offsets; the map is left empty, so
 * an agent that dies without saving leaves nothing stale behind. 0 or -errno with err set.
 */
int carry_open(const char *dir, unsigned int capacity, struct carry **out, char *err,
	       size_t errlen);

/* prom_writer's adjust hook: value + the series' offset; recorded when recording is on. */
double carry_adjust(void *ctx, const char *series, size_t len, double value);

/* Recording on: every series carry_adjust sees from now on is kept for carry_save(). */
void carry_record(struct carry *c);

/*
 * Writes the recorded series into the pinned map (and how many did not fit). 0 or -errno with
 * err set; *saved and *dropped say how many went in and how many did not.
 */
int carry_save(struct carry *c, size_t *saved, uint64_t *dropped, char *err, size_t errlen);

/*
 * An agent that fails to start after carry_open: what it took goes back into the map, for
 * the next one. 0 or -errno.
 */
int carry_put_back(struct carry *c);

/*
 * DIR/counters_<module> (made if missing) for a module whose maps can be handed over
 * (src/adopt.h): what the previous agent left in it is taken and the map emptied, as
 * carry_open does with DIR/counters. 0 or -errno with err set.
 */
int carry_open_part(struct carry *c, const char *dir, const char *module, char *err, size_t errlen);

/* The module's maps were taken over: its series carry only the part user space adds. */
void carry_use_part(struct carry *c, const char *module);

/*
 * At exit, after the recording collect: until carry_part_end, carry_adjust takes each value
 * it sees as what the module's maps hold of the series, and keeps the series' recorded
 * value less it for the module's part (written by carry_save); 0 for each series it sees
 * when maps_hold_all (the module's maps hold the whole of every series, read again or not).
 * 0 or -errno.
 */
int carry_part_begin(struct carry *c, const char *module, bool maps_hold_all);
void carry_part_end(struct carry *c);

/* What the start found: series restored, and those the previous agent could not save. */
size_t carry_restored(const struct carry *c);
uint64_t carry_previous_dropped(const struct carry *c);
unsigned int carry_capacity(const struct carry *c);

void carry_close(struct carry *c);

#endif
