#include <stdexcept>

int main() {
    // An uncaught exception ends in std::terminate, i.e. abort (SIGABRT).
    throw std::runtime_error("boom");
}
