#include <iostream>

int main() {
    std::cout << "héllo wörld ✓ 日本\n";
}
