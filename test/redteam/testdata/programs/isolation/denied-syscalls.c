// The denied syscalls: each must fail with EPERM from the filter (printed
// "<name> EPERM"). Arguments are harmless or invalid, so even a filter
// that let one through could not do damage.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/reboot.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static void report(const char *name, long r) {
	if (r >= 0)
		printf("%s SUCCEEDED %ld\n", name, r);
	else if (errno == EPERM)
		printf("%s EPERM\n", name);
	else if (errno == ENOSYS)
		printf("%s ENOSYS\n", name);
	else
		printf("%s ERRNO %d %s\n", name, errno, strerror(errno));
}

#define T(name, ...) report(#name, syscall(SYS_##name, __VA_ARGS__))

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	char buf[16];
	struct iovec local = {buf, sizeof buf}, remote = {(void *)0x400000, sizeof buf};
	struct timespec ts = {0, 0};
	char params[120] = {0};

	T(bpf, 0, NULL, 0);
	T(perf_event_open, NULL, 0, -1, -1, 0);
	T(userfaultfd, 0);
	T(io_uring_setup, 1, params);
	T(io_uring_enter, -1, 0, 0, 0, NULL, 0);
	T(io_uring_register, -1, 0, NULL, 0);
	T(keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
	T(add_key, "user", "redteam", "x", 1, -2 /* process keyring */);
	T(request_key, "user", "redteam", NULL, 0);
	report("ptrace_TRACEME", syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0));
	report("ptrace_ATTACH_1", syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0));
	report("ptrace_SEIZE_1", syscall(SYS_ptrace, 0x4206 /* PTRACE_SEIZE */, 1, 0, 0));
	T(process_vm_readv, 1, &local, 1, &remote, 1, 0);
	T(process_vm_writev, 1, &local, 1, &remote, 1, 0);
	T(open_by_handle_at, -1, NULL, 0);
	T(name_to_handle_at, AT_FDCWD, "/", NULL, NULL, 0);
	T(kexec_load, 0, 0, NULL, 0);
	T(kexec_file_load, -1, -1, 0, NULL, 0);
	T(init_module, NULL, 0, "");
	T(finit_module, -1, "", 0);
	T(delete_module, "redteam_nonexistent", O_NONBLOCK);
	T(reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_CAD_OFF, NULL);
	T(swapon, "/nonexistent-swap", 0);
	T(swapoff, "/nonexistent-swap");
	T(acct, NULL);
	T(syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	T(setns, -1, 0);
	T(quotactl, 0, NULL, 0, NULL);
	T(clock_settime, 0x7fffffff, &ts);
	T(clock_adjtime, 0x7fffffff, NULL);
	T(settimeofday, NULL, NULL);
	T(adjtimex, NULL);
	T(iopl, 0);
	T(ioperm, 0, 0, 0);
	T(sethostname, "x", 1);
	T(setdomainname, "x", 1);
	T(kcmp, getpid(), getpid(), 0, 0, 0);
	T(pidfd_getfd, -1, 0, 0);
	T(fanotify_init, 0, 0);
	T(vhangup, 0);
	T(process_madvise, -1, NULL, 0, 0, 0);
	report("personality_READ_IMPLIES_EXEC", syscall(SYS_personality, 0x0400000));
	report("personality_ADDR_NO_RANDOMIZE", syscall(SYS_personality, 0x0040000));
	long cur = syscall(SYS_personality, 0xffffffff);
	printf("personality query %s\n", cur >= 0 ? "OK" : "FAILED");
	printf("DONE\n");
	return 0;
}
