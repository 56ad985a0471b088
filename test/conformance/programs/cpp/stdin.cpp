#include <iostream>

int main() {
    std::cout << std::cin.rdbuf();
}
