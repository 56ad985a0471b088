// Device nodes cannot be made: mknod of /dev/mem's numbers, of a disk, of
// a tty fails; were one made, nodev mounts would refuse to open it.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void try(const char *path, mode_t type, int maj, int min) {
	if (mknod(path, type | 0666, makedev(maj, min)) == 0) {
		int fd = open(path, O_RDONLY);
		printf("%s LEAK created, open %s\n", path, fd >= 0 ? "OK" : strerror(errno));
		return;
	}
	printf("%s DENIED %s\n", path, errno == EPERM ? "EPERM" : strerror(errno));
}

int main(void) {
	try("/tmp/mem", S_IFCHR, 1, 1);
	try("/work/kmem", S_IFCHR, 1, 2);
	try("/dev/shm/sda", S_IFBLK, 8, 0);
	try("/tmp/tty", S_IFCHR, 5, 0);
	try("/tmp/kvm", S_IFCHR, 10, 232);
	// A FIFO is fine: it is not a device.
	printf("fifo %s\n", mkfifo("/tmp/fifo", 0600) == 0 ? "OK" : strerror(errno));
	return 0;
}
