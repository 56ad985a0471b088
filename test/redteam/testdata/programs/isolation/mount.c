// The mount family and chroot: every call fails with EPERM, whatever its
// arguments, and the mount table is unchanged.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>

static const char *en(long r) {
	if (r >= 0)
		return "SUCCEEDED";
	switch (errno) {
	case EPERM: return "EPERM";
	case ENOSYS: return "ENOSYS";
	case EINVAL: return "EINVAL";
	case EACCES: return "EACCES";
	}
	return strerror(errno);
}

static int count_mounts(void) {
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int n = 0, c;
	while (f && (c = fgetc(f)) != EOF)
		n += c == '\n';
	if (f)
		fclose(f);
	return n;
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	int before = count_mounts();
	mkdir("/tmp/mnt", 0755);
	mkdir("/tmp/newroot", 0755);
	printf("mount tmpfs %s\n", en(mount("tmpfs", "/tmp/mnt", "tmpfs", 0, "size=1m")));
	printf("mount bind %s\n", en(mount("/usr", "/tmp/mnt", NULL, MS_BIND, NULL)));
	printf("mount remount-rw %s\n", en(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL)));
	printf("mount proc %s\n", en(mount("proc", "/tmp/mnt", "proc", 0, NULL)));
	printf("umount2 proc %s\n", en(umount2("/proc/keys", MNT_DETACH)));
	printf("umount2 usr %s\n", en(umount2("/usr", MNT_DETACH)));
	printf("umount %s\n", en(syscall(SYS_umount2, "/proc/sys", 0)));
	printf("pivot_root %s\n", en(syscall(SYS_pivot_root, "/tmp/newroot", "/tmp/newroot")));
	printf("chroot %s\n", en(chroot("/tmp")));
	printf("fsopen %s\n", en(syscall(SYS_fsopen, "tmpfs", 0)));
	printf("fsmount %s\n", en(syscall(SYS_fsmount, -1, 0, 0)));
	printf("fspick %s\n", en(syscall(SYS_fspick, AT_FDCWD, "/", 0)));
	printf("fsconfig %s\n", en(syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0)));
	printf("open_tree %s\n", en(syscall(SYS_open_tree, AT_FDCWD, "/usr", OPEN_TREE_CLONE)));
	printf("move_mount %s\n", en(syscall(SYS_move_mount, AT_FDCWD, "/usr", AT_FDCWD, "/tmp/mnt", 0)));
	struct mount_attr attr = {.attr_clr = MOUNT_ATTR_RDONLY};
	printf("mount_setattr %s\n", en(syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &attr, sizeof attr)));
	int after = count_mounts();
	printf("MOUNTS %s (%d before, %d after)\n", before == after ? "UNCHANGED" : "CHANGED", before, after);
	// Still inside the same root.
	printf("root %s\n", access("/work", F_OK) == 0 && access("/usr/bin", F_OK) == 0 ? "SAME" : "CHANGED");
	return 0;
}
