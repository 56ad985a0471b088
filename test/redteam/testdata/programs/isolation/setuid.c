// Setuid binaries do not elevate: each setuid-root program found is run
// with stdin a pipe we keep open (so a password prompt waits), and its
// credentials are read from /proc while it lives (or as a zombie). Every
// mount must be nosuid; no_new_privs and an empty capability set hold.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int checked, elevated;

static void status_line(pid_t pid, const char *key, char *out, size_t n) {
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	out[0] = 0;
	if (!f) {
		snprintf(out, n, "INVISIBLE(%s)", strerror(errno));
		return;
	}
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, strlen(key)) == 0) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out, n, "%s", line + strlen(key));
		}
	fclose(f);
}

static void run(const char *bin, char *const argv[]) {
	struct stat st;
	if (stat(bin, &st) != 0) {
		printf("%s ABSENT\n", bin);
		return;
	}
	printf("%s mode %o%s\n", bin, st.st_mode & 07777, st.st_mode & S_ISUID ? " (setuid bit set)" : "");
	int in[2];
	pipe(in);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execv(bin, argv);
		_exit(127);
	}
	close(in[0]);
	usleep(300000);
	char uid[128], caps[128];
	status_line(pid, "Uid:", uid, sizeof uid);
	status_line(pid, "CapEff:", caps, sizeof caps);
	// Uid: real effective saved fs; all four must be ours.
	unsigned r = 0, e = 0, s = 0, fs = 0;
	int n = sscanf(uid, "%u %u %u %u", &r, &e, &s, &fs);
	int ok = n == 4 && r == 1000 && e == 1000 && s == 1000 && fs == 1000;
	printf("%s uid [%s] caps [%s] -> %s\n", bin, uid, caps, ok ? "EUID 1000" : "ELEVATED");
	checked++;
	if (!ok)
		elevated++;
	kill(pid, SIGKILL);
	close(in[1]);
	waitpid(pid, NULL, 0);
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	char *passwd[] = {"passwd", NULL};
	char *su[] = {"su", "-c", "id", "root", NULL};
	char *mount[] = {"mount", "-t", "tmpfs", "none", "/tmp", NULL};
	char *chsh[] = {"chsh", NULL};
	char *newgrp[] = {"newgrp", "root", NULL};
	run("/usr/bin/passwd", passwd);
	run("/usr/bin/su", su);
	run("/usr/bin/mount", mount);
	run("/usr/bin/chsh", chsh);
	run("/usr/bin/newgrp", newgrp);
	printf("SETUID checked=%d elevated=%d\n", checked, elevated);

	// Every mount is nosuid, so no file can carry an effective setuid bit.
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[1024];
	int mounts = 0, suid = 0;
	while (fgets(line, sizeof line, f)) {
		// Fields: id parent maj:min root mountpoint options ...
		char root[512], mp[512], opts[512];
		if (sscanf(line, "%*d %*d %*s %511s %511s %511s", root, mp, opts) != 3)
			continue;
		mounts++;
		if (!strstr(opts, "nosuid")) {
			printf("mount %s SUID-CAPABLE (%s)\n", mp, opts);
			suid++;
		}
	}
	fclose(f);
	printf("MOUNTS %d %s\n", mounts, suid ? "SOME SUID" : "ALL NOSUID");

	char nnp[64], capeff[64], capbnd[64], capprm[64], capamb[64];
	status_line(getpid(), "NoNewPrivs:", nnp, sizeof nnp);
	status_line(getpid(), "CapEff:", capeff, sizeof capeff);
	status_line(getpid(), "CapPrm:", capprm, sizeof capprm);
	status_line(getpid(), "CapBnd:", capbnd, sizeof capbnd);
	status_line(getpid(), "CapAmb:", capamb, sizeof capamb);
	printf("NoNewPrivs%s\n", nnp);
	int nocaps = !strcmp(capeff, "\t0000000000000000") && !strcmp(capprm, "\t0000000000000000") &&
		     !strcmp(capbnd, "\t0000000000000000") && !strcmp(capamb, "\t0000000000000000");
	printf("CAPS %s eff%s prm%s bnd%s amb%s\n", nocaps ? "NONE" : "SOME", capeff, capprm, capbnd, capamb);
	printf("ids uid=%d euid=%d\n", getuid(), geteuid());
	return 0;
}
