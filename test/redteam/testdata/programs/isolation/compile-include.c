/* Host files at compile time: the compiler runs in a sandbox as well, so
 * an #include of a host secret finds nothing. Each probe below would stop
 * the compile with "HOST FILE VISIBLE"; the last include must fail with
 * "No such file or directory" and print none of the host's content. */
#if __has_include("/etc/gshadow") || __has_include("/root/.bash_history") || __has_include("/etc/ssh/sshd_config")
#error "HOST FILE VISIBLE"
#endif
#if __has_include("/proc/1/environ") || __has_include("/proc/1/root/etc/shadow") || __has_include("/var/lib/sandbox-run/cache")
#error "HOST FILE VISIBLE"
#endif
#include "/etc/shadow"
int main(void) { return 0; }
