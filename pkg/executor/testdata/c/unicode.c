#include <stdio.h>

int main(void) {
    puts("héllo wörld ✓ 日本語 🚀");
    return 0;
}
