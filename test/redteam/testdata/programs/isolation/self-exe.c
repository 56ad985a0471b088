// /proc/self/exe cannot be opened for writing (the runc CVE-2019-5736
// class: overwriting the binary that runs), nor can /proc/1/exe (the
// sandbox's init, the host's engine binary) be opened at all.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *en(int e) {
	switch (e) {
	case ETXTBSY: return "ETXTBSY";
	case EACCES: return "EACCES";
	case EROFS: return "EROFS";
	case ENOENT: return "ENOENT";
	case EPERM: return "EPERM";
	}
	return strerror(e);
}

static void try(const char *path, int flags, const char *label) {
	int fd = open(path, flags);
	if (fd >= 0) {
		printf("%s OPENED\n", label);
		close(fd);
	} else
		printf("%s DENIED %s\n", label, en(errno));
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	// The sandbox's init, and through it the engine's binary.
	try("/proc/1/exe", O_RDONLY, "init-exe read");
	try("/proc/1/exe", O_WRONLY, "init-exe write");
	try("/proc/1/exe", O_PATH, "init-exe path");
	char link[256] = {0};
	if (readlink("/proc/1/exe", link, sizeof link - 1) >= 0)
		printf("init-exe readlink LEAK %s\n", link);
	else
		printf("init-exe readlink DENIED %s\n", en(errno));
	try("/proc/1/root/usr", O_RDONLY | O_DIRECTORY, "init-root");
	try("/proc/1/cwd", O_RDONLY | O_DIRECTORY, "init-cwd");
	// The parent of our process (init) is pid 1; there is no pid 0 or host pid to reach.
	printf("ppid %d\n", getppid());
	// An interpreter binary is the host's file: writing it is refused too.
	try("/usr/bin/python3", O_WRONLY, "python3 write");
	// Its own binary last: where a kernel lets a program write it (gVisor
	// does), the program breaks itself.
	try("/proc/self/exe", O_WRONLY, "self-exe write");
	try("/proc/self/exe", O_RDWR, "self-exe rdwr");
	try("/proc/self/exe", O_WRONLY | O_TRUNC, "self-exe trunc");
	// The same file by its path: it is still being executed.
	char self[256] = {0};
	readlink("/proc/self/exe", self, sizeof self - 1);
	printf("self is %s\n", self);
	try(self, O_WRONLY, "self-path write");
	return 0;
}
