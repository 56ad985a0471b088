// Socket kinds that bypass the loopback wall: raw IP, packet and ICMP
// sockets fail without capabilities, AF_VSOCK (the hypervisor's channel)
// is refused by the filter. Nothing is ever sent or connected.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static void try(const char *name, int domain, int type, int proto) {
	int fd = socket(domain, type, proto);
	if (fd >= 0) {
		printf("%s CREATED\n", name);
		close(fd);
		return;
	}
	const char *e = errno == EPERM ? "EPERM" : errno == EACCES ? "EACCES" : errno == EAFNOSUPPORT ? "EAFNOSUPPORT" : strerror(errno);
	printf("%s %s\n", name, e);
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	try("raw-icmp", AF_INET, SOCK_RAW, IPPROTO_ICMP);
	try("raw-tcp", AF_INET, SOCK_RAW, IPPROTO_TCP);
	try("raw-ip", AF_INET, SOCK_RAW, IPPROTO_RAW);
	try("raw-icmpv6", AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
	try("packet-raw", AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	try("packet-dgram", AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
	try("packet-legacy", AF_INET, SOCK_PACKET, htons(ETH_P_ALL));
	try("ping", AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
	try("vsock-stream", AF_VSOCK, SOCK_STREAM, 0);
	try("vsock-dgram", AF_VSOCK, SOCK_DGRAM, 0);
	try("vsock-seqpacket", AF_VSOCK, SOCK_SEQPACKET, 0);
	// The kernel ignores the high word of the domain; the filter too.
	long r = syscall(41 /* socket */, 0xffffffff00000000L | AF_VSOCK, SOCK_STREAM, 0);
	printf("vsock-highbits %s\n", r >= 0 ? "CREATED" : errno == EPERM ? "EPERM" : strerror(errno));
	if (r >= 0)
		close(r);
	// Ordinary sockets still work (the loopback is usable).
	try("tcp", AF_INET, SOCK_STREAM, 0);
	try("udp6", AF_INET6, SOCK_DGRAM, 0);
	return 0;
}
