/* Kernel memory through pipe buffers: 120 pipes grown to 1 MiB and filled.
   The buffers are kernel memory, charged to the run's memory cgroup. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	static char buf[1 << 16];
	memset(buf, 'p', sizeof buf);
	long long total = 0;
	for (int i = 0; i < 120; i++) {
		int p[2];
		if (pipe2(p, O_NONBLOCK) < 0) {
			printf("pipe: %s\n", strerror(errno));
			break;
		}
		fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
		for (;;) {
			ssize_t n = write(p[1], buf, sizeof buf);
			if (n <= 0)
				break;
			total += n;
		}
		if (i % 8 == 7) {
			printf("buffered %lld MiB\n", total >> 20);
			fflush(stdout);
		}
	}
	printf("TOTAL %lld\n", total);
	return 0;
}
