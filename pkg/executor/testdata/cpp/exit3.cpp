#include <iostream>

int main() {
    std::cout << "exiting with 3" << std::endl;
    return 3;
}
