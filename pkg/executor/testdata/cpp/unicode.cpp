#include <iostream>

int main() {
    std::cout << "héllo wörld ✓ 日本語 🚀" << std::endl;
    return 0;
}
