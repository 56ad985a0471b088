/* Set the clocks: clock_settime, settimeofday, adjtimex, clock_adjtime. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <time.h>

static const char *e(int r) { return r == 0 ? "SUCCEEDED" : errno == EPERM ? "EPERM" : strerror(errno); }

int main(void) {
	struct timespec ts = {0, 0};
	struct timeval tv = {0, 0};
	printf("clock_settime REALTIME: %s\n", e(clock_settime(CLOCK_REALTIME, &ts)));
	printf("settimeofday: %s\n", e(settimeofday(&tv, NULL)));
	struct timex tx = {.modes = ADJ_OFFSET, .offset = 1000000};
	int r = adjtimex(&tx);
	printf("adjtimex: %s\n", e(r < 0 ? -1 : 0));
	struct timex tx2 = {.modes = ADJ_FREQUENCY, .freq = 1000};
	r = clock_adjtime(CLOCK_REALTIME, &tx2);
	printf("clock_adjtime: %s\n", e(r < 0 ? -1 : 0));
	struct timex ro = {.modes = 0};
	r = adjtimex(&ro);
	printf("adjtimex read-only: %s\n", r < 0 ? strerror(errno) : "ok");
	return 0;
}
