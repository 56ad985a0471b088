// /proc probes: the host kernel's secrets and knobs must be masked,
// read-only or invisible, and only the run's own few processes visible.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char *en(int e) {
	switch (e) {
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case ENOENT: return "ENOENT";
	case EROFS: return "EROFS";
	case EINVAL: return "EINVAL";
	case EIO: return "EIO";
	}
	return strerror(e);
}

// Reading a masked file gives nothing: it is /dev/null, unreadable, or
// not in this kernel at all.
static void readprobe(const char *name) {
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%s", name);
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		// Absent from this kernel, or unreadable: either way safe.
		printf("%s SAFE %s\n", name, errno == ENOENT ? "absent" : en(errno));
		return;
	}
	ssize_t n = read(fd, buf, sizeof buf);
	if (n < 0)
		printf("%s SAFE read %s\n", name, en(errno));
	else if (n == 0)
		printf("%s SAFE empty\n", name);
	else
		printf("%s LEAK %zd bytes: %.80s\n", name, n, buf);
	close(fd);
}

// Writing a kernel knob must be refused, or land in /dev/null.
static void writeprobe(const char *path, const char *what) {
	int fd = open(path, O_WRONLY);
	if (fd < 0) {
		if (errno == ENOENT)
			printf("write %s SAFE absent\n", path);
		else
			printf("write %s DENIED %s\n", path, en(errno));
		return;
	}
	struct stat st;
	fstat(fd, &st);
	ssize_t n = write(fd, what, strlen(what));
	if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3)
		printf("write %s SAFE devnull\n", path);
	else if (n < 0)
		printf("write %s DENIED %s\n", path, en(errno));
	else
		printf("write %s LEAK wrote %zd\n", path, n);
	close(fd);
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	const char *masked[] = {"kcore", "keys", "timer_list", "sched_debug", "kallsyms", "kmsg", "sysrq-trigger"};
	for (size_t i = 0; i < sizeof masked / sizeof *masked; i++)
		readprobe(masked[i]);
	// 'h' only prints sysrq help to the kernel log, were it ever reached.
	writeprobe("/proc/sysrq-trigger", "h");
	writeprobe("/proc/sys/kernel/hostname", "pwned");
	writeprobe("/proc/sys/kernel/core_pattern", "|/tmp/x");
	writeprobe("/proc/sys/vm/drop_caches", "1");
	writeprobe("/proc/sys/net/ipv4/ip_forward", "1");
	writeprobe("/proc/sys/kernel/ns_last_pid", "100");
	int fd = open("/proc/sys/kernel/modprobe", O_WRONLY | O_TRUNC);
	printf("modprobe %s\n", fd < 0 ? "DENIED" : "LEAK");

	// PID 1 (the sandbox's init, root inside) is not ours to read.
	const char *initp[] = {"/proc/1/mem", "/proc/1/environ", "/proc/1/maps", "/proc/1/exe", "/proc/1/root/.", "/proc/1/fd/3"};
	for (size_t i = 0; i < sizeof initp / sizeof *initp; i++) {
		int fd = open(initp[i], O_RDONLY);
		if (fd < 0) {
			printf("%s DENIED %s\n", initp[i], en(errno));
			continue;
		}
		char buf[64];
		ssize_t n = read(fd, buf, sizeof buf);
		printf("%s LEAK read %zd\n", initp[i], n);
		close(fd);
	}

	// Only our own processes: a handful of small pids.
	DIR *d = opendir("/proc");
	int count = 0, maxpid = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		int pid = atoi(e->d_name);
		if (pid <= 0)
			continue;
		count++;
		if (pid > maxpid)
			maxpid = pid;
		printf("pid %d\n", pid);
	}
	closedir(d);
	printf("PIDS count=%d max=%d self=%d\n", count, maxpid, getpid());
	printf("PIDS %s\n", count <= 4 && maxpid < 100 ? "FEW" : "MANY");
	return 0;
}
