/* ecw_clock.h - time, sleep and randomness behind one seam, so backoff and
 * lease logic can be tested without waiting: unit tests link with
 * -Wl,--wrap=ecw_sleep_ms and record the sleeps instead. */
#ifndef ECW_CLOCK_H
#define ECW_CLOCK_H

#include <stdint.h>

int64_t ecw_now_ms(void);        /* monotonic milliseconds */
void ecw_sleep_ms(int64_t ms);   /* returns early only on a signal */
uint32_t ecw_random_u32(void);   /* uniform, thread-safe; not for secrets */

#endif
