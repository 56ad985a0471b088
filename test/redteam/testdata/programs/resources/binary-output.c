/* Every byte value on stdout, invalid UTF-8 on stderr. */
#include <unistd.h>

int main(void) {
	unsigned char b[256];
	for (int i = 0; i < 256; i++)
		b[i] = (unsigned char)i;
	write(1, b, sizeof b);
	write(2, "\xff\xfe\xc0\x80 bad\n", 9);
	return 0;
}
