/* Fill /tmp until ENOSPC: /tmp is the run's own bounded tmpfs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	static char buf[1 << 16];
	memset(buf, 't', sizeof buf);
	long long total = 0;
	for (int i = 0;; i++) {
		char name[64];
		snprintf(name, sizeof name, "/tmp/fill-%04d", i);
		int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			printf("open: %s\nTOTAL %lld\n", errno == ENOSPC ? "ENOSPC" : strerror(errno), total);
			return 1;
		}
		for (int k = 0; k < (4 << 20) / (int)sizeof buf; k++) {
			ssize_t n = write(fd, buf, sizeof buf);
			if (n < 0) {
				printf("write: %s\nTOTAL %lld\n", errno == ENOSPC ? "ENOSPC" : strerror(errno), total);
				return 1;
			}
			total += n;
		}
		close(fd);
	}
}
