#include <iostream>

int main() {
    std::cout << undefined_name << std::endl;
    return 0;
}
