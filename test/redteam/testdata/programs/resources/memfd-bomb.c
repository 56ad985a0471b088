/* Memory through memfd_create: anonymous shmem files on no tmpfs of the
   run's, 8 MiB each (under the file-size limit), kept open and touched.
   The memory cgroup must stop it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void) {
	static char buf[1 << 16];
	memset(buf, 'm', sizeof buf);
	for (int i = 0; i < 200; i++) {
		int fd = memfd_create("hog", 0);
		if (fd < 0) {
			printf("memfd_create: %s after %d MiB\n", strerror(errno), i * 8);
			return 1;
		}
		for (int k = 0; k < (8 << 20) / (int)sizeof buf; k++)
			if (write(fd, buf, sizeof buf) < 0) {
				printf("write: %s after %d MiB\n", strerror(errno), i * 8);
				return 1;
			}
		printf("MiB %d\n", (i + 1) * 8);
		fflush(stdout);
	}
	printf("SURVIVED 1600 MiB in memfds\n");
	return 0;
}
